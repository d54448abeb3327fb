#pragma once
// The schema's tables (record_schema.hpp) applied to HDF5: a section's scalar fields as
// attributes, its table columns as parallel 1-D datasets. The results writer and reader call
// these for every section the tables describe; what no table describes (the padded shape
// array, ragged owner lists, timings, collectives, summary) they write and read themselves.

#include <string>
#include <vector>

#include "dmuon/results/h5.hpp"
#include "dmuon/results/record_schema.hpp"

namespace dmuon::results {

/// Writes the fields of `fields` stored in sub-group `group` ("" the record's own group) as
/// attributes of `g`.
template <typename Record>
void write_fields(h5::Group& g, const std::vector<Field<Record>>& fields, const Record& r,
                  const std::string& group);

/// Reads the fields of sub-group `group` from the attributes of `g`. A required field that is
/// missing or of the wrong type is an InputError naming it; an optional one that is missing
/// keeps the record's default, or takes what its `older` derives (after the others are read).
template <typename Record>
void read_fields(const h5::Group& g, const std::vector<Field<Record>>& fields, Record& r,
                 const std::string& group);

/// Writes every column of `t` (optional ones only when non-empty).
template <typename Table>
void write_columns(h5::Group& g, const std::vector<Column<Table>>& columns, const Table& t);

/// Reads the columns into `t`; each must have as many rows as the first. Optional columns
/// missing from the file stay empty.
template <typename Table>
void read_columns(const h5::Group& g, const std::vector<Column<Table>>& columns, Table& t);

/// InputError "'<file>:<path>/<name>': <got> entries, expected <expect>" unless they agree.
void require_size(const h5::Group& g, const std::string& name, std::size_t got, std::size_t expect);

}  // namespace dmuon::results
