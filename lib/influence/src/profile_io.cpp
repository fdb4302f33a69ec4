// Influence profile files, see cf/influence/profile_io.hpp.
#include "cf/influence/profile_io.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/rollout/agreement.hpp"

namespace cf::influence {

namespace {

Eigen::VectorXd checked(std::vector<double> v, const std::string& path) {
  require(v.size() >= 2, "influence file '", path, "': at least 2 positions required, got ", v.size());
  Eigen::VectorXd p = Eigen::Map<Eigen::VectorXd>(v.data(), static_cast<long>(v.size()));
  for (long j = 0; j < p.size(); ++j)
    require(std::isfinite(p(j)) && p(j) >= 0, "influence file '", path, "': value ", p(j), " at position ", j,
            " is negative or not finite");
  require(p.sum() > 0, "influence file '", path, "': the values sum to 0");
  return p / p.sum();
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
    out.push_back(cell);
  }
  return out;
}

}  // namespace

Eigen::VectorXd read_profile(const std::string& path) {
  require_regular_input(path, "influence file");  // a FIFO would block the open below forever
  std::ifstream in(path);
  require(static_cast<bool>(in), "influence file '", path, "' cannot be opened");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    nlohmann::json j;
    try {
      j = cf::parse_json(text);
    } catch (const std::exception& e) {
      throw InvalidArgument("influence file '" + path + "': invalid JSON (" + e.what() + ")");
    }
    require(j.contains("profile") && j["profile"].is_array(), "influence file '", path,
            "': JSON without a \"profile\" array (write it with influence --out FILE.json)");
    std::vector<double> v;
    for (const auto& x : j["profile"]) {
      require(x.is_number(), "influence file '", path, "': \"profile\" holds a non-number");
      v.push_back(x.get<double>());
    }
    return checked(v, path);
  }
  // CSV written by influence: a header "position,influence,..." then one row per position
  std::stringstream ls(text);
  std::string line;
  int col = -1;
  std::vector<double> v;
  while (std::getline(ls, line)) {
    const auto cells = split_csv(line);
    if (col < 0) {
      if (!cells.empty() && cells[0] == "position")
        for (std::size_t i = 0; i < cells.size(); ++i)
          if (cells[i] == "influence") col = static_cast<int>(i);
      continue;
    }
    if (cells.empty() || cells[0].empty() || cells[0][0] == '#') break;  // end of the table
    require(static_cast<int>(cells.size()) > col, "influence file '", path, "': short row '", line, "'");
    char* end = nullptr;
    const double x = std::strtod(cells[col].c_str(), &end);
    require(end && *end == '\0' && !cells[col].empty(), "influence file '", path, "': '", cells[col],
            "' in the influence column is not a number");
    v.push_back(x);
  }
  if (col >= 0) return checked(v, path);
  return rollout::read_influence_file(path);
}

void write_profile_h5(const std::string& path, const InfluenceResult& r, const std::vector<std::int64_t>& starts,
                      const std::string& checkpoint, const std::string& source) {
  io::write_hdf5_atomic(path, [&](io::File& f) {
    f.write_vector("profile", r.profile);
    f.write_vector("mean_g", r.mean_g);
    f.write_matrix("per_window", r.per_window.g);
    f.write("starts", starts, io::Shape{starts.size()});
    std::vector<std::int64_t> y(r.per_window.yhat.begin(), r.per_window.yhat.end());
    f.write("yhat", y, io::Shape{y.size()});
    f.write_vector("p_yhat", r.per_window.p_yhat);
    f.set_attr("format", "causalflow-influence");
    f.set_attr("target", target_name(r.target));
    f.set_attr("n", static_cast<std::int64_t>(r.profile.size()));
    f.set_attr("windows", static_cast<std::int64_t>(r.per_window.g.rows()));
    f.set_attr("checkpoint", checkpoint);
    f.set_attr("source", source);
  });
}

}  // namespace cf::influence
