#pragma once
// Report and plot of `rollout flow` (docs/rollout.md, "Attention flow"): the attention-flow
// profile (cf/rollout/flow.hpp) beside the rollout variants (a), (b), (c) of Position bias
// (Herasimchyk et al.), and with a measured influence profile its Spearman and W1/(n-1) in that
// paper's Tables 2-5 layout. Built here so the app only wires options.
#include <Eigen/Dense>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/variants.hpp"

namespace cf::rollout {

/// The flow profile as a variant: key "flow", label "(f) attention flow", p = fr.profile.
VariantProfile flow_variant(const FlowResult& fr);

/// Report of `rollout flow` (the tool sets meta). `vs`: the rollout variants at the same n (shown
/// only when the flow target is n - 1, the position they describe); `influence`: empty or n
/// entries summing to 1 (adds Spearman and W1/(n-1) columns and the two Tables 2-5 layout tables);
/// `csv`: add the per-position table (position, rollout variants, flow, flow_profile, cut).
/// Tables: "summary" (one row per variant, flow last), "flow" (raw values: sum, max, flow of
/// position 0 and of the target, certificate gap, graph size, seconds). JSON body: summary,
/// variants (profiles, "flow" included), flow {raw, profile, cut, target, algorithm, ...}.
output::Report flow_report(const RolloutSource& s, const std::vector<VariantProfile>& vs, const FlowResult& fr,
                           FlowAlgorithm algorithm, const Eigen::VectorXd& influence, bool csv);

/// `rollout flow`'s metadata parameters: the source's, the solver, the target and the kernels.
nlohmann::json flow_params(const RolloutSource& s, const FlowResult& fr, FlowAlgorithm algorithm);

/// Line plot of the profiles (rollout variants, flow profile, influence when given) against the
/// input position; `log_y` as rollout's --plot-scale log. Linear plots range over (b), (c), the
/// flow profile and the influence ((a) clipped, as rollout's own plot).
plot::LinePlot flow_plot(const RolloutSource& s, const std::vector<VariantProfile>& vs, const FlowResult& fr,
                         const Eigen::VectorXd& influence, bool log_y);

}  // namespace cf::rollout
