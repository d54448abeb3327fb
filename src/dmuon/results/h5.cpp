#include "dmuon/results/h5.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <hdf5_hl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "dmuon/base/error.hpp"

namespace dmuon::results::h5 {
namespace {

// HDF5 reports no cause of its own for I/O failures; the operating system's errno (set by the
// write/open/fsync HDF5 made) usually names it: "No space left on device", "File too large".
[[noreturn]] void fail(const char* call, const std::string& where) {
  const int err = errno;
  throw RuntimeFailure(fmt::format("HDF5 call {} failed on '{}'{}", call, where,
                                   err != 0 ? fmt::format(": {}", std::strerror(err)) : ""));
}

template <typename T>
T chk(T rc, const char* call, const std::string& where) {
  if (rc < 0) fail(call, where);
  return rc;
}

Handle string_type(const std::string& where) {
  Handle t(chk(H5Tcopy(H5T_C_S1), "H5Tcopy", where), H5Tclose);
  chk(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size", where);
  chk(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset", where);
  return t;
}

std::string join(const std::string& path, const std::string& name) {
  return path == "/" ? "/" + name : path + "/" + name;
}

hsize_t product(const std::vector<hsize_t>& dims) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  return n;
}

// HDF5 closes every open object at exit (H5_term_library via atexit). After a write failed
// part-way (disk full, file-size limit) the half-closed file it finds there crashes it
// (SIGSEGV in H5F__close_cb, HDF5 1.10). Every object here is closed by RAII, so that exit-time
// pass has nothing to do: turn it off before the library initialises (this runs at static
// initialisation, before main and before any HDF5 call).
const bool g_no_atexit = [] {
  H5dont_atexit();
  return true;
}();

}  // namespace

void silence_errors() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && closer_ != nullptr) closer_(id_);
  id_ = -1;
}

std::string Group::where(const std::string& name) const {
  return fmt::format("{}:{}", *file_, name.empty() ? path_ : join(path_, name));
}

Group Group::create_group(const std::string& name) {
  const std::string w = where(name);
  Handle g(
      chk(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2", w),
      H5Gclose);
  return Group(std::move(g), file_, join(path_, name));
}

Group Group::open_group(const std::string& name) const {
  const std::string w = where(name);
  if (!has(name)) throw InputError(fmt::format("'{}': missing group", w));
  Handle g(chk(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), "H5Gopen2", w), H5Gclose);
  return Group(std::move(g), file_, join(path_, name));
}

bool Group::has(const std::string& name) const {
  // H5Lexists only checks the last component; callers use single names.
  return chk(H5Lexists(id(), name.c_str(), H5P_DEFAULT), "H5Lexists", where(name)) > 0;
}

std::vector<std::string> Group::children() const {
  H5G_info_t info;
  chk(H5Gget_info(id(), &info), "H5Gget_info", where(""));
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n =
        chk(H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
            "H5Lget_name_by_idx", where(""));
    std::string s(static_cast<std::size_t>(n) + 1, '\0');
    chk(H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(),
                           H5P_DEFAULT),
        "H5Lget_name_by_idx", where(""));
    s.resize(static_cast<std::size_t>(n));
    out.push_back(std::move(s));
  }
  return out;
}

// ---- attributes ------------------------------------------------------------------------------

namespace {
void write_scalar_attr(hid_t loc, const std::string& name, hid_t file_type, hid_t mem_type,
                       const void* value, const std::string& w) {
  if (chk(H5Aexists(loc, name.c_str()), "H5Aexists", w) > 0)
    chk(H5Adelete(loc, name.c_str()), "H5Adelete", w);
  Handle space(chk(H5Screate(H5S_SCALAR), "H5Screate", w), H5Sclose);
  Handle a(chk(H5Acreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
               "H5Acreate2", w),
           H5Aclose);
  chk(H5Awrite(a.get(), mem_type, value), "H5Awrite", w);
}
}  // namespace

void Group::write_attr(const std::string& name, const std::string& value) {
  const std::string w = where("@" + name);
  Handle t = string_type(w);
  const char* p = value.c_str();
  write_scalar_attr(id(), name, t.get(), t.get(), &p, w);
}

void Group::write_attr(const std::string& name, std::int64_t value) {
  write_scalar_attr(id(), name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, where("@" + name));
}

void Group::write_attr(const std::string& name, double value) {
  write_scalar_attr(id(), name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, where("@" + name));
}

bool Group::has_attr(const std::string& name) const {
  return chk(H5Aexists(id(), name.c_str()), "H5Aexists", where("@" + name)) > 0;
}

std::vector<std::string> Group::attr_names() const {
  const std::string w = where("");
  H5O_info_t info;
  chk(H5Oget_info(id(), &info), "H5Oget_info", w);
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    const ssize_t n =
        chk(H5Aget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
            "H5Aget_name_by_idx", w);
    std::string s(static_cast<std::size_t>(n) + 1, '\0');
    chk(H5Aget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(),
                           H5P_DEFAULT),
        "H5Aget_name_by_idx", w);
    s.resize(static_cast<std::size_t>(n));
    out.push_back(std::move(s));
  }
  return out;
}

namespace {
// Opens an attribute that must hold exactly one value: an array-valued attribute (or an empty
// one) read into a scalar would overrun the buffer.
Handle open_attr(hid_t loc, const std::string& name, const std::string& w) {
  if (chk(H5Aexists(loc, name.c_str()), "H5Aexists", w) <= 0)
    throw InputError(fmt::format("'{}': missing attribute", w));
  Handle a(chk(H5Aopen(loc, name.c_str(), H5P_DEFAULT), "H5Aopen", w), H5Aclose);
  Handle space(chk(H5Aget_space(a.get()), "H5Aget_space", w), H5Sclose);
  const auto cls = H5Sget_simple_extent_type(space.get());
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (cls == H5S_NO_CLASS || n < 0) fail("H5Sget_simple_extent_type", w);
  if (cls == H5S_NULL || n != 1)
    throw InputError(fmt::format("'{}': expected a scalar attribute, found {} values", w,
                                 cls == H5S_NULL ? 0 : n));
  return a;
}

H5T_class_t attr_class(const Handle& a, const std::string& w) {
  Handle t(chk(H5Aget_type(a.get()), "H5Aget_type", w), H5Tclose);
  const H5T_class_t c = H5Tget_class(t.get());
  if (c == H5T_NO_CLASS) fail("H5Tget_class", w);
  return c;
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "an integer";
    case H5T_FLOAT: return "a real";
    case H5T_STRING: return "a string";
    default: return "a non-numeric, non-string value";
  }
}

// Strings longer than this in one attribute or dataset element are taken as damage.
constexpr std::size_t kMaxStringBytes = std::size_t{64} << 20;
}  // namespace

AttrKind Group::attr_kind(const std::string& name) const {
  const std::string w = where("@" + name);
  Handle a = open_attr(id(), name, w);
  switch (attr_class(a, w)) {
    case H5T_INTEGER: return AttrKind::integer;
    case H5T_FLOAT: return AttrKind::floating;
    case H5T_STRING: return AttrKind::string;
    default: return AttrKind::other;
  }
}

std::string Group::read_attr_string(const std::string& name) const {
  const std::string w = where("@" + name);
  Handle a = open_attr(id(), name, w);
  Handle ft(chk(H5Aget_type(a.get()), "H5Aget_type", w), H5Tclose);
  const auto cls = H5Tget_class(ft.get());
  if (cls != H5T_STRING)
    throw InputError(
        fmt::format("'{}': expected a string attribute, found {}", w, class_name(cls)));
  if (chk(H5Tis_variable_str(ft.get()), "H5Tis_variable_str", w) > 0) {
    Handle t = string_type(w);
    char* p = nullptr;
    chk(H5Aread(a.get(), t.get(), &p), "H5Aread", w);
    std::string s = p ? std::string(p, strnlen(p, kMaxStringBytes)) : "";
    H5free_memory(p);
    return s;
  }
  // Fixed-length strings (e.g. written by other tools).
  const std::size_t n = H5Tget_size(ft.get());
  if (n == 0 || n > kMaxStringBytes)
    throw InputError(fmt::format("'{}': string attribute of {} bytes", w, n));
  std::string s(n, '\0');
  Handle t(chk(H5Tcopy(ft.get()), "H5Tcopy", w), H5Tclose);
  chk(H5Aread(a.get(), t.get(), s.data()), "H5Aread", w);
  s.resize(std::strlen(s.c_str()));
  return s;
}

std::int64_t Group::read_attr_int(const std::string& name) const {
  const std::string w = where("@" + name);
  Handle a = open_attr(id(), name, w);
  const auto cls = attr_class(a, w);
  if (cls != H5T_INTEGER)
    throw InputError(
        fmt::format("'{}': expected an integer attribute, found {}", w, class_name(cls)));
  std::int64_t v = 0;
  chk(H5Aread(a.get(), H5T_NATIVE_INT64, &v), "H5Aread", w);
  return v;
}

double Group::read_attr_double(const std::string& name) const {
  const std::string w = where("@" + name);
  Handle a = open_attr(id(), name, w);
  const auto cls = attr_class(a, w);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw InputError(
        fmt::format("'{}': expected a numeric attribute, found {}", w, class_name(cls)));
  double v = 0;
  chk(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v), "H5Aread", w);
  return v;
}

// ---- datasets --------------------------------------------------------------------------------

namespace {
void write_meta(hid_t d, const DatasetMeta& meta, std::size_t rank, const std::string& w) {
  if (!meta.units.empty()) {
    Handle t = string_type(w);
    const char* p = meta.units.c_str();
    write_scalar_attr(d, "units", t.get(), t.get(), &p, w + "@units");
  }
  if (meta.dim_labels.empty()) return;
  if (meta.dim_labels.size() != rank)
    throw RuntimeFailure(fmt::format("'{}': {} dimension labels for {} dimensions", w,
                                     meta.dim_labels.size(), rank));
  for (std::size_t i = 0; i < rank; ++i)
    chk(H5DSset_label(d, static_cast<unsigned>(i), meta.dim_labels[i].c_str()), "H5DSset_label", w);
}

void write_numeric(hid_t loc, const std::string& name, hid_t file_type, hid_t mem_type,
                   const void* data, std::size_t size, const std::vector<hsize_t>& dims,
                   const DatasetMeta& meta, const std::string& w) {
  if (dims.empty() || dims.size() > 3 || product(dims) != size)
    throw RuntimeFailure(fmt::format("'{}': dataset shape does not match its {} values", w, size));
  Handle space(chk(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                   "H5Screate_simple", w),
               H5Sclose);
  Handle d(chk(H5Dcreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT),
               "H5Dcreate2", w),
           H5Dclose);
  if (size > 0)
    chk(H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite", w);
  write_meta(d.get(), meta, dims.size(), w);
}

Handle open_dataset(hid_t loc, const std::string& name, const std::string& w) {
  if (chk(H5Lexists(loc, name.c_str(), H5P_DEFAULT), "H5Lexists", w) <= 0)
    throw InputError(fmt::format("'{}': missing dataset", w));
  return Handle(chk(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "H5Dopen2", w), H5Dclose);
}

// The shape of an array dataset of 1 to 3 dimensions whose elements of `elem_bytes` (in
// memory) could really be stored in this file: a damaged header claiming 2^60 elements is an
// InputError, not an allocation of that size. Our files are never compressed, so 64 x the file
// size (+1 MiB) is generous for anything a writer could have stored.
std::vector<hsize_t> dataset_dims(hid_t d, std::size_t elem_bytes, const std::string& w) {
  Handle space(chk(H5Dget_space(d), "H5Dget_space", w), H5Sclose);
  const int nd = chk(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims", w);
  if (nd < 1 || nd > 3)
    throw InputError(fmt::format("'{}': expected an array of 1 to 3 dimensions, found {}", w, nd));
  std::vector<hsize_t> dims(static_cast<std::size_t>(nd));
  chk(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "H5Sget_simple_extent_dims", w);
  hsize_t file_size = 0;
  {
    Handle f(chk(H5Iget_file_id(d), "H5Iget_file_id", w), H5Fclose);
    chk(H5Fget_filesize(f.get(), &file_size), "H5Fget_filesize", w);
  }
  const long double limit = 64.0L * static_cast<long double>(file_size) + (1 << 20);
  long double bytes = static_cast<long double>(elem_bytes);
  for (hsize_t x : dims) bytes *= static_cast<long double>(x);
  if (bytes > limit)
    throw InputError(
        fmt::format("'{}': shape claims {:.3g} bytes, more than a {}-byte file can "
                    "hold",
                    w, static_cast<double>(bytes), file_size));
  return dims;
}

template <typename T>
std::vector<T> read_numeric(hid_t loc, const std::string& name, hid_t mem_type,
                            std::vector<hsize_t>* dims_out, const std::string& w) {
  Handle d = open_dataset(loc, name, w);
  Handle ft(chk(H5Dget_type(d.get()), "H5Dget_type", w), H5Tclose);
  const auto cls = H5Tget_class(ft.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw InputError(fmt::format("'{}': expected a numeric dataset, found {}", w, class_name(cls)));
  const auto dims = dataset_dims(d.get(), sizeof(T), w);
  std::vector<T> out(static_cast<std::size_t>(product(dims)));
  if (!out.empty())
    chk(H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "H5Dread", w);
  if (dims_out) *dims_out = dims;
  return out;
}
}  // namespace

void Group::write_ints(const std::string& name, const std::vector<std::int64_t>& data,
                       const std::vector<hsize_t>& dims, const DatasetMeta& meta) {
  write_numeric(id(), name, H5T_STD_I64LE, H5T_NATIVE_INT64, data.data(), data.size(), dims, meta,
                where(name));
}

void Group::write_doubles(const std::string& name, const std::vector<double>& data,
                          const std::vector<hsize_t>& dims, const DatasetMeta& meta) {
  write_numeric(id(), name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, data.data(), data.size(), dims, meta,
                where(name));
}

void Group::write_strings(const std::string& name, const std::vector<std::string>& data,
                          const DatasetMeta& meta) {
  const std::string w = where(name);
  Handle t = string_type(w);
  const hsize_t n = data.size();
  Handle space(chk(H5Screate_simple(1, &n, nullptr), "H5Screate_simple", w), H5Sclose);
  Handle d(chk(H5Dcreate2(id(), name.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT),
               "H5Dcreate2", w),
           H5Dclose);
  std::vector<const char*> ptrs;
  ptrs.reserve(data.size());
  for (const auto& s : data) ptrs.push_back(s.c_str());
  if (n > 0)
    chk(H5Dwrite(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "H5Dwrite", w);
  write_meta(d.get(), meta, 1, w);
}

std::string Group::dataset_units(const std::string& name) const {
  const std::string w = where(name);
  Handle d = open_dataset(id(), name, w);
  if (chk(H5Aexists(d.get(), "units"), "H5Aexists", w) <= 0) return "";
  Group g(std::move(d), file_, join(path_, name));  // read the attribute through the checks
  return g.read_attr_string("units");
}

std::vector<std::string> Group::dataset_dim_labels(const std::string& name) const {
  const std::string w = where(name);
  Handle d = open_dataset(id(), name, w);
  Handle space(chk(H5Dget_space(d.get()), "H5Dget_space", w), H5Sclose);
  const int nd = chk(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims", w);
  std::vector<std::string> out;
  for (int i = 0; i < nd; ++i) {
    const ssize_t n =
        chk(H5DSget_label(d.get(), static_cast<unsigned>(i), nullptr, 0), "H5DSget_label", w);
    std::string s(static_cast<std::size_t>(n) + 1, '\0');
    if (n > 0)
      chk(H5DSget_label(d.get(), static_cast<unsigned>(i), s.data(), s.size()), "H5DSget_label", w);
    s.resize(static_cast<std::size_t>(n));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::int64_t> Group::read_ints(const std::string& name,
                                           std::vector<hsize_t>* dims) const {
  return read_numeric<std::int64_t>(id(), name, H5T_NATIVE_INT64, dims, where(name));
}

std::vector<double> Group::read_doubles(const std::string& name, std::vector<hsize_t>* dims) const {
  return read_numeric<double>(id(), name, H5T_NATIVE_DOUBLE, dims, where(name));
}

std::vector<std::string> Group::read_strings(const std::string& name) const {
  const std::string w = where(name);
  Handle d = open_dataset(id(), name, w);
  Handle ft(chk(H5Dget_type(d.get()), "H5Dget_type", w), H5Tclose);
  if (H5Tget_class(ft.get()) != H5T_STRING ||
      chk(H5Tis_variable_str(ft.get()), "H5Tis_variable_str", w) <= 0)
    throw InputError(fmt::format("'{}': expected a variable-length string dataset", w));
  // A variable-length string takes at least a 16-byte heap reference in the file.
  const auto dims = dataset_dims(d.get(), 16, w);
  if (dims.size() != 1) throw InputError(fmt::format("'{}': expected a 1-D string list", w));
  std::vector<char*> ptrs(static_cast<std::size_t>(dims[0]), nullptr);
  std::vector<std::string> out;
  if (ptrs.empty()) return out;
  Handle t = string_type(w);
  chk(H5Dread(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "H5Dread", w);
  out.reserve(ptrs.size());
  for (char* p : ptrs) out.emplace_back(p ? std::string(p, strnlen(p, kMaxStringBytes)) : "");
  Handle space(chk(H5Dget_space(d.get()), "H5Dget_space", w), H5Sclose);
  chk(H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, ptrs.data()), "H5Dvlen_reclaim", w);
  return out;
}

// ---- files -----------------------------------------------------------------------------------

namespace {

// The temporary being written, for the signal handler: a fixed buffer (no allocation in the
// handler), the handlers it replaced, and whether one is registered.
char g_temp[4096];
volatile std::sig_atomic_t g_temp_set = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];

extern "C" void remove_temporary_and_die(int sig) {
  if (g_temp_set) ::unlink(g_temp);  // async-signal-safe
  // Die of the signal as if unhandled, so the parent (mpirun, a shell) sees why.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

void register_temporary(const std::string& path) {
  if (path.size() >= sizeof g_temp)
    throw RuntimeFailure(fmt::format("temporary path '{}' is too long", path));
  unregister_temporary();
  std::memcpy(g_temp, path.c_str(), path.size() + 1);
  g_temp_set = 1;
  struct sigaction sa {};
  sa.sa_handler = remove_temporary_and_die;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < 3; ++i) {
    ::sigaction(kSignals[i], nullptr, &g_old[i]);
    // A signal the process ignores (nohup, `trap '' TERM`) stays ignored.
    if (g_old[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &sa, nullptr);
  }
}

void unregister_temporary() {
  if (!g_temp_set) return;
  for (std::size_t i = 0; i < 3; ++i)
    if (g_old[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &g_old[i], nullptr);
  g_temp_set = 0;
}

File::File(Handle h, const std::string& path, std::string temp)
    : Group(std::move(h), std::make_shared<const std::string>(path), "/"), temp_(std::move(temp)) {}

File::File(File&& o) noexcept : Group(std::move(o)), temp_(std::move(o.temp_)) {
  o.temp_.clear();
}

File File::create(const std::string& path) {
  silence_errors();
  const std::string temp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  // The 1.8+ object-header format is much more compact for many small datasets.
  Handle fapl(chk(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", temp), H5Pclose);
  chk(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "H5Pset_libver_bounds",
      temp);
  register_temporary(temp);
  errno = 0;
  const hid_t f = H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (f < 0) {
    const int err = errno;
    unregister_temporary();
    ::unlink(temp.c_str());
    throw RuntimeFailure(fmt::format("cannot create results file '{}'{}", temp,
                                     err != 0 ? fmt::format(": {}", std::strerror(err)) : ""));
  }
  return File(Handle(f, H5Fclose), path, temp);
}

File File::open_read(const std::string& path) {
  silence_errors();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    throw InputError(fmt::format("cannot open '{}': it is a directory, not a results file", path));
  if (!S_ISREG(st.st_mode))
    throw InputError(
        fmt::format("cannot open '{}': not a regular file (a FIFO or device is refused)", path));
  if (::access(path.c_str(), R_OK) != 0)
    throw InputError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw InputError(fmt::format("'{}' is not an HDF5 file", path));
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0)
    throw InputError(
        fmt::format("'{}' is a damaged HDF5 file (its superblock or root group "
                    "cannot be read)",
                    path));
  return File(Handle(f, H5Fclose), path, "");
}

void File::commit() {
  if (temp_.empty()) throw RuntimeFailure(fmt::format("'{}': nothing to commit", file()));
  const std::string w = where("");
  errno = 0;
  chk(H5Fflush(id(), H5F_SCOPE_GLOBAL), "H5Fflush", w);
  const hid_t f = h_.release();  // closed (and checked) here, not by the destructor
  errno = 0;
  chk(H5Fclose(f), "H5Fclose", w);
  // Make the bytes durable before the rename publishes them.
  const int fd = ::open(temp_.c_str(), O_RDONLY);
  if (fd >= 0) {
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0)
      throw RuntimeFailure(
          fmt::format("cannot write results file '{}': fsync: {}", temp_, std::strerror(err)));
  }
  if (std::rename(temp_.c_str(), file().c_str()) != 0) {
    const int err = errno;
    throw RuntimeFailure(
        fmt::format("cannot rename '{}' to '{}': {}", temp_, file(), std::strerror(err)));
  }
  temp_.clear();
  unregister_temporary();
}

File::~File() {
  if (temp_.empty()) return;
  h_.reset();
  std::remove(temp_.c_str());
  unregister_temporary();
}

}  // namespace dmuon::results::h5
