#include "cf/graph/bounds.hpp"

#include <cmath>

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
