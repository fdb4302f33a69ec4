#pragma once
// RAII helpers on the HDF5 1.10 C API for checkpoints and captures (docs/checkpoint_format.md).
// Every tensor is stored row-major with an explicit shape (PyTorch/NumPy order), so h5py and
// torch.from_numpy read it unchanged. Eigen matrices default to column-major: the matrix helpers
// convert explicitly. The serial HDF5 library is not thread-safe: use one thread per process for
// I/O. Errors: a missing, truncated or foreign file and a missing/mistyped object throw
// cf::InvalidArgument naming the path/object and what is wrong; write failures throw cf::Error.
#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cf::io {

/// Dimensions of a dataset, slowest-varying first (NumPy order). {} is a scalar dataset.
using Shape = std::vector<std::size_t>;

/// Number of elements of a shape (1 for a scalar).
std::size_t shape_numel(const Shape& shape);
/// "[3, 4]" for messages.
std::string shape_string(const Shape& shape);

/// A row-major tensor read from a dataset: data.size() == shape_numel(shape).
template <class T>
struct Tensor {
  Shape shape;
  std::vector<T> data;
};

/// Row-major dynamic Eigen matrix (the in-memory layout of a 2-D dataset).
template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A group (or the root of a file): datasets, subgroups and attributes live here. Move-only; the
/// HDF5 handle is closed by the destructor. A Group must not outlive its File.
class Group {
 public:
  Group() = default;
  Group(Group&& other) noexcept;
  Group& operator=(Group&& other) noexcept;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group();

  /// Path of this group inside its file ("/" for the root), for messages.
  const std::string& name() const { return name_; }

  // ---- groups -------------------------------------------------------------------------------
  /// Create subgroup `name` (a relative path; intermediate groups "a/b" are created as needed).
  /// Throws cf::InvalidArgument if an object of that name already exists.
  Group create_group(const std::string& name);
  /// Open subgroup `name`, creating it if absent.
  Group require_group(const std::string& name);
  /// Open an existing subgroup; throws cf::InvalidArgument naming the group if it is absent.
  Group open_group(const std::string& name) const;
  /// True if a link `name` (dataset or group, relative path allowed) exists.
  bool has(const std::string& name) const;
  /// Names of the datasets directly in this group, sorted by name.
  std::vector<std::string> list_datasets() const;
  /// Names of the subgroups directly in this group, sorted by name.
  std::vector<std::string> list_groups() const;

  // ---- datasets -----------------------------------------------------------------------------
  /// Write `data` (row-major, shape_numel(shape) elements) as dataset `name` with type
  /// float32 / float64 / int64 (little-endian). An existing dataset of that name is replaced.
  /// Throws cf::InvalidArgument if data.size() != shape_numel(shape).
  void write(const std::string& name, const std::vector<float>& data, const Shape& shape);
  void write(const std::string& name, const std::vector<double>& data, const Shape& shape);
  void write(const std::string& name, const std::vector<std::int64_t>& data, const Shape& shape);
  /// Raw-pointer forms: `data` points at shape_numel(shape) row-major elements.
  void write(const std::string& name, const float* data, const Shape& shape);
  void write(const std::string& name, const double* data, const Shape& shape);
  void write(const std::string& name, const std::int64_t* data, const Shape& shape);

  /// Shape of dataset `name`; throws cf::InvalidArgument if it is absent or not a dataset.
  Shape dataset_shape(const std::string& name) const;
  /// Read dataset `name` converted to T (float, double or std::int64_t). Floating datasets may
  /// be read as float or double, integer datasets as std::int64_t only; otherwise throws
  /// cf::InvalidArgument naming the dataset and its type.
  template <class T>
  Tensor<T> read(const std::string& name) const;
  /// Read into a caller-owned buffer; throws cf::InvalidArgument unless the stored shape equals
  /// `expected` (message gives both shapes). `out` must hold shape_numel(expected) elements.
  template <class T>
  void read_into(const std::string& name, T* out, const Shape& expected) const;

  /// Create dataset `name` of element type T (float, double or std::int64_t) and shape `shape`
  /// without data (reads as zeros until written), for writers that fill it in slices with
  /// write_rows. An existing dataset of that name is replaced.
  template <class T>
  void create_dataset(const std::string& name, const Shape& shape);
  /// Write rows [first, first + count) along dimension 0 of an existing dataset of rank >= 1:
  /// `data` holds count * (product of the other dimensions) row-major values. Throws
  /// cf::InvalidArgument if the dataset is absent or the rows fall outside its shape.
  template <class T>
  void write_rows(const std::string& name, std::size_t first, std::size_t count, const T* data);
  /// Read rows [first, first + count) along dimension 0 (e.g. one sequence of a capture
  /// [N, H, T, T]); the returned shape is the dataset's with dimension 0 replaced by count.
  template <class T>
  Tensor<T> read_rows(const std::string& name, std::size_t first, std::size_t count) const;

  /// Write any Eigen matrix as a 2-D dataset [rows, cols] in row-major order (column-major
  /// inputs are converted). Scalar must be float or double.
  template <class Derived>
  void write_matrix(const std::string& name, const Eigen::DenseBase<Derived>& m) {
    using S = typename Derived::Scalar;
    const RowMatrix<S> rm = m.derived();
    write(name, rm.data(), Shape{static_cast<std::size_t>(rm.rows()), static_cast<std::size_t>(rm.cols())});
  }
  /// Read a 2-D dataset as a row-major matrix (assign to a column-major matrix to convert);
  /// throws cf::InvalidArgument unless the dataset has rank 2.
  template <class T>
  RowMatrix<T> read_matrix(const std::string& name) const;
  /// Write an Eigen vector as a 1-D dataset [n].
  template <class Derived>
  void write_vector(const std::string& name, const Eigen::DenseBase<Derived>& v) {
    using S = typename Derived::Scalar;
    const Eigen::Matrix<S, Eigen::Dynamic, 1> cv = v.derived();
    write(name, cv.data(), Shape{static_cast<std::size_t>(cv.size())});
  }
  /// Read a 1-D dataset as a vector; throws cf::InvalidArgument unless the rank is 1.
  template <class T>
  Eigen::Matrix<T, Eigen::Dynamic, 1> read_vector(const std::string& name) const;

  // ---- attributes (on this group; "/" for file-level attributes) -----------------------------
  /// Set a UTF-8 fixed-length (NUL-padded) string attribute; replaces an existing one. The
  /// project never writes variable-length strings (docs/checkpoint_format.md "Strings"); h5py
  /// returns the value as bytes (`.decode()`). Throws cf::InvalidArgument if `value` holds a NUL.
  void set_attr(const std::string& name, const std::string& value);
  void set_attr(const std::string& name, const char* value) { set_attr(name, std::string(value)); }
  /// Set an int64 attribute.
  void set_attr(const std::string& name, std::int64_t value);
  void set_attr(const std::string& name, int value) { set_attr(name, static_cast<std::int64_t>(value)); }
  /// Set a float64 attribute.
  void set_attr(const std::string& name, double value);
  /// True if attribute `name` exists on this group.
  bool has_attr(const std::string& name) const;
  /// Read attributes; throw cf::InvalidArgument if absent, of another type class, of a
  /// non-standard numeric type, or not a single value (scalar, shape [] or [1]) (a string
  /// attribute may be fixed- or variable-length; an integer attribute may be read as double).
  std::string attr_string(const std::string& name) const;
  std::int64_t attr_int(const std::string& name) const;
  double attr_double(const std::string& name) const;

  /// The raw HDF5 handle (for C API calls not wrapped here); owned by this object.
  std::int64_t handle() const { return id_; }

 protected:
  Group(std::int64_t id, std::string name, std::string file);
  void close_handle();
  std::int64_t id_ = -1;  // hid_t
  std::string name_;      // path inside the file
  std::string file_;      // file path, for messages
};

/// An open HDF5 file; also its root group. Closing (destructor or close()) flushes it.
class File : public Group {
 public:
  /// Create (truncate) `path` for writing. Throws cf::Error if it cannot be created.
  static File create(const std::string& path);
  /// Open an existing file read-only (or read-write). Throws cf::InvalidArgument naming the path
  /// and the reason: missing, not an HDF5 file (foreign format) or truncated/corrupt.
  static File open(const std::string& path, bool writable = false);

  File() = default;
  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;

  /// The file's path.
  const std::string& path() const { return file_; }
  /// Flush and close now (idempotent); throws cf::Error if HDF5 reports a failure.
  void close();

 private:
  File(std::int64_t id, std::string path);
};

/// Write an HDF5 file atomically: `fill` writes into a File created at a temporary sibling of
/// `path`; the file is closed, fsynced and renamed over `path` (cf::write_path_atomic). On any
/// exception the temporary is removed and an existing `path` is left untouched.
void write_hdf5_atomic(const std::string& path, const std::function<void(File&)>& fill);

/// True if `path` exists and carries the HDF5 signature (does not throw).
bool is_hdf5_file(const std::string& path);

/// True if the regular file `path` starts with the 8-byte HDF5 signature \x89HDF\r\n\x1a\n at
/// offset 0 or at a user-block offset 512, 1024, 2048, ... (HDF5 file format spec, "Format
/// Signature"). Reads only those bytes (the name or extension of the file does not matter);
/// returns false for a missing or unreadable path and never throws.
bool has_hdf5_signature(const std::string& path);

}  // namespace cf::io
