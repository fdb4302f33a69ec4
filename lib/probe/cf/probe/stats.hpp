#pragma once
// Exact tests and resampling intervals for probe results (docs/spec.md §5 "paired statistics", Boundary repair (Yang)
// §5): binomial tails in log space, the one-sided exact binomial test of an accuracy against the
// coverage bound (Prop. 3) with a Bonferroni correction, the exact two-sided McNemar test on the
// discordant pairs of two classifiers scored on the same items, and a paired percentile bootstrap
// interval for their accuracy difference.
#include <cstdint>
#include <vector>

namespace cf::probe {

/// P(X >= k) for X ~ Binomial(n, p); 0 <= k, 0 <= n, p in [0, 1]. Summed in log space with
/// lgamma, so n up to ~1e7 stays accurate to ~1e-12 relative. k > n gives 0, k <= 0 gives 1.
double binomial_upper_tail(std::int64_t k, std::int64_t n, double p);

/// P(X <= k) for X ~ Binomial(n, p). k < 0 gives 0, k >= n gives 1.
double binomial_lower_tail(std::int64_t k, std::int64_t n, double p);

/// One-sided exact binomial test of H0: accuracy <= bound against H1: accuracy > bound, with
/// `correct` successes out of `n` trials: p-value = P(X >= correct | n, bound).
/// Throws cf::InvalidArgument for n < 0, correct outside [0, n] or bound outside [0, 1].
double binomial_test_above(std::int64_t correct, std::int64_t n, double bound);

/// Exact (Clopper-Pearson) two-sided interval at `level` for a binomial proportion with `correct`
/// successes of `n` trials: lo solves P(X >= correct | p) = (1 - level)/2 (0 when correct = 0), hi
/// solves P(X <= correct | p) = (1 - level)/2 (1 when correct = n); by bisection on the exact tails.
/// The error bars of `probe boundary-copy --plot`. Throws cf::InvalidArgument for n < 1, correct
/// outside [0, n] or level outside (0, 1).
struct BinomialCi {
  double lo = 0, hi = 1;
};
BinomialCi binomial_ci(std::int64_t correct, std::int64_t n, double level);

/// Exact two-sided McNemar test. n01 = items the first classifier got right and the second wrong,
/// n10 = the reverse (only discordant pairs matter). Under H0 the smaller count is
/// Binomial(n01 + n10, 1/2); p = min(1, 2 * P(X <= min(n01, n10))). No discordant pair: p = 1.
struct McNemarResult {
  std::int64_t n01 = 0, n10 = 0;  ///< discordant counts (first right only, second right only)
  double p_value = 1.0;
  double log10_p = 0.0;  ///< log10 of p_value computed in log space (finite where p_value underflows to 0)
};
McNemarResult mcnemar_exact(std::int64_t n01, std::int64_t n10);

/// McNemar on per-item 0/1 outcomes of two classifiers (same length, same items in order);
/// n01 counts a[i] = 1, b[i] = 0. Throws cf::InvalidArgument for different lengths.
McNemarResult mcnemar_exact(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b);

/// Paired percentile bootstrap interval for mean(a) - mean(b) (accuracy difference): `resamples`
/// resamples of the item indices with replacement (std::mt19937_64 seeded with `seed`), the
/// difference of means on each, and the (1-level)/2 and (1+level)/2 empirical quantiles (linear
/// interpolation between order statistics). level in (0, 1), resamples >= 1, a and b non-empty
/// and of equal length (cf::InvalidArgument otherwise).
struct BootstrapCi {
  double estimate = 0;  ///< mean(a) - mean(b) on the items themselves
  double lo = 0, hi = 0;
  double level = 0.95;
  int resamples = 0;
  std::uint64_t seed = 0;
};
BootstrapCi paired_bootstrap_ci(const std::vector<double>& a, const std::vector<double>& b, int resamples, double level,
                                std::uint64_t seed);

}  // namespace cf::probe
