#include "cf/graph/bounds.hpp"

#include <cmath>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/graph/coverage.hpp"

namespace cf::graph {

AccuracyBound boundary_copy_bound(int K) {
  require(K >= 2, "boundary copy needs K >= 2 classes (got K=", K, ")");
  return {1.0 / K, std::log(static_cast<double>(K))};
}

AccuracyBound coverage_limited_bound(double pi, int K) {
  require(K >= 2, "coverage-limited bound needs K >= 2 classes (got K=", K, ")");
  require(pi >= 0.0 && pi <= 1.0, "covered fraction pi must lie in [0, 1] (got ", pi, ")");
  return {pi + (1.0 - pi) / K, (1.0 - pi) * std::log(static_cast<double>(K))};
}

template <class Probe, class Covered>
static double weighted_fraction(const std::vector<Probe>& probes, Covered covered) {
  require(!probes.empty(), "probe distribution is empty");
  double total = 0, hit = 0;
  for (const auto& q : probes) {
    require(q.weight >= 0 && std::isfinite(q.weight), "probe weights must be finite and >= 0 (got ", q.weight, ")");
    total += q.weight;
    if (covered(q)) hit += q.weight;
  }
  require(total > 0, "probe weights sum to zero");
  return hit / total;
}

ProbeSet parse_probe_csv(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    std::stringstream ss(l);
    std::string x;
    while (std::getline(ss, x, ',')) {
      while (!x.empty() && (x.back() == ' ' || x.back() == '\r')) x.pop_back();
      while (!x.empty() && x.front() == ' ') x.erase(x.begin());
      f.push_back(x);
    }
    return f;
  };
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    header = split(line);
  }
  require(!header.empty(), source, ": probe file is empty (expected a header 'd,r[,weight]' or 'u,t[,weight]')");
  const bool phase = header.size() >= 2 && header[0] == "d" && header[1] == "r";
  const bool pair = header.size() >= 2 && header[0] == "u" && header[1] == "t";
  const bool weighted = header.size() == 3 && header[2] == "weight";
  require((phase || pair) && (header.size() == 2 || weighted), source, ":", lineno,
          ": header must be 'd,r[,weight]' or 'u,t[,weight]'");
  ProbeSet out;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    const auto f = split(line);
    require(f.size() == header.size(), source, ":", lineno, ": expected ", header.size(), " fields, got ", f.size());
    long long a, b;
    double w = 1.0;
    try {
      size_t pa, pb;
      a = std::stoll(f[0], &pa);
      b = std::stoll(f[1], &pb);
      require(pa == f[0].size() && pb == f[1].size(), "");
      if (weighted) {
        size_t pw;
        w = std::stod(f[2], &pw);
        require(pw == f[2].size(), "");
      }
    } catch (const std::exception&) {
      throw InvalidArgument(str(source, ":", lineno, ": not a number in '", line, "'"));
    }
    if (phase)
      out.phase.push_back({a, b, w});
    else
      out.pairs.push_back({a, b, w});
  }
  require(!out.phase.empty() || !out.pairs.empty(), source, ": probe file has a header but no probes");
  return out;
}

double covered_fraction(const Pattern& p, const std::vector<PhaseProbe>& probes) {
  return weighted_fraction(probes, [&](const PhaseProbe& q) {
    require(q.d >= 0, "probe distance d must be >= 0 (got ", q.d, ")");
    require(q.r >= 0 && q.r < p.b, "probe phase r must satisfy 0 <= r < b = ", p.b, " (got ", q.r, ")");
    return coverage_closed_form(p, q.d, q.r);
  });
}

static void check_pair(const PairProbe& q, Index n) {
  require(q.t >= 0 && q.t < n && q.u >= 0 && q.u <= q.t, "probe pair (u=", q.u, ", t=", q.t,
          ") must satisfy 0 <= u <= t < n = ", n);
}

double covered_fraction(const Mask& m, const std::vector<PairProbe>& probes) {
  return weighted_fraction(probes, [&](const PairProbe& q) {
    check_pair(q, m.n);
    return contains(sources(m, q.t), q.u);
  });
}

double covered_fraction(const Closure& c, const std::vector<PairProbe>& probes) {
  return weighted_fraction(probes, [&](const PairProbe& q) {
    check_pair(q, c.n);
    return c.contains(q.t, q.u);
  });
}

double cost_normalised_gain(double acc_m, double acc_block, double scores_m, double scores_block) {
  require(scores_m != scores_block, "U_D is undefined when Scores(M) = Scores(Block) (", scores_m, ")");
  return (acc_m - acc_block) / (scores_m - scores_block);
}

double swa_gap_recovery(double acc_m, double acc_block, double acc_swa) {
  require(acc_swa != acc_block, "rho_D is undefined when Acc(SWA) = Acc(Block) (", acc_swa, ")");
  return (acc_m - acc_block) / (acc_swa - acc_block);
}

}  // namespace cf::graph
