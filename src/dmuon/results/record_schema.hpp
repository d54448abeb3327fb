#pragma once
// The results schema: one table per record section saying, for each field, where it is stored
// (attribute name, sub-group), where it lives in the record (an accessor), what a file that
// predates it means, and whether (and how) it is part of the run's match key. The HDF5 writer
// and reader (schema_h5.hpp) and dmuon_compare's key (compare.hpp) all walk these tables, so a
// new scalar field is its member in run_record.hpp and one row in record_schema.cpp. The on-disk
// layout is results/README.md.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// Where a scalar value lives in the record, by stored type: text, int64, float64, a 0/1 flag
/// (stored as int64), or a list of names (stored as one comma-separated string).
using FieldRef =
    std::variant<std::string*, std::int64_t*, double*, bool*, std::vector<std::string>*>;

/// What a file without the field means.
enum class Absent {
  required,  ///< an error: every file ever written has it
  optional,  ///< the record's default (run_record.hpp), or what `older` derives from the file
  /// optional, and written only where it differs from what `older` derives: a run that leaves
  /// it implied writes the same file as before the field existed.
  implied,
};

/// How the match key prints a field's value.
enum class KeyText {
  plain,               ///< as stored
  dash_if_empty,       ///< "-" for an empty string
  unknown_if_default,  ///< "?" when the value is the record's default (an older file's "unknown")
};

/// One scalar field (an HDF5 attribute) of a record section.
template <typename Record>
struct Field {
  const char* group;  ///< sub-group of the record's HDF5 group holding it ("" the group itself)
  const char* name;   ///< attribute name
  FieldRef (*ref)(Record&);
  Absent absent = Absent::required;
  /// With Absent::optional: fills the value of a file without it (from what that file kept),
  /// after every other field is read; nullptr keeps the record's default.
  void (*older)(Record&) = nullptr;
  /// Label in the run's match key, in table order; nullptr: not part of the key.
  const char* key = nullptr;
  KeyText key_text = KeyText::plain;
  /// The key's text when it combines fields (boundary spec and strictness); nullptr: key_text.
  std::string (*key_value)(const Record&) = nullptr;
};

/// The root attributes of a results file (besides `format` and `num_runs`).
const std::vector<Field<Provenance>>& provenance_fields();
/// A run's scalar fields: attributes of /runs/<i> and of its `boundary` and `partition` groups.
/// Table order is the match key's order.
const std::vector<Field<RunRecord>>& run_fields();

/// A pointer into `r` for reading a field (the accessors are shared with the reader).
template <typename Record>
FieldRef field_ref(const Field<Record>& f, const Record& r) {
  return f.ref(const_cast<Record&>(r));  // NOLINT: only read through by the callers
}

/// A field's text in the match key.
std::string key_text(const Field<RunRecord>& f, const RunRecord& r);

/// Where a column (a 1-D dataset of a table section) lives in its table.
using ColumnRef = std::variant<std::vector<std::string>*, std::vector<std::int64_t>*>;

/// One column of a table section: parallel 1-D datasets of equal length in one group, the
/// first column giving the length.
template <typename Table>
struct Column {
  const char* name;
  ColumnRef (*ref)(Table&);
  const char* units;  ///< "" none
  const char* dim;    ///< dimension label: what a row is
  /// Written only when non-empty; absent in older files (and then left empty).
  bool optional = false;
};

const std::vector<Column<ModuleTable>>& module_columns();
/// The parameter columns besides `ndim` and `shape` (a padded n x maxdim array).
const std::vector<Column<ParamTable>>& param_columns();
/// The site columns besides the ragged owner lists (`owner_count`, `owners`).
const std::vector<Column<SiteTable>>& site_columns();
/// The partition's per-slot columns.
const std::vector<Column<PartitionRecord>>& slot_columns();

template <typename Table>
ColumnRef column_ref(const Column<Table>& c, const Table& t) {
  return c.ref(const_cast<Table&>(t));  // NOLINT: only read through by the callers
}

}  // namespace dmuon::results
