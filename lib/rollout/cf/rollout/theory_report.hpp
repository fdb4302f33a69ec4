#pragma once
// Reports of the theory subcommands of `rollout` (docs/rollout.md): `verify` checks the
// finite-depth forces of Position bias (Herasimchyk et al.) (Props. 4.2-4.5) on a model's kernels and on random
// stochastically monotone stacks, plus the structured vs dense rollout entry by entry; `dichotomy`
// follows one row of the layer product to large depth in 50-digit arithmetic beside the bounds of
// Theorem 5.4. The app only parses options and builds the RolloutSource.
#include <random>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/rollout/last_row_backend.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/product_backend.hpp"
#include "cf/rollout/source.hpp"

namespace cf::rollout {

/// Largest violation that still counts as "ok" in verify (round-off of the n <= 512 dense products).
constexpr double kVerifyTolerance = 1e-12;

/// L dense n x n kernels, each a mixture of three ALiBi (geometric) heads with random slopes
/// 10^(-2 + 2.3 U) and weights U + 0.05 (U uniform in [0, 1) from `rng`): stochastically monotone,
/// since each head is and prefix masses average.
std::vector<RowMatrix> random_monotone_kernels(std::mt19937_64& rng, int L, long n);

/// Outcome of `rollout verify`: the report (one table of checks, body {checks, all_ok}; the tool
/// sets meta) and whether every check whose hypotheses hold stays within kVerifyTolerance.
struct VerifyOutcome {
  output::Report report;
  bool all_ok = true;
};

/// Props. 4.2-4.5 on the source's plain kernels (s.structured required: the ALiBi slopes are set to
/// 0 for Prop. 4.4 and a diagonal content delta = +-2 added for Prop. 4.5), Props. 4.2-4.3 on
/// `seeds` stacks of six random monotone kernels (seeded generator, 12345), and the structured path
/// against the dense path (relative, entry by entry; a nonzero where the dense path is 0 counts 1).
/// Throws cf::InvalidArgument when the source is not an ALiBi model. `products` runs the kernel
/// products and monotonicity sums on a device and `last_rows` the two rollout paths (issue 30;
/// null = the CPU).
VerifyOutcome verify_report(const RolloutSource& s, int seeds, const ProductBackend* products = nullptr,
                            const LastRowBackend* last_rows = nullptr);

/// Outcome of `rollout dichotomy`: the report (one table, body {rows}, one note; the tool sets
/// meta), the plot of masses and bounds against depth, and whether every bound held. The plot has
/// one panel per schedule and a log-magnitude y axis: -log10(mass), the decades below 1, on a log
/// scale, so 1e-30000 (a divergent sum of alpha) and 0.3 (a convergent one) are both visible.
struct DichotomyOutcome {
  output::Report report;
  plot::Panels plot;
  bool all_hold = true;
};

/// Row i = n - 1 of P(L) with kernel K (n x n) at every layer, for each alpha schedule in `specs`
/// and depths 10, 100, ... up to `depth` (the last one exactly `depth`, >= 1); eps as in
/// cf::rollout::dichotomy (0 = admissible_min(K)). `name` labels the kernel in titles.
DichotomyOutcome dichotomy_report(const RowMatrix& K, const std::vector<AlphaSpec>& specs, const std::string& name,
                                  long depth, double eps);

}  // namespace cf::rollout
