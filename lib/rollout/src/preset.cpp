#include "cf/rollout/preset.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/number_file.hpp"

namespace cf::rollout {

std::vector<std::string> preset_names() { return {"bloom-176b", "bloom-7b1", "mpt-7b", "mpt-30b", "falcon-rw-7b"}; }

std::string canonical_preset_name(const std::string& name) {
  if (name == "bloom" || name == "bloom-176b") return "bloom-176b";
  for (const auto& p : preset_names())
    if (p == name) return p;
  return "";
}

namespace {
std::string known_list() {
  std::string s;
  for (const auto& p : preset_names()) s += (s.empty() ? "" : ", ") + p;
  return s + " (alias: bloom = bloom-176b)";
}
}  // namespace

Preset load_preset(const std::string& name, const std::string& data_dir) {
  const std::string canon = canonical_preset_name(name);
  require(!canon.empty(), "model: unknown preset '", name, "'; known presets: ", known_list(),
          ", or a causalflow capture/checkpoint file (.h5)");
  const std::string dir = data_dir.empty() ? std::string(CF_DATA_DIR) : data_dir;
  const std::string path = dir + "/presets/" + canon + ".json";
  std::ifstream in(path);
  if (!in) throw Error(str("preset file '", path, "' cannot be read (is data/presets/ present?)"));
  nlohmann::json j;
  try {
    in >> j;
    Preset p;
    p.name = j.at("name").get<std::string>();
    p.layers = j.at("layers").get<int>();
    p.heads = j.at("heads").get<int>();
    p.d_head = j.value("d_head", 0);
    p.slope_recipe = j.value("slope_recipe", std::string("file"));
    p.slopes = j.at("alibi_slopes").get<std::vector<double>>();
    p.source = j.value("source", std::string());
    const auto a = j.at("alpha_measured").get<std::vector<double>>();
    p.alpha_measured = Eigen::Map<const Eigen::VectorXd>(a.data(), static_cast<long>(a.size()));
    require(p.layers >= 1 && p.heads >= 1, "preset '", path, "': layers and heads must be >= 1");
    require(static_cast<int>(p.slopes.size()) == p.heads, "preset '", path, "': ", p.slopes.size(),
            " slopes for H = ", p.heads);
    validate_alpha(p.alpha_measured, p.layers);
    p.alpha_by_dataset["fineweb-edu"] = p.alpha_measured;
    if (j.contains("alpha_measured_by_dataset"))
      for (const auto& [ds, v] : j["alpha_measured_by_dataset"].items()) {
        const auto x = v.get<std::vector<double>>();
        Eigen::VectorXd al = Eigen::Map<const Eigen::VectorXd>(x.data(), static_cast<long>(x.size()));
        validate_alpha(al, p.layers);
        p.alpha_by_dataset[ds] = al;
      }
    if (j.contains("content"))
      for (const auto& [ds, c] : j["content"].items()) {
        const auto d = c.at("diagonal_scores").get<std::vector<std::vector<double>>>();
        require(static_cast<int>(d.size()) == p.layers, "preset '", path, "': ", ds, " diagonal_scores has ", d.size(),
                " layers, expected ", p.layers);
        Eigen::MatrixXd delta(p.layers, p.heads);
        for (int l = 0; l < p.layers; ++l) {
          require(static_cast<int>(d[l].size()) == p.heads, "preset '", path, "': ", ds, " diagonal_scores layer ",
                  l + 1, " has ", d[l].size(), " heads, expected ", p.heads);
          for (int h = 0; h < p.heads; ++h) delta(l, h) = d[l][h];
        }
        require(delta.allFinite(), "preset '", path, "': ", ds, " diagonal_scores are not all finite");
        p.content_by_dataset[ds] = delta;
      }
    if (j.contains("content_mean"))
      for (const auto& [ds, v] : j["content_mean"].items()) p.content_mean_by_dataset[ds] = v.get<double>();
    select_dataset(p, "fineweb-edu");
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("preset file '", path, "' is malformed: ", e.what()));
  }
}

std::vector<std::string> dataset_names() { return {"fineweb-edu", "dclm", "wikipedia"}; }

void select_dataset(Preset& p, const std::string& ds) {
  const auto names = dataset_names();
  require(std::find(names.begin(), names.end(), ds) != names.end(), "--dataset: unknown dataset '", ds,
          "'; known: fineweb-edu, dclm, wikipedia");
  const auto a = p.alpha_by_dataset.find(ds);
  require(a != p.alpha_by_dataset.end(), "--dataset: preset ", p.name, " ships no alpha schedule for ", ds);
  p.dataset = ds;
  p.alpha_measured = a->second;
  const auto c = p.content_by_dataset.find(ds);
  p.content_delta = c != p.content_by_dataset.end() ? c->second : Eigen::MatrixXd::Zero(p.layers, p.heads);
  const auto m = p.content_mean_by_dataset.find(ds);
  p.has_content_mean = m != p.content_mean_by_dataset.end();
  p.content_mean = p.has_content_mean ? m->second : 0.0;
}

AlphaSpec parse_alpha_spec(const std::string& spec) {
  AlphaSpec a;
  a.text = spec;
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    require(!s.empty() && end && *end == '\0' && std::isfinite(v), "alpha: '", s, "' in '", spec,
            "' is not a finite number");
    return v;
  };
  if (spec == "measured") return a;
  if (spec.rfind("const:", 0) == 0) {
    a.kind = AlphaSpec::Kind::Constant;
    a.value = number(spec.substr(6));
    require(a.value >= 0 && a.value <= 1, "alpha: const:X needs 0 <= X <= 1, got X = ", a.value);
    return a;
  }
  for (const char* prefix : {"power:", "power0:", "power1:"}) {
    const std::string pre = prefix;
    if (spec.rfind(pre, 0) != 0) continue;
    a.kind = AlphaSpec::Kind::Power;
    a.origin = pre == "power1:" ? 1 : 0;
    const std::string rest = spec.substr(pre.size());
    const auto comma = rest.find(',');
    require(comma != std::string::npos, "alpha: ", pre, "A0,BETA expected, got '", spec, "'");
    a.value = number(rest.substr(0, comma));
    a.beta = number(rest.substr(comma + 1));
    require(a.value >= 0 && a.value <= 1, "alpha: ", pre, "A0,BETA needs 0 <= A0 <= 1, got A0 = ", a.value);
    require(a.beta >= 0, "alpha: ", pre, "A0,BETA needs BETA >= 0, got BETA = ", a.beta);
    return a;
  }
  if (spec.rfind("file:", 0) == 0) {
    a.kind = AlphaSpec::Kind::File;
    a.path = spec.substr(5);
    require(!a.path.empty(), "alpha: file:PATH needs a path");
    return a;
  }
  throw InvalidArgument(
      str("alpha: expected measured | const:X | power:A0,BETA | power0:A0,BETA | power1:A0,BETA | file:PATH, got '",
          spec, "'"));
}

Eigen::VectorXd alpha_power(int L, double a0, double beta, int origin) {
  require(L >= 1, "alpha: L >= 1 required, got ", L);
  require(a0 >= 0 && a0 <= 1 && beta >= 0, "alpha: power needs 0 <= a0 <= 1 and beta >= 0, got a0 = ", a0,
          ", beta = ", beta);
  require(origin == 0 || origin == 1, "alpha: power origin must be 0 or 1, got ", origin);
  Eigen::VectorXd a(L);
  for (int l = 1; l <= L; ++l) a(l - 1) = a0 / std::pow(static_cast<double>(l + origin), beta);
  return a;
}

double alpha_at(const AlphaSpec& spec, long l) {
  require(l >= 1, "alpha: layer index l >= 1 required, got ", l);
  if (spec.kind == AlphaSpec::Kind::Constant) return spec.value;
  require(spec.kind == AlphaSpec::Kind::Power, "alpha: '", spec.text, "' has no closed form at every depth");
  return spec.value / std::pow(static_cast<double>(l + spec.origin), spec.beta);
}

Eigen::VectorXd read_alpha_file(const std::string& path, const std::string& what) {
  std::vector<double> v;
  for (const auto& row : read_number_rows(path, what)) v.insert(v.end(), row.begin(), row.end());
  require(!v.empty(), what, " '", path, "': no numbers found");
  return Eigen::Map<Eigen::VectorXd>(v.data(), static_cast<long>(v.size()));
}

Eigen::VectorXd read_capture_alpha(const std::string& path, const std::string& dataset) {
  H5E_auto2_t old_func;
  void* old_data;
  H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become exceptions, not stderr noise
  struct Restore {
    H5E_auto2_t f;
    void* d;
    ~Restore() { H5Eset_auto2(H5E_DEFAULT, f, d); }
  } restore{old_func, old_data};
  require(H5Fis_hdf5(path.c_str()) > 0, "capture: '", path, "' is not an HDF5 file (or cannot be read)");
  struct Handle {
    hid_t id;
    herr_t (*close)(hid_t);
    ~Handle() {
      if (id >= 0) close(id);
    }
  };
  Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  require(file.id >= 0, "capture: cannot open '", path, "'");
  require(H5Lexists(file.id, dataset.c_str(), H5P_DEFAULT) > 0, "capture: '", path, "' has no dataset ", dataset,
          " (a capture file from `capture` is needed; see docs/checkpoint_format.md)");
  Handle ds{H5Dopen2(file.id, dataset.c_str(), H5P_DEFAULT), H5Dclose};
  require(ds.id >= 0, "capture: cannot open dataset ", dataset, " in '", path, "'");
  Handle space{H5Dget_space(ds.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  require(rank == 1, "capture: ", dataset, " must be one-dimensional [L], got rank ", rank);
  hsize_t dim = 0;
  H5Sget_simple_extent_dims(space.id, &dim, nullptr);
  require(dim >= 1, "capture: ", dataset, " is empty");
  Eigen::VectorXd a(static_cast<long>(dim));
  if (H5Dread(ds.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data()) < 0)
    throw Error(str("capture: reading ", dataset, " from '", path, "' failed"));
  return a;
}

void validate_alpha(const Eigen::VectorXd& alpha, int L) {
  require(L >= 1, "alpha: L >= 1 layers required, got ", L);
  require(alpha.size() == L, "alpha: the schedule has ", alpha.size(), " entries but the model has L = ", L, " layers");
  for (long l = 0; l < alpha.size(); ++l)
    require(std::isfinite(alpha(l)) && alpha(l) >= 0 && alpha(l) <= 1,
            "alpha: every alpha_l must lie in [0, 1]; alpha_", l + 1, " = ", alpha(l));
}

Eigen::VectorXd resolve_alpha(const AlphaSpec& spec, int L, const Eigen::VectorXd& measured) {
  Eigen::VectorXd a;
  switch (spec.kind) {
    case AlphaSpec::Kind::Measured:
      require(measured.size() > 0, "alpha: no measured schedule is available for this model");
      a = measured;
      break;
    case AlphaSpec::Kind::Constant:
      a = Eigen::VectorXd::Constant(L, spec.value);
      break;
    case AlphaSpec::Kind::Power:
      a = alpha_power(L, spec.value, spec.beta, spec.origin);
      break;
    case AlphaSpec::Kind::File:
      a = read_alpha_file(spec.path);
      break;
  }
  validate_alpha(a, L);
  return a;
}

}  // namespace cf::rollout
