#pragma once
// Conversions shared by every submodule of the Python module (python/src/*.cpp).
//
// Zero copy: a result the C++ side owns (an Eigen matrix, a std::vector) is MOVED into a heap
// object owned by a py::capsule, and the returned numpy array views that memory with the capsule as
// its `base`. The array therefore does not own its data (flags.owndata is False) and the memory lives
// exactly as long as the last array (or view of it) that refers to the capsule. No element is copied.
//
// Errors: cf::InvalidArgument (a tool's exit 2) becomes ValueError, cf::Error and every other
// std::exception (a tool's exit 1) RuntimeError, std::bad_alloc MemoryError (register_errors).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <Eigen/Core>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cfpy {

namespace py = pybind11;

/// Install the exception translator cf::InvalidArgument -> ValueError, cf::Error -> RuntimeError.
void register_errors();

/// A std::vector moved behind a capsule and viewed as a 1-D numpy array of its elements
/// (arithmetic element types only).
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v) {
  static_assert(std::is_arithmetic_v<T>, "numbers only");
  auto* owner = new std::vector<T>(std::move(v));
  py::capsule base(owner, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(owner->size())}, {static_cast<py::ssize_t>(sizeof(T))}, owner->data(),
                        base);
}

/// An Eigen matrix or vector moved behind a capsule: vectors (compile-time one column or one row)
/// become 1-D arrays, matrices 2-D arrays with the matrix's own strides (row-major matrices are
/// C-contiguous, column-major ones Fortran-contiguous).
template <class M>
py::array_t<typename std::decay_t<M>::Scalar> to_numpy_eigen(M&& m) {
  using Mat = std::decay_t<M>;
  using T = typename Mat::Scalar;
  auto* owner = new Mat(std::move(m));
  py::capsule base(owner, [](void* p) { delete static_cast<Mat*>(p); });
  const auto s = static_cast<py::ssize_t>(sizeof(T));
  if constexpr (Mat::ColsAtCompileTime == 1 || Mat::RowsAtCompileTime == 1) {
    return py::array_t<T>({static_cast<py::ssize_t>(owner->size())}, {s}, owner->data(), base);
  } else {
    const auto r = static_cast<py::ssize_t>(owner->rows()), c = static_cast<py::ssize_t>(owner->cols());
    std::vector<py::ssize_t> strides =
        Mat::IsRowMajor ? std::vector<py::ssize_t>{c * s, s} : std::vector<py::ssize_t>{s, r * s};
    return py::array_t<T>({r, c}, strides, owner->data(), base);
  }
}

/// A 1-D float64 numpy array (any strides, any real dtype) copied into an Eigen vector (inputs are
/// small: schedules, profiles). `what` names the argument in the ValueError, which is also raised for a
/// NaN or infinite entry (no library function takes one; a silent NaN result would follow).
Eigen::VectorXd to_vector(const py::handle& a, const std::string& what);

/// A 2-D real array copied into a row-major double matrix; `what` names the argument; entries must be finite.
Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> to_row_matrix(const py::handle& a,
                                                                                     const std::string& what);

/// Refuse (ValueError naming `what`) an output path that cannot be written before any work: a missing
/// folder, a read-only file (as the tools' cf::app::check_output, without its per-run registry of the
/// outputs already checked, which in a long-lived Python process would only grow).
void check_output_path(const std::string& path, const std::string& what);

/// A JSON value (a library report's body) as plain Python objects: dict, list, int, float, str,
/// bool, None. Numbers keep their exact binary value (the CLI prints the same doubles).
py::object from_json(const nlohmann::json& j);

}  // namespace cfpy
