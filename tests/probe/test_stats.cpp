// Statistics of lib/probe against independent computations: binomial tails summed with exact
// rational arithmetic (boost::multiprecision cpp_rational), McNemar from those tails, and the
// nominal coverage of the paired bootstrap interval on seeded synthetic data.
#include <boost/multiprecision/cpp_int.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/core/error.hpp"
#include "cf/probe/stats.hpp"

using namespace cf::probe;
using boost::multiprecision::cpp_int;
using boost::multiprecision::cpp_rational;

namespace {
// P(X >= k), X ~ Bin(n, num/den), exactly.
double exact_upper(int k, int n, int num, int den) {
  cpp_rational p(num, den), q = 1 - p, s = 0;
  for (int i = std::max(0, k); i <= n; ++i) {
    cpp_int c = 1;
    for (int j = 0; j < i; ++j) c = c * (n - j) / (j + 1);
    cpp_rational term = c;
    for (int j = 0; j < i; ++j) term *= p;
    for (int j = 0; j < n - i; ++j) term *= q;
    s += term;
  }
  return static_cast<double>(s);
}
}  // namespace

TEST_CASE("binomial tails equal exact rational sums", "[probe][stats]") {
  for (int n : {0, 1, 5, 20, 57})
    for (auto [num, den] : {std::pair{1, 2}, {1, 4}, {3, 10}, {0, 1}, {1, 1}})
      for (int k = -1; k <= n + 1; ++k) {
        const double p = double(num) / den;
        const double up = exact_upper(k, n, num, den);
        const double lo = 1.0 - exact_upper(k + 1, n, num, den);
        INFO("n=" << n << " p=" << p << " k=" << k);
        CHECK(binomial_upper_tail(k, n, p) == Approx(up).margin(1e-13).epsilon(1e-10));
        CHECK(binomial_lower_tail(k, n, p) == Approx(lo).margin(1e-13).epsilon(1e-10));
      }
}

TEST_CASE("binomial tail in the far tail keeps relative accuracy", "[probe][stats]") {
  // P(X >= 90 | n = 100, 1/2) exactly vs the log-space sum
  const double e = exact_upper(90, 100, 1, 2);
  CHECK(binomial_upper_tail(90, 100, 0.5) == Approx(e).epsilon(1e-9));
  CHECK(e < 1e-15);
}

TEST_CASE("McNemar exact two-sided p = min(1, 2 x smaller tail)", "[probe][stats]") {
  for (auto [a, b] : {std::pair{0, 0}, {3, 0}, {0, 7}, {5, 5}, {12, 3}, {2, 19}, {30, 41}}) {
    const int n = a + b, k = std::min(a, b);
    const double expect = n == 0 ? 1.0 : std::min(1.0, 2.0 * (1.0 - exact_upper(k + 1, n, 1, 2)));
    const auto r = mcnemar_exact(a, b);
    INFO("n01=" << a << " n10=" << b);
    CHECK(r.n01 == a);
    CHECK(r.n10 == b);
    CHECK(r.p_value == Approx(expect).margin(1e-14).epsilon(1e-10));
  }
  // far tail: log10 p stays finite where p underflows (2 x 2^-1725 for 1725 vs 0 discordant pairs)
  const auto big = mcnemar_exact(1725, 0);
  CHECK(big.p_value == 0.0);
  CHECK(big.log10_p == Approx(std::log10(2.0) - 1725 * std::log10(2.0)).epsilon(1e-12));
  CHECK(mcnemar_exact(12, 3).log10_p == Approx(std::log10(mcnemar_exact(12, 3).p_value)).epsilon(1e-10));
  // per-item form counts the discordant pairs only
  std::vector<std::uint8_t> x{1, 1, 0, 0, 1, 0, 1}, y{1, 0, 1, 0, 0, 0, 1};
  const auto r = mcnemar_exact(x, y);
  CHECK(r.n01 == 2);
  CHECK(r.n10 == 1);
  CHECK(r.p_value == Approx(1.0));
  CHECK_THROWS_AS(mcnemar_exact(x, std::vector<std::uint8_t>{1}), cf::InvalidArgument);
}

TEST_CASE("one-sided binomial test of accuracy above a bound", "[probe][stats]") {
  CHECK(binomial_test_above(10, 40, 0.25) == Approx(exact_upper(10, 40, 1, 4)).epsilon(1e-10));
  CHECK(binomial_test_above(0, 40, 0.25) == 1.0);
  CHECK(binomial_test_above(40, 40, 1.0) == Approx(1.0));
  CHECK_THROWS_AS(binomial_test_above(41, 40, 0.25), cf::InvalidArgument);
  CHECK_THROWS_AS(binomial_test_above(1, 40, 1.5), cf::InvalidArgument);
}

TEST_CASE("paired bootstrap CI covers a known difference at the nominal rate", "[probe][stats]") {
  // Synthetic paired items: a ~ Bernoulli(0.7), b = a with prob 0.6 else Bernoulli(0.5) independently,
  // so the true difference is E[a] - E[b] = 0.7 - (0.6*0.7 + 0.4*0.5) = 0.08.
  const double truth = 0.7 - (0.6 * 0.7 + 0.4 * 0.5);
  std::mt19937_64 rng(20260);
  std::bernoulli_distribution A(0.7), same(0.6), B(0.5);
  const int trials = 400, n = 200;
  int covered = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = A(rng);
      b[i] = same(rng) ? a[i] : double(B(rng));
    }
    const auto ci = paired_bootstrap_ci(a, b, 500, 0.9, static_cast<std::uint64_t>(t) + 1);
    CHECK(ci.lo <= ci.estimate);
    CHECK(ci.estimate <= ci.hi);
    covered += ci.lo <= truth && truth <= ci.hi;
  }
  // nominal 0.90; binomial sd over 400 trials = 0.015; percentile intervals undercover slightly at n = 200
  const double rate = double(covered) / trials;
  INFO("coverage " << rate);
  CHECK(rate > 0.85);
  CHECK(rate < 0.95);
}

TEST_CASE("paired bootstrap is deterministic in its seed and checks its input", "[probe][stats]") {
  std::vector<double> a{1, 0, 1, 1, 0, 1}, b{0, 0, 1, 0, 0, 1};
  const auto x = paired_bootstrap_ci(a, b, 300, 0.95, 7), y = paired_bootstrap_ci(a, b, 300, 0.95, 7);
  CHECK(x.lo == y.lo);
  CHECK(x.hi == y.hi);
  CHECK(x.estimate == Approx(2.0 / 6));
  CHECK_THROWS_AS(paired_bootstrap_ci(a, {1.0}, 10, 0.9, 1), cf::InvalidArgument);
  CHECK_THROWS_AS(paired_bootstrap_ci(a, b, 0, 0.9, 1), cf::InvalidArgument);
  CHECK_THROWS_AS(paired_bootstrap_ci(a, b, 10, 1.0, 1), cf::InvalidArgument);
}

TEST_CASE("Clopper-Pearson binomial interval equals the beta quantiles (n = 10 to 1000, level 0.95)",
          "[probe][stats]") {
  // expected: scipy.stats.beta.ppf(0.025, k, n - k + 1) and beta.ppf(0.975, k + 1, n - k) (scipy 1.10),
  // the closed form of the exact interval; the code bisects the binomial tails instead
  struct Case {
    std::int64_t k, n;
    double lo, hi;
  };
  const Case cases[] = {{0, 10, 0.0, 0.3084971078187608},
                        {3, 10, 0.06673951117773447, 0.6524528500599973},
                        {10, 10, 0.6915028921812392, 1.0},
                        {17, 40, 0.27042903126886286, 0.5910994195730367},
                        {500, 1000, 0.46854917297179216, 0.5314508270282079},
                        {1, 200, 0.00012658102786701825, 0.02754189845720562}};
  for (const auto& c : cases) {
    const auto ci = binomial_ci(c.k, c.n, 0.95);
    INFO("k = " << c.k << ", n = " << c.n);
    CHECK(ci.lo == Approx(c.lo).margin(1e-12).epsilon(1e-9));
    CHECK(ci.hi == Approx(c.hi).margin(1e-12).epsilon(1e-9));
  }
  CHECK_THROWS_AS(binomial_ci(0, 0, 0.95), cf::InvalidArgument);
  CHECK_THROWS_AS(binomial_ci(3, 2, 0.95), cf::InvalidArgument);
  CHECK_THROWS_AS(binomial_ci(1, 2, 1.0), cf::InvalidArgument);
}
