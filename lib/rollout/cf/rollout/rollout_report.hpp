#pragma once
// Reports and plots of `rollout` (default mode), `rollout sweep`, `rollout monotonicity` and
// `rollout jacobian` (docs/rollout.md): tables, CSV rows, JSON bodies and line plots built from a
// RolloutSource, so that the app only wires options (as theory_report.hpp does for `verify` and
// `dichotomy`, flow_report.hpp for `flow`). The tool sets each report's meta.
#include <Eigen/Dense>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/product_backend.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/sweep.hpp"
#include "cf/rollout/variants.hpp"

namespace cf::rollout {

/// Report of the default mode: the summary table of the variants (Spearman and W1/(n-1) columns
/// when `influence` has n entries), the JSON body {summary, variants}, and with `csv` the
/// per-position table "distributions".
output::Report rollout_report(const RolloutSource& s, const std::vector<VariantProfile>& vs,
                              const Eigen::VectorXd& influence, bool csv);

/// Line plot of the variants' profiles (and the influence when given) against the input position;
/// `log_y` as --plot-scale log. Linear plots range over (b), (c) and the influence, (a) clipped.
plot::LinePlot rollout_plot(const RolloutSource& s, const std::vector<VariantProfile>& vs,
                            const Eigen::VectorXd& influence, bool log_y);

/// The default mode's metadata parameters: the source's, and the path its variants took
/// ("structured O(L H n)", "dense" on ALiBi kernels with `dense_path`, "dense (<kernel source>)").
nlohmann::json rollout_params(const RolloutSource& s, bool dense_path);

/// A square matrix as a headerless CSV in full precision (docs/conventions.md "CSV"), written
/// atomically (--matrix, --flow-matrix).
void write_matrix_csv(const std::string& path, const RowMatrix& M);

/// --matrix: the full rollout matrix P(L) of variant (b) (n <= 2048, cf::InvalidArgument
/// otherwise) written by write_matrix_csv; returns the report's note saying so. `backend`: the
/// products on a device (issue 30; null = the CPU), as for the other functions below.
std::string write_rollout_matrix(const RolloutSource& s, const std::string& path,
                                 const ProductBackend* backend = nullptr);

/// The sweep's metadata parameters: the source's, with the lengths `ns` in place of n.
nlohmann::json sweep_params(const RolloutSource& s, const std::vector<long>& ns);

/// Report of `rollout sweep` over the lengths `ns` (rows from sweep_context).
output::Report sweep_report(const RolloutSource& s, const std::vector<SweepRow>& rows);

/// Report of `rollout monotonicity`: stochastic-monotonicity statistics of the source's kernels
/// (per layer where they differ; ALiBi with content as a second kernel family).
output::Report monotonicity_report(const RolloutSource& s, const ProductBackend* backend = nullptr);

/// Report and plot of `rollout jacobian`: the Runway (Lee & Clark) Theorem 3.3 bound of target
/// `d` (< n) over all sources, with the per-layer constant C.
struct JacobianOutcome {
  output::Report report;
  plot::LinePlot plot;
};
JacobianOutcome jacobian_report(const RolloutSource& s, double C, long d, const ProductBackend* backend = nullptr);

}  // namespace cf::rollout
