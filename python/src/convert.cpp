// Conversions of python/src/convert.hpp: error translation, input arrays, JSON to Python.
#include "convert.hpp"

#include <cmath>
#include <new>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

namespace cfpy {

void register_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cf::InvalidArgument& e) {  // the tools' exit 2: bad input
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const cf::Error& e) {  // the tools' exit 1: runtime failure
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    // anything else falls through to pybind11's own translators (std::bad_alloc -> MemoryError,
    // std::invalid_argument -> ValueError, other std::exception -> RuntimeError)
  });
}

namespace {
py::array_t<double, py::array::forcecast> as_double_array(const py::handle& a, int ndim, const std::string& what) {
  if (py::isinstance<py::str>(a) || a.is_none())
    throw cf::InvalidArgument(cf::str(what, " must be an array of numbers"));
  py::array_t<double, py::array::forcecast> arr;
  try {
    arr = py::array_t<double, py::array::forcecast>::ensure(a);
  } catch (const py::error_already_set&) {
    arr = py::array_t<double, py::array::forcecast>();
  }
  if (!arr) {
    PyErr_Clear();
    throw cf::InvalidArgument(cf::str(what, " must be an array of numbers"));
  }
  if (arr.ndim() != ndim)
    throw cf::InvalidArgument(cf::str(what, " must be a ", ndim, "-D array, got ", arr.ndim(), " dimensions"));
  return arr;
}
}  // namespace

Eigen::VectorXd to_vector(const py::handle& a, const std::string& what) {
  auto arr = as_double_array(a, 1, what);
  auto u = arr.unchecked<1>();
  Eigen::VectorXd v(u.shape(0));
  for (py::ssize_t i = 0; i < u.shape(0); ++i) {
    v(i) = u(i);
    if (!std::isfinite(v(i))) throw cf::InvalidArgument(cf::str(what, "[", i, "] is not finite (", v(i), ")"));
  }
  return v;
}

Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> to_row_matrix(const py::handle& a,
                                                                                     const std::string& what) {
  auto arr = as_double_array(a, 2, what);
  auto u = arr.unchecked<2>();
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> m(u.shape(0), u.shape(1));
  for (py::ssize_t i = 0; i < u.shape(0); ++i)
    for (py::ssize_t j = 0; j < u.shape(1); ++j) {
      m(i, j) = u(i, j);
      if (!std::isfinite(m(i, j)))
        throw cf::InvalidArgument(cf::str(what, "[", i, ", ", j, "] is not finite (", m(i, j), ")"));
    }
  return m;
}

void check_output_path(const std::string& path, const std::string& what) {
  try {
    cf::check_output_writable(path);
  } catch (const cf::InvalidArgument&) {
    throw;
  } catch (const cf::Error& e) {  // a missing folder is the caller's input, not a runtime failure
    throw cf::InvalidArgument(cf::str(what, ": ", e.what()));
  }
}

py::object from_json(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& x : j) l.append(from_json(x));
      return std::move(l);
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = from_json(it.value());
      return std::move(d);
    }
    default:
      return py::none();
  }
}

}  // namespace cfpy
