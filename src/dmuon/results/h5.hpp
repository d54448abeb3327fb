#pragma once
// A small RAII layer over HDF5's C API, just what the results files need: groups, scalar and
// string attributes, and 1-D..3-D numeric / string-list datasets (no compound types, so the
// files read naturally from h5py and h5dump). Every call is checked and a failure becomes a
// RuntimeFailure naming the HDF5 call, the file and the object; HDF5's own error-stack printing
// is silenced.
//
// File::create writes to "<path>.tmp.<pid>"; commit() flushes, closes and renames it onto
// <path> (atomic on POSIX). A File destroyed without commit() removes its temporary, so an
// interrupted run never leaves a half-written results file (and never touches an old one).

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dmuon::results::h5 {

/// Turns off HDF5's automatic error-stack printing (idempotent).
void silence_errors();

/// An owned hid_t closed by the matching H5*close on destruction.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  /// Gives up ownership without closing.
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

/// What kind of value an attribute holds.
enum class AttrKind { integer, floating, string, other };

/// Self-description written with a dataset: a `units` attribute (e.g. "s", "B", "calls") and
/// HDF5 dimension-scale labels, one per dimension (e.g. {"sample", "rank", "phase"}), which
/// h5py shows as dataset.dims[i].label. Empty members are not written.
struct DatasetMeta {
  std::string units;
  std::vector<std::string> dim_labels;
};

/// A group (or the file's root group). Names are relative to this group.
class Group {
 public:
  Group(Handle h, std::shared_ptr<const std::string> file, std::string path)
      : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)) {}
  hid_t id() const { return h_.get(); }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }

  Group create_group(const std::string& name);
  Group open_group(const std::string& name) const;
  /// True when a link `name` exists here.
  bool has(const std::string& name) const;
  /// Names of the links in this group, in creation-independent (name) order.
  std::vector<std::string> children() const;

  // Attributes (scalars; a string is a variable-length UTF-8 string).
  void write_attr(const std::string& name, const std::string& value);
  void write_attr(const std::string& name, const char* value) {
    write_attr(name, std::string(value));
  }
  void write_attr(const std::string& name, std::int64_t value);
  void write_attr(const std::string& name, double value);
  bool has_attr(const std::string& name) const;
  std::vector<std::string> attr_names() const;
  AttrKind attr_kind(const std::string& name) const;
  std::string read_attr_string(const std::string& name) const;
  std::int64_t read_attr_int(const std::string& name) const;
  double read_attr_double(const std::string& name) const;

  // Datasets. `dims` gives the shape (1 to 3 entries, product = data.size()).
  void write_ints(const std::string& name, const std::vector<std::int64_t>& data,
                  const std::vector<hsize_t>& dims, const DatasetMeta& meta = {});
  void write_ints(const std::string& name, const std::vector<std::int64_t>& data,
                  const DatasetMeta& meta = {}) {
    write_ints(name, data, {static_cast<hsize_t>(data.size())}, meta);
  }
  void write_doubles(const std::string& name, const std::vector<double>& data,
                     const std::vector<hsize_t>& dims, const DatasetMeta& meta = {});
  void write_doubles(const std::string& name, const std::vector<double>& data,
                     const DatasetMeta& meta = {}) {
    write_doubles(name, data, {static_cast<hsize_t>(data.size())}, meta);
  }
  void write_strings(const std::string& name, const std::vector<std::string>& data,
                     const DatasetMeta& meta = {});
  /// The `units` attribute of dataset `name` ("" when it has none).
  std::string dataset_units(const std::string& name) const;
  /// The dimension labels of dataset `name` ("" for an unlabelled dimension).
  std::vector<std::string> dataset_dim_labels(const std::string& name) const;

  // Reading is defensive: every attribute must be a scalar of the expected class, every
  // dataset's shape is checked against the file's size before anything is allocated, and a
  // damaged object is an InputError naming the file and the object (never a crash).

  /// Reads a numeric dataset converted to int64 / double; `dims` (optional) receives the shape.
  std::vector<std::int64_t> read_ints(const std::string& name,
                                      std::vector<hsize_t>* dims = nullptr) const;
  std::vector<double> read_doubles(const std::string& name,
                                   std::vector<hsize_t>* dims = nullptr) const;
  std::vector<std::string> read_strings(const std::string& name) const;

  /// "<file>:<path>/<name>" for messages.
  std::string where(const std::string& name) const;

 protected:
  Handle h_;
  std::shared_ptr<const std::string> file_;
  std::string path_;
};

/// An HDF5 file; the root group is the File itself.
class File : public Group {
 public:
  /// Creates "<path>.tmp.<pid>" for writing; commit() moves it onto `path`.
  static File create(const std::string& path);
  /// Opens an existing file read-only. A missing file, a directory, a FIFO or a file that is not
  /// HDF5 is an InputError naming the file.
  static File open_read(const std::string& path);

  File(File&& o) noexcept;
  File& operator=(File&&) = delete;
  ~File();

  /// Flushes, closes and atomically renames the temporary onto the final path.
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  File(Handle h, const std::string& path, std::string temp);
  std::string temp_;  ///< "" for files opened for reading or already committed
};

/// While a File is being written, SIGINT, SIGTERM and SIGHUP remove its temporary before the
/// process dies of the signal (the default action then runs as usual): an interrupted write
/// leaves nothing behind. At most one temporary is registered at a time (the results writer
/// writes one file).
void register_temporary(const std::string& path);
void unregister_temporary();

}  // namespace dmuon::results::h5
