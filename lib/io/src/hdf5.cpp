#include "cf/io/hdf5.hpp"

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <type_traits>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

namespace cf::io {

namespace {

static_assert(sizeof(hid_t) == sizeof(std::int64_t), "hid_t is expected to be 64-bit (HDF5 >= 1.10)");

// libhdf5 registers H5_term_library with atexit() when it initialises. After a failed H5Fclose
// (ENOSPC or EFBIG while the metadata cache is flushed) libhdf5 1.10 keeps a half-destroyed file
// in its ID table, and H5_term_library dereferences it at exit: SIGSEGV in H5F__close_cb after
// the tool has already reported "disk full" (train, capture). Every file of the project is closed
// by RAII (File, Group, Handle) before main returns, so the clean-up at exit has nothing left to
// flush: it is switched off here, before the first HDF5 call initialises the library.
[[maybe_unused]] const bool kNoHdf5Atexit = [] {
  H5dont_atexit();
  return true;
}();

// HDF5 prints its error stack to stderr by default; we report our own messages instead. The
// guard silences printing for the duration of one call and restores the previous handler.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Owns a non-group handle (dataset, dataspace, datatype, attribute, property list).
class Handle {
 public:
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() {
    if (id_ < 0) return;
    switch (H5Iget_type(id_)) {
      case H5I_DATASET:
        H5Dclose(id_);
        break;
      case H5I_DATASPACE:
        H5Sclose(id_);
        break;
      case H5I_DATATYPE:
        H5Tclose(id_);
        break;
      case H5I_ATTR:
        H5Aclose(id_);
        break;
      case H5I_GENPROP_LST:
        H5Pclose(id_);
        break;
      default:
        break;
    }
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  /// Give up ownership (the caller closes the handle).
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_;
};

std::string join(const std::string& group, const std::string& name) {
  if (group.empty() || group == "/") return "/" + name;
  return group + "/" + name;
}

template <class T>
hid_t mem_type() {
  if constexpr (std::is_same_v<T, float>)
    return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return H5T_NATIVE_DOUBLE;
  else {
    static_assert(std::is_same_v<T, std::int64_t>, "float, double or int64 only");
    return H5T_NATIVE_INT64;
  }
}

template <class T>
hid_t file_type() {
  if constexpr (std::is_same_v<T, float>)
    return H5T_IEEE_F32LE;
  else if constexpr (std::is_same_v<T, double>)
    return H5T_IEEE_F64LE;
  else
    return H5T_STD_I64LE;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else
    return "int64";
}

hid_t make_space(const Shape& shape) {
  if (shape.empty()) return H5Screate(H5S_SCALAR);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
}

// Largest element count a reader accepts for one dataset (2^40: beyond any file of this project;
// it keeps count * element size far from size_t overflow).
constexpr std::size_t kMaxElements = std::size_t{1} << 40;

// Shape of a dataspace, checked: a simple or scalar space (a null space holds no data), rank at
// most H5S_MAX_RANK, and an element count that neither overflows nor exceeds kMaxElements.
// `what` names the object for messages. Throws cf::InvalidArgument otherwise.
Shape checked_shape(hid_t space, const std::string& what) {
  if (space < 0) throw InvalidArgument(str(what, ": cannot read its dataspace (file corrupt?)"));
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_SCALAR) return Shape{};
  if (cls != H5S_SIMPLE)
    throw InvalidArgument(
        str(what, ": dataspace is ", cls == H5S_NULL ? "null (no data)" : "invalid", " (file corrupt?)"));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > H5S_MAX_RANK)
    throw InvalidArgument(str(what, ": invalid dataspace rank ", rank, " (file corrupt?)"));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank), 0);
  if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), nullptr) != rank)
    throw InvalidArgument(str(what, ": cannot read its dimensions (file corrupt?)"));
  std::size_t n = 1;
  for (hsize_t d : dims) {
    if (d != 0 && n > kMaxElements / d)
      throw InvalidArgument(str(what, ": dimensions ", shape_string(Shape(dims.begin(), dims.end())),
                                " exceed 2^40 elements (file corrupt?)"));
    n *= static_cast<std::size_t>(d);
  }
  return Shape(dims.begin(), dims.end());
}

Shape space_shape(hid_t space) { return checked_shape(space, "HDF5 dataspace"); }

// True for the standard numeric types a reader converts: IEEE float32/float64 and 1, 2, 4 or
// 8 byte integers, either byte order. Anything else (custom float layouts, bit fields) is
// refused before HDF5 tries a conversion on it.
bool is_standard_number_type(hid_t type) {
  static const hid_t known[] = {H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE, H5T_STD_I8LE,
                                H5T_STD_I8BE,   H5T_STD_I16LE,  H5T_STD_I16BE,  H5T_STD_I32LE,  H5T_STD_I32BE,
                                H5T_STD_I64LE,  H5T_STD_I64BE,  H5T_STD_U8LE,   H5T_STD_U8BE,   H5T_STD_U16LE,
                                H5T_STD_U16BE,  H5T_STD_U32LE,  H5T_STD_U32BE,  H5T_STD_U64LE,  H5T_STD_U64BE};
  if (type < 0) return false;
  for (hid_t k : known)
    if (H5Tequal(type, k) > 0) return true;
  return false;
}

off_t file_size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// For an unfiltered (contiguous or compact) dataset the stored bytes must be those of the shape:
// a mutated dimension or layout message is refused here, before a reader allocates the buffer.
// Datasets whose storage was never allocated (all fill value) and filtered/chunked ones are left
// to HDF5, which checks every chunk address against the end of the file.
void check_storage(hid_t ds, hid_t type, const Shape& shape, const std::string& file, const std::string& what) {
  const std::size_t esize = H5Tget_size(type);
  const std::size_t bytes = shape_numel(shape) * esize;
  Handle dcpl(H5Dget_create_plist(ds));
  if (!dcpl.ok())
    throw InvalidArgument(str("dataset '", what, "' in '", file, "': cannot read its layout (file corrupt?)"));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT && layout != H5D_CHUNKED)
    throw InvalidArgument(
        str("dataset '", what, "' in '", file, "' has an unsupported storage layout (file corrupt?)"));
  if (H5Pget_nfilters(dcpl.get()) != 0 || layout == H5D_CHUNKED) return;
  const hsize_t stored = H5Dget_storage_size(ds);
  if (stored == 0) return;  // never written: reads the fill value
  const off_t fsize = file_size_of(file);
  if (stored != bytes || (fsize >= 0 && stored > static_cast<hsize_t>(fsize)))
    throw InvalidArgument(str("dataset '", what, "' in '", file, "' stores ", stored, " bytes but its shape ",
                              shape_string(shape), " needs ", bytes, " (file truncated or corrupt?)"));
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t off = H5Dget_offset(ds);
    if (off != HADDR_UNDEF && fsize >= 0 &&
        (off > static_cast<haddr_t>(fsize) || stored > static_cast<haddr_t>(fsize) - off))
      throw InvalidArgument(str("dataset '", what, "' in '", file, "' lies beyond the end of the file (offset ", off,
                                ", ", stored, " bytes, file size ", fsize, "; truncated or corrupt?)"));
  }
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void list_links(hid_t id, H5O_type_t want, std::vector<std::string>& out) {
  struct Ctx {
    H5O_type_t want;
    std::vector<std::string>* out;
  } ctx{want, &out};
  auto cb = [](hid_t gid, const char* name, const H5L_info_t* info, void* op) -> herr_t {
    auto* c = static_cast<Ctx*>(op);
    if (info->type != H5L_TYPE_HARD) return 0;
    H5O_info_t oi;
    if (H5Oget_info_by_name(gid, name, &oi, H5P_DEFAULT) < 0) return 0;
    if (oi.type == c->want) c->out->emplace_back(name);
    return 0;
  };
  H5Literate(id, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &ctx);
  std::sort(out.begin(), out.end());
}

}  // namespace

// ---- shapes ---------------------------------------------------------------------------------
std::size_t shape_numel(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- Group ----------------------------------------------------------------------------------
Group::Group(std::int64_t id, std::string name, std::string file)
    : id_(id), name_(std::move(name)), file_(std::move(file)) {}

Group::Group(Group&& o) noexcept : id_(o.id_), name_(std::move(o.name_)), file_(std::move(o.file_)) { o.id_ = -1; }

Group& Group::operator=(Group&& o) noexcept {
  if (this != &o) {
    close_handle();
    id_ = o.id_;
    name_ = std::move(o.name_);
    file_ = std::move(o.file_);
    o.id_ = -1;
  }
  return *this;
}

Group::~Group() { close_handle(); }

void Group::close_handle() {
  if (id_ < 0) return;
  QuietErrors quiet;
  // A handle invalidated by a strong file close reports H5I_BADID; nothing to release then.
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    default:
      break;
  }
  id_ = -1;
}

Group Group::create_group(const std::string& name) {
  QuietErrors quiet;
  require(id_ >= 0, "HDF5: group is not open");
  require(!has(name), "cannot create group '", join(name_, name), "' in '", file_, "': the name exists");
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  hid_t g = H5Gcreate2(id_, name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) throw Error(str("cannot create group '", join(name_, name), "' in '", file_, "'"));
  return Group(g, join(name_, name), file_);
}

Group Group::require_group(const std::string& name) {
  if (has(name)) return open_group(name);
  return create_group(name);
}

Group Group::open_group(const std::string& name) const {
  QuietErrors quiet;
  require(has(name), "'", file_, "' has no group '", join(name_, name), "'");
  H5O_info_t oi;
  if (H5Oget_info_by_name(id_, name.c_str(), &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_GROUP)
    throw InvalidArgument(str("'", join(name_, name), "' in '", file_, "' is not a group"));
  hid_t g = H5Gopen2(id_, name.c_str(), H5P_DEFAULT);
  if (g < 0) throw InvalidArgument(str("cannot open group '", join(name_, name), "' in '", file_, "'"));
  return Group(g, join(name_, name), file_);
}

bool Group::has(const std::string& name) const {
  if (id_ < 0 || name.empty()) return false;
  QuietErrors quiet;
  // Check each path component so that "a/b" with a missing "a" answers false, not an error.
  std::size_t pos = 0;
  while (true) {
    std::size_t slash = name.find('/', pos);
    const std::string prefix = name.substr(0, slash);
    if (!prefix.empty() && H5Lexists(id_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}

std::vector<std::string> Group::list_datasets() const {
  QuietErrors quiet;
  std::vector<std::string> out;
  list_links(id_, H5O_TYPE_DATASET, out);
  return out;
}

std::vector<std::string> Group::list_groups() const {
  QuietErrors quiet;
  std::vector<std::string> out;
  list_links(id_, H5O_TYPE_GROUP, out);
  return out;
}

namespace {
template <class T>
void write_impl(hid_t loc, const std::string& gname, const std::string& file, const std::string& name, const T* data,
                const Shape& shape) {
  QuietErrors quiet;
  require(loc >= 0, "HDF5: group is not open");
  require(!name.empty(), "dataset name must not be empty");
  require(data != nullptr || shape_numel(shape) == 0, "dataset '", name, "': data pointer is null");
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0) H5Ldelete(loc, name.c_str(), H5P_DEFAULT);
  Handle space(make_space(shape));
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle ds(H5Dcreate2(loc, name.c_str(), file_type<T>(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!ds.ok() || !space.ok())
    throw Error(str("cannot create dataset '", join(gname, name), "' ", shape_string(shape), " in '", file, "'"));
  if (shape_numel(shape) > 0 && H5Dwrite(ds.get(), mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw Error(str("cannot write dataset '", join(gname, name), "' in '", file, "' (disk full?)"));
}

// Opens dataset `name` and checks that its type class fits T.
hid_t open_dataset_checked(hid_t loc, const std::string& gname, const std::string& file, const std::string& name,
                           bool want_float) {
  H5O_info_t oi;
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) <= 0 || H5Oget_info_by_name(loc, name.c_str(), &oi, H5P_DEFAULT) < 0)
    throw InvalidArgument(str("'", file, "' has no dataset '", join(gname, name), "'"));
  if (oi.type != H5O_TYPE_DATASET)
    throw InvalidArgument(str("'", join(gname, name), "' in '", file, "' is not a dataset"));
  hid_t ds = H5Dopen2(loc, name.c_str(), H5P_DEFAULT);
  if (ds < 0) throw InvalidArgument(str("cannot open dataset '", join(gname, name), "' in '", file, "'"));
  Handle owned(ds);  // closed on every error path below
  Handle type(H5Dget_type(ds));
  const H5T_class_t cls = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  const bool ok = want_float ? cls == H5T_FLOAT : cls == H5T_INTEGER;
  if (!ok)
    throw InvalidArgument(str("dataset '", join(gname, name), "' in '", file, "' holds ",
                              cls == H5T_FLOAT     ? "floating-point"
                              : cls == H5T_INTEGER ? "integer"
                                                   : "non-numeric",
                              " data; expected ", want_float ? "floating-point" : "integer"));
  if (!is_standard_number_type(type.get()))
    throw InvalidArgument(str("dataset '", join(gname, name), "' in '", file, "' has a non-standard ",
                              want_float ? "floating-point" : "integer", " type of ", H5Tget_size(type.get()),
                              " bytes (expected IEEE float32/float64 or a 1-8 byte integer; file corrupt?)"));
  Handle space(H5Dget_space(ds));
  const Shape shape = checked_shape(space.get(), "dataset '" + join(gname, name) + "' in '" + file + "'");
  check_storage(ds, type.get(), shape, file, join(gname, name));
  return owned.release();
}
}  // namespace

void Group::write(const std::string& name, const float* data, const Shape& shape) {
  write_impl(id_, name_, file_, name, data, shape);
}
void Group::write(const std::string& name, const double* data, const Shape& shape) {
  write_impl(id_, name_, file_, name, data, shape);
}
void Group::write(const std::string& name, const std::int64_t* data, const Shape& shape) {
  write_impl(id_, name_, file_, name, data, shape);
}
void Group::write(const std::string& name, const std::vector<float>& data, const Shape& shape) {
  require(data.size() == shape_numel(shape), "dataset '", name, "': ", data.size(), " values do not fill shape ",
          shape_string(shape), " (", shape_numel(shape), " elements)");
  write(name, data.data(), shape);
}
void Group::write(const std::string& name, const std::vector<double>& data, const Shape& shape) {
  require(data.size() == shape_numel(shape), "dataset '", name, "': ", data.size(), " values do not fill shape ",
          shape_string(shape), " (", shape_numel(shape), " elements)");
  write(name, data.data(), shape);
}
void Group::write(const std::string& name, const std::vector<std::int64_t>& data, const Shape& shape) {
  require(data.size() == shape_numel(shape), "dataset '", name, "': ", data.size(), " values do not fill shape ",
          shape_string(shape), " (", shape_numel(shape), " elements)");
  write(name, data.data(), shape);
}

Shape Group::dataset_shape(const std::string& name) const {
  QuietErrors quiet;
  H5O_info_t oi;
  if (!has(name) || H5Oget_info_by_name(id_, name.c_str(), &oi, H5P_DEFAULT) < 0)
    throw InvalidArgument(str("'", file_, "' has no dataset '", join(name_, name), "'"));
  if (oi.type != H5O_TYPE_DATASET)
    throw InvalidArgument(str("'", join(name_, name), "' in '", file_, "' is not a dataset"));
  Handle ds(H5Dopen2(id_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok())
    throw InvalidArgument(str("cannot open dataset '", join(name_, name), "' in '", file_, "' (file corrupt?)"));
  Handle space(H5Dget_space(ds.get()));
  return checked_shape(space.get(), "dataset '" + join(name_, name) + "' in '" + file_ + "'");
}

template <class T>
void Group::read_into(const std::string& name, T* out, const Shape& expected) const {
  QuietErrors quiet;
  require(has(name), "'", file_, "' has no dataset '", join(name_, name), "'");
  Handle ds(open_dataset_checked(id_, name_, file_, name, !std::is_same_v<T, std::int64_t>));
  Handle space(H5Dget_space(ds.get()));
  const Shape shape = space_shape(space.get());
  require(shape == expected, "dataset '", join(name_, name), "' in '", file_, "' has shape ", shape_string(shape),
          ", expected ", shape_string(expected));
  if (shape_numel(shape) == 0) return;
  if (H5Dread(ds.get(), mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    throw InvalidArgument(str("cannot read dataset '", join(name_, name), "' from '", file_, "' as ", type_name<T>(),
                              " (file truncated or corrupt?)"));
}

template <class T>
Tensor<T> Group::read(const std::string& name) const {
  Tensor<T> t;
  t.shape = dataset_shape(name);
  t.data.resize(shape_numel(t.shape));
  read_into(name, t.data.data(), t.shape);
  return t;
}

template <class T>
RowMatrix<T> Group::read_matrix(const std::string& name) const {
  const Shape shape = dataset_shape(name);
  require(shape.size() == 2, "dataset '", join(name_, name), "' in '", file_, "' has shape ", shape_string(shape),
          ", expected a matrix (rank 2)");
  RowMatrix<T> m(static_cast<Eigen::Index>(shape[0]), static_cast<Eigen::Index>(shape[1]));
  read_into(name, m.data(), shape);
  return m;
}

template <class T>
Eigen::Matrix<T, Eigen::Dynamic, 1> Group::read_vector(const std::string& name) const {
  const Shape shape = dataset_shape(name);
  require(shape.size() == 1, "dataset '", join(name_, name), "' in '", file_, "' has shape ", shape_string(shape),
          ", expected a vector (rank 1)");
  Eigen::Matrix<T, Eigen::Dynamic, 1> v(static_cast<Eigen::Index>(shape[0]));
  read_into(name, v.data(), shape);
  return v;
}

template Tensor<float> Group::read<float>(const std::string&) const;
template Tensor<double> Group::read<double>(const std::string&) const;
template Tensor<std::int64_t> Group::read<std::int64_t>(const std::string&) const;
template void Group::read_into<float>(const std::string&, float*, const Shape&) const;
template void Group::read_into<double>(const std::string&, double*, const Shape&) const;
template void Group::read_into<std::int64_t>(const std::string&, std::int64_t*, const Shape&) const;
template RowMatrix<float> Group::read_matrix<float>(const std::string&) const;
template RowMatrix<double> Group::read_matrix<double>(const std::string&) const;
template Eigen::Matrix<float, Eigen::Dynamic, 1> Group::read_vector<float>(const std::string&) const;
template Eigen::Matrix<double, Eigen::Dynamic, 1> Group::read_vector<double>(const std::string&) const;

// ---- slices along dimension 0 -----------------------------------------------------------------
namespace {
// Selects rows [first, first + count) of dimension 0 in `file_space`; returns the memory space.
hid_t select_rows(hid_t file_space, const Shape& shape, std::size_t first, std::size_t count, const std::string& what) {
  require(!shape.empty(), what, " is a scalar; row access needs rank >= 1");
  require(first <= shape[0] && count <= shape[0] - first, what, ": rows [", first, ", ", first + count,
          ") fall outside dimension 0 of shape ", shape_string(shape));
  std::vector<hsize_t> start(shape.size(), 0), cnt(shape.begin(), shape.end());
  start[0] = first;
  cnt[0] = count;
  if (count > 0) H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr);
  return H5Screate_simple(static_cast<int>(cnt.size()), cnt.data(), nullptr);
}
}  // namespace

template <class T>
void Group::create_dataset(const std::string& name, const Shape& shape) {
  QuietErrors quiet;
  require(id_ >= 0, "HDF5: group is not open");
  require(!name.empty(), "dataset name must not be empty");
  if (H5Lexists(id_, name.c_str(), H5P_DEFAULT) > 0) H5Ldelete(id_, name.c_str(), H5P_DEFAULT);
  Handle space(make_space(shape));
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_ALLOC);  // unwritten rows read as zeros
  Handle ds(H5Dcreate2(id_, name.c_str(), file_type<T>(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT));
  if (!ds.ok() || !space.ok())
    throw Error(str("cannot create dataset '", join(name_, name), "' ", shape_string(shape), " in '", file_, "'"));
}

template <class T>
void Group::write_rows(const std::string& name, std::size_t first, std::size_t count, const T* data) {
  QuietErrors quiet;
  const Shape shape = dataset_shape(name);
  Handle ds(H5Dopen2(id_, name.c_str(), H5P_DEFAULT));
  Handle fspace(H5Dget_space(ds.get()));
  Handle mspace(select_rows(fspace.get(), shape, first, count, "dataset '" + join(name_, name) + "'"));
  if (count == 0) return;
  require(data != nullptr, "dataset '", name, "': data pointer is null");
  if (H5Dwrite(ds.get(), mem_type<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0)
    throw Error(str("cannot write rows of dataset '", join(name_, name), "' in '", file_, "' (disk full?)"));
}

template <class T>
Tensor<T> Group::read_rows(const std::string& name, std::size_t first, std::size_t count) const {
  QuietErrors quiet;
  const Shape shape = dataset_shape(name);
  Handle ds(open_dataset_checked(id_, name_, file_, name, !std::is_same_v<T, std::int64_t>));
  Handle fspace(H5Dget_space(ds.get()));
  Handle mspace(select_rows(fspace.get(), shape, first, count, "dataset '" + join(name_, name) + "'"));
  Tensor<T> t;
  t.shape = shape;
  t.shape[0] = count;
  t.data.resize(shape_numel(t.shape));
  if (count == 0 || t.data.empty()) return t;
  if (H5Dread(ds.get(), mem_type<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, t.data.data()) < 0)
    throw InvalidArgument(
        str("cannot read rows of dataset '", join(name_, name), "' from '", file_, "' (file truncated or corrupt?)"));
  return t;
}

template void Group::create_dataset<float>(const std::string&, const Shape&);
template void Group::create_dataset<double>(const std::string&, const Shape&);
template void Group::create_dataset<std::int64_t>(const std::string&, const Shape&);
template void Group::write_rows<float>(const std::string&, std::size_t, std::size_t, const float*);
template void Group::write_rows<double>(const std::string&, std::size_t, std::size_t, const double*);
template void Group::write_rows<std::int64_t>(const std::string&, std::size_t, std::size_t, const std::int64_t*);
template Tensor<float> Group::read_rows<float>(const std::string&, std::size_t, std::size_t) const;
template Tensor<double> Group::read_rows<double>(const std::string&, std::size_t, std::size_t) const;
template Tensor<std::int64_t> Group::read_rows<std::int64_t>(const std::string&, std::size_t, std::size_t) const;

// ---- attributes -----------------------------------------------------------------------------
namespace {
hid_t create_attr(hid_t loc, const std::string& gname, const std::string& file, const std::string& name, hid_t type,
                  hid_t space) {
  if (H5Aexists(loc, name.c_str()) > 0) H5Adelete(loc, name.c_str());
  hid_t a = H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) throw Error(str("cannot write attribute '", name, "' on '", gname, "' in '", file, "'"));
  return a;
}

hid_t open_attr(hid_t loc, const std::string& gname, const std::string& file, const std::string& name) {
  if (loc < 0 || H5Aexists(loc, name.c_str()) <= 0)
    throw InvalidArgument(str("'", file, "' has no attribute '", name, "' on '", gname, "'"));
  hid_t a = H5Aopen(loc, name.c_str(), H5P_DEFAULT);
  if (a < 0) throw InvalidArgument(str("cannot open attribute '", name, "' on '", gname, "' in '", file, "'"));
  return a;
}
}  // namespace

void Group::set_attr(const std::string& name, const std::string& value) {
  QuietErrors quiet;
  // Fixed-length, NUL-padded UTF-8 (never variable-length: libhdf5 1.10 crashes or loops on
  // some corrupted global-heap strings, so the project's files keep none; checkpoint_format.md).
  require(value.find('\0') == std::string::npos, "attribute '", name, "': strings must not contain NUL bytes");
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), std::max<std::size_t>(1, value.size()));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(create_attr(id_, name_, file_, name, type.get(), space.get()));
  std::string buf = value;
  if (buf.empty()) buf.push_back('\0');
  if (H5Awrite(a.get(), type.get(), buf.data()) < 0)
    throw Error(str("cannot write attribute '", name, "' in '", file_, "' (disk full?)"));
}

void Group::set_attr(const std::string& name, std::int64_t value) {
  QuietErrors quiet;
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(create_attr(id_, name_, file_, name, H5T_STD_I64LE, space.get()));
  if (H5Awrite(a.get(), H5T_NATIVE_INT64, &value) < 0)
    throw Error(str("cannot write attribute '", name, "' in '", file_, "'"));
}

void Group::set_attr(const std::string& name, double value) {
  QuietErrors quiet;
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(create_attr(id_, name_, file_, name, H5T_IEEE_F64LE, space.get()));
  if (H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &value) < 0)
    throw Error(str("cannot write attribute '", name, "' in '", file_, "'"));
}

bool Group::has_attr(const std::string& name) const {
  if (id_ < 0) return false;
  QuietErrors quiet;
  return H5Aexists(id_, name.c_str()) > 0;
}

namespace {
// Largest fixed-length string attribute a reader accepts (the project's JSON configs are a few kB).
constexpr std::size_t kMaxStringBytes = std::size_t{64} << 20;

// Checks that attribute `a` holds exactly one element: a scalar dataspace or a simple one of
// shape [] or [1]. An array-valued attribute (e.g. `step` written as [3]) is refused here, before
// a read into a single value could overrun it.
void check_single_attr(hid_t a, const std::string& gname, const std::string& file, const std::string& name) {
  Handle space(H5Aget_space(a));
  const std::string what = "attribute '" + name + "' on '" + gname + "' in '" + file + "'";
  const Shape shape = checked_shape(space.get(), what);
  if (shape_numel(shape) != 1 || shape.size() > 1)
    throw InvalidArgument(str(what, " must hold a single value, found shape ", shape_string(shape)));
}
}  // namespace

std::string Group::attr_string(const std::string& name) const {
  QuietErrors quiet;
  Handle a(open_attr(id_, name_, file_, name));
  Handle type(H5Aget_type(a.get()));
  require(type.ok() && H5Tget_class(type.get()) == H5T_STRING, "attribute '", name, "' on '", name_, "' in '", file_,
          "' is not a string");
  check_single_attr(a.get(), name_, file_, name);
  if (H5Tis_variable_str(type.get()) > 0) {
    // Read for files written by other tools (h5py's default); the project's own files store
    // fixed-length strings only (docs/checkpoint_format.md "Strings").
    Handle mt(H5Tcopy(H5T_C_S1));
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(type.get()) == H5T_CSET_UTF8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
    char* p = nullptr;
    if (H5Aread(a.get(), mt.get(), &p) < 0)
      throw InvalidArgument(str("cannot read attribute '", name, "' in '", file_, "' (file corrupt?)"));
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  const std::size_t n = H5Tget_size(type.get());
  require(n >= 1 && n <= kMaxStringBytes, "attribute '", name, "' on '", name_, "' in '", file_,
          "' has an invalid string length ", n, " (file corrupt?)");
  // Read through a memory type of the same length (no conversion of a possibly mutated type).
  Handle mt(H5Tcopy(H5T_C_S1));
  H5Tset_size(mt.get(), n);
  H5Tset_strpad(mt.get(), H5T_STR_NULLPAD);
  H5Tset_cset(mt.get(), H5Tget_cset(type.get()) == H5T_CSET_UTF8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
  std::string s(n, '\0');
  if (H5Aread(a.get(), mt.get(), s.data()) < 0)
    throw InvalidArgument(str("cannot read attribute '", name, "' in '", file_, "' (file corrupt?)"));
  s.resize(std::strlen(s.c_str()));  // fixed-length strings are NUL-padded
  return s;
}

std::int64_t Group::attr_int(const std::string& name) const {
  QuietErrors quiet;
  Handle a(open_attr(id_, name_, file_, name));
  Handle type(H5Aget_type(a.get()));
  require(type.ok() && H5Tget_class(type.get()) == H5T_INTEGER, "attribute '", name, "' on '", name_, "' in '", file_,
          "' is not an integer");
  require(is_standard_number_type(type.get()), "attribute '", name, "' on '", name_, "' in '", file_,
          "' has a non-standard integer type (file corrupt?)");
  check_single_attr(a.get(), name_, file_, name);
  std::int64_t v = 0;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0)
    throw InvalidArgument(str("cannot read attribute '", name, "' in '", file_, "' (file corrupt?)"));
  return v;
}

double Group::attr_double(const std::string& name) const {
  QuietErrors quiet;
  Handle a(open_attr(id_, name_, file_, name));
  Handle type(H5Aget_type(a.get()));
  const H5T_class_t cls = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  require(cls == H5T_FLOAT || cls == H5T_INTEGER, "attribute '", name, "' on '", name_, "' in '", file_,
          "' is not a number");
  require(is_standard_number_type(type.get()), "attribute '", name, "' on '", name_, "' in '", file_,
          "' has a non-standard numeric type (file corrupt?)");
  check_single_attr(a.get(), name_, file_, name);
  double v = 0;
  if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0)
    throw InvalidArgument(str("cannot read attribute '", name, "' in '", file_, "' (file corrupt?)"));
  return v;
}

// ---- File -----------------------------------------------------------------------------------
File::File(std::int64_t id, std::string path) : Group(id, "/", std::move(path)) {}

namespace {
// Strong close: closing the file releases every object still open in it, so the bytes are on
// disk when close() returns (needed before the atomic rename).
hid_t strong_fapl() {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
  return fapl;
}
}  // namespace

File File::create(const std::string& path) {
  QuietErrors quiet;
  require(!path.empty(), "HDF5 file path must not be empty");
  Handle fapl(strong_fapl());
  // The 1.8 file format (readable by HDF5 >= 1.8, h5py included): checksummed superblock and
  // object headers (corrupted metadata is detected, not parsed), and dense storage for attributes
  // over 64 KiB (long config or source strings).
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (f < 0) throw Error(str("cannot create HDF5 file '", path, "': ", std::strerror(errno)));
  return File(f, path);
}

File File::open(const std::string& path, bool writable) {
  QuietErrors quiet;
  require(!path.empty(), "HDF5 file path must not be empty");
  if (!file_exists(path)) throw InvalidArgument(str("cannot open '", path, "': no such file"));
  {
    // a FIFO would block the open below forever (no writer) and a device or folder cannot hold an
    // HDF5 file (it needs seeks): refuse anything but a regular file (symbolic links resolved)
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw InvalidArgument(str("cannot open '", path, "': not a regular file (",
                                S_ISFIFO(st.st_mode)  ? "a FIFO"
                                : S_ISDIR(st.st_mode) ? "a folder"
                                                      : "a device or socket",
                                "); HDF5 files must be regular files"));
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw InvalidArgument(str("cannot open '", path, "': ", std::strerror(errno)));
    probe.seekg(0, std::ios::end);
    if (probe.tellg() == 0) throw InvalidArgument(str("cannot open '", path, "': the file is empty"));
  }
  const htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) throw InvalidArgument(str("cannot open '", path, "': not an HDF5 file (no HDF5 signature)"));
  Handle fapl(strong_fapl());
  hid_t f = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get());
  if (f < 0) throw InvalidArgument(str("cannot open '", path, "': HDF5 file is truncated or corrupt"));
  return File(f, path);
}

void File::close() {
  if (id_ < 0) return;
  QuietErrors quiet;
  const herr_t rc = H5Fclose(id_);
  id_ = -1;
  if (rc < 0) throw Error(str("closing HDF5 file '", file_, "' failed (disk full?)"));
}

void write_hdf5_atomic(const std::string& path, const std::function<void(File&)>& fill) {
  write_path_atomic(path, [&](const std::string& tmp) {
    File f = File::create(tmp);
    fill(f);
    f.close();
  });
}

bool has_hdf5_signature(const std::string& path) {
  static const char kSig[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  for (std::uint64_t off = 0; off + 8 <= size; off = off == 0 ? 512 : off * 2) {
    char buf[8];
    in.seekg(static_cast<std::streamoff>(off));
    if (!in.read(buf, 8)) return false;
    if (std::memcmp(buf, kSig, 8) == 0) return true;
  }
  return false;
}

bool is_hdf5_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;  // a FIFO would block
  QuietErrors quiet;
  return H5Fis_hdf5(path.c_str()) > 0;
}

}  // namespace cf::io
