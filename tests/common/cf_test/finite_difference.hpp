#pragma once
// The finite-difference harness of the double-precision gradient tests (tests/nn, tests/hf): the
// reference derivative is a central difference of the same scalar loss, an independent computation;
// the error is relative to the largest analytic gradient entry.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace cf::test {

// Central differences with h = 1e-5 in double: truncation O(h^2) ~ 1e-10 and round-off
// ~ 1e-16 / h ~ 1e-11, so 1e-6 relative to the largest gradient leaves a wide margin.
constexpr double kStep = 1e-5;
constexpr double kRelTol = 1e-6;

/// max_i |(loss(x + h e_i) - loss(x - h e_i)) / 2h - analytic_i| / max_j |analytic_j| over the
/// indices `idx` (x is restored after each probe).
inline double fd_max_rel_error(std::vector<double>& x, const std::vector<double>& analytic,
                               const std::function<double()>& loss, const std::vector<std::size_t>& idx) {
  double gmax = 1e-12, err = 0;
  for (double g : analytic) gmax = std::max(gmax, std::abs(g));
  for (std::size_t i : idx) {
    const double x0 = x[i];
    x[i] = x0 + kStep;
    const double lp = loss();
    x[i] = x0 - kStep;
    const double lm = loss();
    x[i] = x0;
    err = std::max(err, std::abs((lp - lm) / (2 * kStep) - analytic[i]));
  }
  return err / gmax;
}

/// 0, 1, ..., n - 1.
inline std::vector<std::size_t> all_indices(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

/// n uniform values in [-scale, scale] from a seeded generator.
inline std::vector<double> random_vec(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

/// sum_i a_i b_i: loss = dot(out, r) for a fixed random r gives d loss / d out = r.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace cf::test
