#pragma once
// Context-length sweeps of the rollout variants (issue 10, Position bias (Herasimchyk et al.) section 6.2): for each n
// the summary of every variant's last-row distribution (p_0, p_(n-1), primacy and recency mass, argmin, min), computed
// on the structured O(L H n) path.
#include <string>
#include <vector>

#include "cf/core/plot.hpp"
#include "cf/rollout/last_row_backend.hpp"
#include "cf/rollout/rollout.hpp"
#include "cf/rollout/source.hpp"

namespace cf::rollout {

/// Parse a list of sequence lengths: "64,128,256" or with an ellipsis "64,128,...,65536"
/// (a,b,...,c continues the progression of a, b: geometric when b/a is an integer >= 2, else
/// arithmetic with step b - a; c must lie on it). Values in [1, 2^26], strictly increasing, at
/// most 4096 entries. Throws cf::InvalidArgument naming `option`.
std::vector<long> parse_n_list(const std::string& spec, const std::string& option = "--n");

/// One (variant, n) row of a sweep.
struct SweepRow {
  std::string key, label;  ///< variant (as VariantProfile)
  long n = 0;
  DistributionSummary summary;
  double seconds = 0;
};

/// Sweep the variants of a structured source over ns (each >= 1). Rows ordered by variant, then n.
/// Throws cf::InvalidArgument for a dense (kernel file / capture) source: its kernels fix n.
std::vector<SweepRow> sweep_context(const RolloutSource& s, const std::vector<long>& ns,
                                    const LastRowBackend* backend = nullptr);

/// The plot of `rollout sweep`: p_0, primacy and recency mass of every variant against log2 n on a
/// log axis from 1e-12 x the largest mass (the curves that fall below are named as clipped), the
/// variant as the colour ((a) blue, (b) red, (c) green, as in the rollout plot) and the quantity as
/// the line style; `name` (the model) in the title. Rows with a mass <= 0 are left out (log axis).
plot::LinePlot sweep_plot(const std::vector<SweepRow>& rows, const std::string& name);

}  // namespace cf::rollout
