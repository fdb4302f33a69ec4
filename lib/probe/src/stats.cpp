#include "cf/probe/stats.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "cf/core/error.hpp"

namespace cf::probe {

namespace {
// log C(n, k) + k log p + (n-k) log(1-p), with the p = 0 / 1 limits.
double log_pmf(std::int64_t k, std::int64_t n, double p) {
  const double lc = std::lgamma(double(n) + 1) - std::lgamma(double(k) + 1) - std::lgamma(double(n - k) + 1);
  double v = lc;
  if (k > 0) v += (p == 0.0 ? -INFINITY : double(k) * std::log(p));
  if (n - k > 0) v += (p == 1.0 ? -INFINITY : double(n - k) * std::log1p(-p));
  return v;
}

// log of sum_{i=lo..hi} pmf(i) by log-sum-exp (-inf for an empty or zero sum).
double log_sum_pmf(std::int64_t lo, std::int64_t hi, std::int64_t n, double p) {
  if (lo > hi) return -INFINITY;
  double mx = -INFINITY;
  for (std::int64_t i = lo; i <= hi; ++i) mx = std::max(mx, log_pmf(i, n, p));
  if (mx == -INFINITY) return mx;
  double s = 0;
  for (std::int64_t i = lo; i <= hi; ++i) s += std::exp(log_pmf(i, n, p) - mx);
  return mx + std::log(s);
}

// sum_{i=lo..hi} pmf(i) by log-sum-exp.
double sum_pmf(std::int64_t lo, std::int64_t hi, std::int64_t n, double p) {
  if (lo > hi) return 0.0;
  double mx = -INFINITY;
  std::vector<double> l(static_cast<std::size_t>(hi - lo + 1));
  for (std::int64_t i = lo; i <= hi; ++i) {
    l[static_cast<std::size_t>(i - lo)] = log_pmf(i, n, p);
    mx = std::max(mx, l[static_cast<std::size_t>(i - lo)]);
  }
  if (mx == -INFINITY) return 0.0;
  double s = 0;
  for (double x : l) s += std::exp(x - mx);
  return std::min(1.0, std::exp(mx) * s);
}

void check(std::int64_t n, double p) {
  require(n >= 0, "binomial: n must be >= 0 (got ", n, ")");
  require(p >= 0.0 && p <= 1.0, "binomial: p must lie in [0, 1] (got ", p, ")");
}
}  // namespace

double binomial_upper_tail(std::int64_t k, std::int64_t n, double p) {
  check(n, p);
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  // sum the shorter side for accuracy
  if (double(k) > double(n) * p) return sum_pmf(k, n, n, p);
  return std::max(0.0, 1.0 - sum_pmf(0, k - 1, n, p));
}

double binomial_lower_tail(std::int64_t k, std::int64_t n, double p) {
  check(n, p);
  if (k < 0) return 0.0;
  if (k >= n) return 1.0;
  if (double(k) < double(n) * p) return sum_pmf(0, k, n, p);
  return std::max(0.0, 1.0 - sum_pmf(k + 1, n, n, p));
}

double binomial_test_above(std::int64_t correct, std::int64_t n, double bound) {
  require(n >= 0, "binomial test: number of items must be >= 0 (got ", n, ")");
  require(correct >= 0 && correct <= n, "binomial test: correct count ", correct, " outside [0, ", n, "]");
  require(bound >= 0.0 && bound <= 1.0, "binomial test: bound must lie in [0, 1] (got ", bound, ")");
  return binomial_upper_tail(correct, n, bound);
}

BinomialCi binomial_ci(std::int64_t correct, std::int64_t n, double level) {
  require(n >= 1, "binomial interval: number of items must be >= 1 (got ", n, ")");
  require(correct >= 0 && correct <= n, "binomial interval: correct count ", correct, " outside [0, ", n, "]");
  require(level > 0.0 && level < 1.0, "binomial interval: level must lie in (0, 1) (got ", level, ")");
  const double a = 0.5 * (1.0 - level);
  // f(p) increasing in p for the upper tail, decreasing for the lower: bisect to double precision
  auto solve = [](const std::function<bool(double)>& above) {
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 200 && hi - lo > 1e-16; ++it) {
      const double mid = 0.5 * (lo + hi);
      (above(mid) ? hi : lo) = mid;
    }
    return 0.5 * (lo + hi);
  };
  BinomialCi ci;
  if (correct > 0) ci.lo = solve([&](double p) { return binomial_upper_tail(correct, n, p) >= a; });
  if (correct < n) ci.hi = solve([&](double p) { return binomial_lower_tail(correct, n, p) <= a; });
  return ci;
}

McNemarResult mcnemar_exact(std::int64_t n01, std::int64_t n10) {
  require(n01 >= 0 && n10 >= 0, "McNemar: discordant counts must be >= 0 (got ", n01, ", ", n10, ")");
  McNemarResult r;
  r.n01 = n01;
  r.n10 = n10;
  const std::int64_t n = n01 + n10;
  if (n == 0) return r;
  r.p_value = std::min(1.0, 2.0 * binomial_lower_tail(std::min(n01, n10), n, 0.5));
  r.log10_p = std::min(0.0, (std::log(2.0) + log_sum_pmf(0, std::min(n01, n10), n, 0.5)) / std::log(10.0));
  return r;
}

McNemarResult mcnemar_exact(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  require(a.size() == b.size(), "McNemar: the two outcome lists differ in length (", a.size(), " vs ", b.size(),
          "): a paired test needs the same items");
  std::int64_t n01 = 0, n10 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] && !b[i]) ++n01;
    if (!a[i] && b[i]) ++n10;
  }
  return mcnemar_exact(n01, n10);
}

BootstrapCi paired_bootstrap_ci(const std::vector<double>& a, const std::vector<double>& b, int resamples, double level,
                                std::uint64_t seed) {
  require(!a.empty() && a.size() == b.size(),
          "paired bootstrap: needs two non-empty outcome lists of equal length (got ", a.size(), " and ", b.size(),
          ")");
  require(resamples >= 1, "paired bootstrap: resamples must be >= 1 (got ", resamples, ")");
  require(level > 0.0 && level < 1.0, "paired bootstrap: level must lie in (0, 1) (got ", level, ")");
  const std::size_t n = a.size();
  std::vector<double> d(n);
  double est = 0;
  for (std::size_t i = 0; i < n; ++i) {
    d[i] = a[i] - b[i];
    est += d[i];
  }
  BootstrapCi ci;
  ci.estimate = est / double(n);
  ci.level = level;
  ci.resamples = resamples;
  ci.seed = seed;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  std::vector<double> stat(static_cast<std::size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += d[pick(rng)];
    stat[static_cast<std::size_t>(r)] = s / double(n);
  }
  std::sort(stat.begin(), stat.end());
  auto quantile = [&](double q) {
    const double pos = q * double(resamples - 1);
    const auto i = static_cast<std::size_t>(std::floor(pos));
    const std::size_t j = std::min(i + 1, stat.size() - 1);
    return stat[i] + (pos - double(i)) * (stat[j] - stat[i]);
  };
  ci.lo = quantile((1.0 - level) / 2.0);
  ci.hi = quantile((1.0 + level) / 2.0);
  return ci;
}

}  // namespace cf::probe
