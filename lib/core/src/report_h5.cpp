// Report -> HDF5 (cf::output::write_report_h5). Plain HDF5 C API: lib/core sits below lib/io.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/output.hpp"

namespace cf::output {
namespace {

struct H {  // closes an HDF5 id with its matching function
  hid_t id;
  herr_t (*close)(hid_t);
  H(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~H() {
    if (id >= 0) close(id);
  }
  H(const H&) = delete;
  H& operator=(const H&) = delete;
};

void check(bool ok, const std::string& what) {
  if (!ok) throw Error("writing HDF5 report: " + what + " failed (disk full?)");
}

void write_string(hid_t loc, const std::string& name, const std::string& text) {
  H type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(type.id >= 0 && H5Tset_size(type.id, std::max<std::size_t>(1, text.size())) >= 0, "string type");
  H space(H5Screate(H5S_SCALAR), H5Sclose);
  H ds(H5Dcreate2(loc, name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  check(ds.id >= 0, "dataset " + name);
  std::string buf = text.empty() ? std::string(1, '\0') : text;
  check(H5Dwrite(ds.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0, "dataset " + name);
}

bool is_number_array(const nlohmann::json& j) {
  if (!j.is_array() || j.empty()) return false;
  for (const auto& x : j)
    if (!x.is_number() && !x.is_null()) return false;
  return true;
}

bool is_matrix(const nlohmann::json& j) {
  if (!j.is_array() || j.empty() || !is_number_array(j[0])) return false;
  for (const auto& r : j)
    if (!is_number_array(r) || r.size() != j[0].size()) return false;
  return true;
}

void write_array(hid_t loc, const std::string& name, const nlohmann::json& j) {
  const bool mat = is_matrix(j);
  const hsize_t dims[2] = {j.size(), mat ? j[0].size() : 1};
  std::vector<double> v;
  v.reserve(dims[0] * dims[1]);
  auto num = [](const nlohmann::json& x) { return x.is_number() ? x.get<double>() : std::nan(""); };
  if (mat) {
    for (const auto& r : j)
      for (const auto& x : r) v.push_back(num(x));
  } else {
    for (const auto& x : j) v.push_back(num(x));
  }
  H space(H5Screate_simple(mat ? 2 : 1, dims, nullptr), H5Sclose);
  H ds(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  check(ds.id >= 0, "dataset " + name);
  check(H5Dwrite(ds.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, "dataset " + name);
}

// Group names must not contain '/' or be '.'.
std::string key_name(const std::string& k) {
  std::string o = k.empty() ? std::string("_") : k;
  for (char& c : o)
    if (c == '/') c = '_';
  return o == "." ? "_" : o;
}

// Write the number arrays of `j` under `loc` (at `path`), returning `j` with them replaced.
nlohmann::json extract(hid_t loc, const std::string& path, const nlohmann::json& j) {
  if (j.is_object()) {
    nlohmann::json rest = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string name = key_name(it.key()), sub = path + "/" + name;
      const auto& v = it.value();
      if (is_number_array(v) || is_matrix(v)) {
        write_array(loc, name, v);
        rest[it.key()] = "<dataset " + sub + ">";
      } else if (v.is_object()) {
        H g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
        check(g.id >= 0, "group " + sub);
        rest[it.key()] = extract(g.id, sub, v);
      } else {
        rest[it.key()] = v;
      }
    }
    return rest;
  }
  return j;
}

}  // namespace

void write_report_h5(const Report& report, const std::string& path) {
  write_path_atomic(path, [&](const std::string& tmp) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    H fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_fclose_degree(fapl.id, H5F_CLOSE_STRONG);
    H f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), H5Fclose);
    check(f.id >= 0, "creating '" + path + "'");
    const nlohmann::json body = report.body.is_null() ? nlohmann::json::object() : report.body;
    nlohmann::json rest;
    {
      H g(H5Gcreate2(f.id, "body", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      check(g.id >= 0, "group /body");
      rest = extract(g.id, "/body", body);
    }
    write_string(f.id, "meta", report.meta.dump());
    write_string(f.id, "report", rest.dump());
    const herr_t rc = H5Fclose(f.id);
    f.id = -1;
    check(rc >= 0, "closing '" + path + "'");
  });
}

}  // namespace cf::output
