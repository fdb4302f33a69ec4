// Measured Jacobians against Runway (Lee & Clark) Theorem 3.3, see cf/influence/bound_check.hpp.
#include "cf/influence/bound_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/jacobian_bound.hpp"

namespace cf::influence {

Quantiles quantiles(std::vector<double> v) {
  Quantiles q;
  q.count = static_cast<long>(v.size());
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  auto at = [&](double f) {
    const double x = f * static_cast<double>(v.size() - 1);
    const std::size_t i = static_cast<std::size_t>(std::floor(x));
    const std::size_t j = std::min(i + 1, v.size() - 1);
    return v[i] + (x - static_cast<double>(i)) * (v[j] - v[i]);
  };
  q.min = v.front();
  q.p10 = at(0.1);
  q.median = at(0.5);
  q.p90 = at(0.9);
  q.max = v.back();
  return q;
}

OneLayerCheck one_layer_check(const Eigen::MatrixXd& J1, const rollout::RowMatrix& A) {
  const long n = A.rows();
  require(J1.rows() == n && J1.cols() == n && A.cols() == n, "one-layer check: J is ", J1.rows(), " x ", J1.cols(),
          " and A is ", A.rows(), " x ", A.cols(), " (both n x n)");
  OneLayerCheck c;
  for (long d = 0; d < n; ++d)
    for (long w = 0; w <= d; ++w) {
      const double b = (d == w ? 1.0 : 0.0) + A(d, w);
      if (b > 0) {
        c.c1 = std::max(c.c1, J1(d, w) / b);
      } else {
        ++c.outside_mask_pairs;
        if (J1(d, w) != 0) ++c.outside_mask_nonzero;
        c.outside_mask_max = std::max(c.outside_mask_max, J1(d, w));
      }
    }
  return c;
}

BoundCheck check_bound(const Eigen::MatrixXd& J, const std::vector<rollout::RowMatrix>& attention,
                       const std::vector<double>& c1, double tolerance) {
  require(!attention.empty(), "bound check: r >= 1 attention matrices required");
  require(c1.size() == attention.size(), "bound check: ", c1.size(), " one-layer constants for r = ", attention.size(),
          " layers");
  const long n = attention[0].rows();
  require(J.rows() == n && J.cols() == n, "bound check: J is ", J.rows(), " x ", J.cols(), ", expected ", n, " x ", n);
  const int r = static_cast<int>(attention.size());
  const rollout::JacobianBound jb = rollout::jacobian_bound(attention, 1.0);
  BoundCheck bc;
  double cr = 0;  // C*^r
  std::vector<double> jo, bo, jd, bd;
  long gate_wins = 0, off = 0;
  for (long d = 0; d < n; ++d)
    for (long s = 0; s <= d; ++s) {
      ++bc.pairs;
      const double b = jb.bound(d, s), j = J(d, s);
      if (b > 0)
        cr = std::max(cr, j / b);
      else if (j > 0)
        ++bc.zero_bound_nonzero_j;
      if (s < d) {
        jo.push_back(j), bo.push_back(b);
        ++off;
        if (jb.gate_term(d, s) > jb.self_term(d, s)) ++gate_wins;
      } else {
        jd.push_back(j), bd.push_back(b);
      }
    }
  bc.c_star = std::pow(cr, 1.0 / r);
  bc.c1_max = *std::max_element(c1.begin(), c1.end());
  bc.c_star_within_c1 = bc.c_star <= bc.c1_max * (1 + tolerance);
  // undefined (NaN: "nan" in tables and CSV, null in JSON) with fewer than two pairs or a constant
  // side (no ranking to correlate); rollout::spearman would read it as 0, no correlation
  auto sp = [](const std::vector<double>& a, const std::vector<double>& b) {
    const auto constant = [](const std::vector<double>& v) {
      return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
    };
    if (a.size() < 2 || constant(a) || constant(b)) return std::numeric_limits<double>::quiet_NaN();
    return rollout::spearman(Eigen::Map<const Eigen::VectorXd>(a.data(), static_cast<long>(a.size())),
                             Eigen::Map<const Eigen::VectorXd>(b.data(), static_cast<long>(b.size())));
  };
  bc.spearman_offdiag = sp(jo, bo);
  bc.spearman_diag = sp(jd, bd);
  std::vector<double> tight;
  for (long d = 0; d < n; ++d)
    for (long s = 0; s <= d; ++s)
      if (jb.bound(d, s) > 0 && cr > 0) tight.push_back(J(d, s) / (cr * jb.bound(d, s)));
  bc.tightness = quantiles(tight);
  bc.gate_share = off > 0 ? static_cast<double>(gate_wins) / static_cast<double>(off) : 0.0;
  return bc;
}

}  // namespace cf::influence
