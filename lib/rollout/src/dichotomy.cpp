#include "cf/rollout/dichotomy.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <sstream>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"

namespace cf::rollout {

using Real = boost::multiprecision::cpp_bin_float_50;

double admissible_min(const RowMatrix& K) {
  double m = std::numeric_limits<double>::infinity();
  for (long i = 0; i < K.rows(); ++i)
    for (long j = 0; j <= i && j < K.cols(); ++j)
      if (K(i, j) > 0) m = std::min(m, K(i, j));
  require(std::isfinite(m), "dichotomy: kernel has no positive entry");
  return m;
}

namespace {
std::string to_sci(const Real& x) {
  std::ostringstream os;
  os.precision(12);
  os << std::scientific << x;
  return os.str();
}
double log10_of(const Real& x) {
  if (x <= 0) return -std::numeric_limits<double>::infinity();
  return static_cast<double>(boost::multiprecision::log10(x));
}
}  // namespace

DichotomyResult dichotomy(const RowMatrix& K, const std::function<double(long)>& alpha, long depth, long row,
                          double eps) {
  const long n = K.rows();
  require(K.cols() == n && n >= 1, "dichotomy: K must be square, got ", K.rows(), " x ", K.cols());
  require(depth >= 1, "dichotomy: depth >= 1 required, got ", depth);
  require(row >= 0 && row < n, "dichotomy: 0 <= row < n = ", n, " required, got ", row);
  DichotomyResult r;
  r.depth = depth;
  r.row = row;
  r.eps = eps > 0 ? eps : admissible_min(K);
  require(r.eps <= 1, "dichotomy: eps must be <= 1, got ", r.eps);
  std::vector<Real> Kr(static_cast<std::size_t>(n * n));
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) Kr[i * n + j] = Real(K(i, j));
  std::vector<Real> alphas(depth + 1);
  Real sum = 0, prod = 1;
  const Real one_minus_eps = Real(1) - Real(r.eps);
  for (long l = 1; l <= depth; ++l) {
    const double a = alpha(l);
    require(std::isfinite(a) && a >= 0 && a <= 1, "dichotomy: alpha_", l, " = ", a, " is outside [0, 1]");
    alphas[l] = Real(a);
    sum += alphas[l];
    prod *= Real(1) - one_minus_eps * alphas[l];
  }
  // Row vector e_i^T R(L) ... R(1), newest layer first.
  std::vector<Real> v(n, Real(0)), u(n);
  v[row] = 1;
  Progress progress("dichotomy: depth " + std::to_string(depth), depth);  // stderr, terminals only
  for (long l = depth; l >= 1; --l, progress.advance()) {
    const Real& a = alphas[l];
    if (a == 0) continue;
    for (long j = 0; j < n; ++j) u[j] = 0;
    for (long i = 0; i < n; ++i) {
      if (v[i] == 0) continue;
      const Real vi = v[i];
      for (long j = 0; j <= i; ++j) u[j] += vi * Kr[i * n + j];
    }
    const Real b = Real(1) - a;
    for (long j = 0; j < n; ++j) v[j] = b * v[j] + a * u[j];
  }
  Real off = 0;
  for (long j = 1; j < n; ++j) off += v[j];
  const Real bound_ii = boost::multiprecision::exp(-Real(r.eps) * sum);
  r.sum_alpha = static_cast<double>(sum);
  r.self_mass = to_sci(v[row]);
  r.bound_i = to_sci(prod);
  r.off_zero_mass = to_sci(off);
  r.bound_ii = to_sci(bound_ii);
  r.log10_self_mass = log10_of(v[row]);
  r.log10_bound_i = log10_of(prod);
  r.log10_off_zero = log10_of(off);
  r.log10_bound_ii = log10_of(bound_ii);
  // Relative slack 1e-40: the 50-digit arithmetic rounds, the inequalities are exact.
  r.holds_i = v[row] >= prod * (1 - Real(1e-40));
  r.holds_ii = off <= bound_ii * (1 + Real(1e-40));
  return r;
}

}  // namespace cf::rollout
