#include "dmuon/results/schema_h5.hpp"

#include <fmt/format.h>

#include <variant>

#include "dmuon/base/error.hpp"

namespace dmuon::results {
namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& h : names) s += (s.empty() ? "" : ",") + h;
  return s;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    const auto comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One attribute, as its field's type is stored (a flag as int64 0/1, a list as one string).
struct AttrWriter {
  h5::Group& g;
  const char* name;
  void operator()(const std::string* v) const { g.write_attr(name, *v); }
  void operator()(const std::int64_t* v) const { g.write_attr(name, *v); }
  void operator()(const double* v) const { g.write_attr(name, *v); }
  void operator()(const bool* v) const {
    g.write_attr(name, static_cast<std::int64_t>(*v ? 1 : 0));
  }
  void operator()(const std::vector<std::string>* v) const { g.write_attr(name, join_names(*v)); }
};

struct AttrReader {
  const h5::Group& g;
  const char* name;
  void operator()(std::string* v) const { *v = g.read_attr_string(name); }
  void operator()(std::int64_t* v) const { *v = g.read_attr_int(name); }
  void operator()(double* v) const { *v = g.read_attr_double(name); }
  void operator()(bool* v) const { *v = g.read_attr_int(name) != 0; }
  void operator()(std::vector<std::string>* v) const { *v = split_names(g.read_attr_string(name)); }
};

std::size_t column_size(const ColumnRef& c) {
  return std::visit([](const auto* v) { return v->size(); }, c);
}

}  // namespace

void require_size(const h5::Group& g, const std::string& name, std::size_t got,
                  std::size_t expect) {
  if (got != expect)
    throw InputError(fmt::format("'{}': {} entries, expected {}", g.where(name), got, expect));
}

// Absent::implied: whether `r`'s value is what `older` would derive from the rest of it.
template <typename Record>
bool implied(const Field<Record>& f, const Record& r) {
  if (f.absent != Absent::implied || f.older == nullptr) return false;
  Record derived = r;
  f.older(derived);
  const FieldRef mine = field_ref(f, r), theirs = field_ref(f, derived);
  return std::visit([&](auto* v) { return *v == *std::get<decltype(v)>(theirs); }, mine);
}

template <typename Record>
void write_fields(h5::Group& g, const std::vector<Field<Record>>& fields, const Record& r,
                  const std::string& group) {
  for (const auto& f : fields)
    if (f.group == group && !implied(f, r)) std::visit(AttrWriter{g, f.name}, field_ref(f, r));
}

template <typename Record>
void read_fields(const h5::Group& g, const std::vector<Field<Record>>& fields, Record& r,
                 const std::string& group) {
  std::vector<void (*)(Record&)> older;
  for (const auto& f : fields) {
    if (f.group != group) continue;
    if (f.absent != Absent::required && !g.has_attr(f.name)) {
      if (f.older) older.push_back(f.older);
      continue;
    }
    std::visit(AttrReader{g, f.name}, f.ref(r));
  }
  for (auto derive : older) derive(r);
}

template <typename Table>
void write_columns(h5::Group& g, const std::vector<Column<Table>>& columns, const Table& t) {
  for (const auto& c : columns) {
    const ColumnRef ref = column_ref(c, t);
    if (c.optional && column_size(ref) == 0) continue;
    const h5::DatasetMeta meta{c.units, {c.dim}};
    if (const auto* s = std::get_if<std::vector<std::string>*>(&ref))
      g.write_strings(c.name, **s, meta);
    else
      g.write_ints(c.name, *std::get<std::vector<std::int64_t>*>(ref), meta);
  }
}

template <typename Table>
void read_columns(const h5::Group& g, const std::vector<Column<Table>>& columns, Table& t) {
  for (const auto& c : columns) {
    if (c.optional && !g.has(c.name)) continue;
    const ColumnRef ref = c.ref(t);
    if (auto* s = std::get_if<std::vector<std::string>*>(&ref))
      **s = g.read_strings(c.name);
    else
      *std::get<std::vector<std::int64_t>*>(ref) = g.read_ints(c.name);
  }
  const std::size_t rows = column_size(columns.front().ref(t));
  for (const auto& c : columns) {
    const std::size_t n = column_size(c.ref(t));
    if (!(c.optional && n == 0)) require_size(g, c.name, n, rows);
  }
}

template void write_fields(h5::Group&, const std::vector<Field<Provenance>>&, const Provenance&,
                           const std::string&);
template void write_fields(h5::Group&, const std::vector<Field<RunRecord>>&, const RunRecord&,
                           const std::string&);
template void read_fields(const h5::Group&, const std::vector<Field<Provenance>>&, Provenance&,
                          const std::string&);
template void read_fields(const h5::Group&, const std::vector<Field<RunRecord>>&, RunRecord&,
                          const std::string&);
template void write_columns(h5::Group&, const std::vector<Column<ModuleTable>>&,
                            const ModuleTable&);
template void write_columns(h5::Group&, const std::vector<Column<ParamTable>>&, const ParamTable&);
template void write_columns(h5::Group&, const std::vector<Column<SiteTable>>&, const SiteTable&);
template void write_columns(h5::Group&, const std::vector<Column<PartitionRecord>>&,
                            const PartitionRecord&);
template void read_columns(const h5::Group&, const std::vector<Column<ModuleTable>>&, ModuleTable&);
template void read_columns(const h5::Group&, const std::vector<Column<ParamTable>>&, ParamTable&);
template void read_columns(const h5::Group&, const std::vector<Column<SiteTable>>&, SiteTable&);
template void read_columns(const h5::Group&, const std::vector<Column<PartitionRecord>>&,
                           PartitionRecord&);

}  // namespace dmuon::results
