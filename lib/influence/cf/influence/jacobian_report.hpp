#pragma once
// The report of the `jacobian` tool (Runway (Lee & Clark) Theorem 3.3; docs/influence.md): one-layer constants
// C_1(l) with the zero check outside the mask, the span check C* <= max C_1 in both norms, Spearman
// and tightness of J against the bound, and the lower triangles of J, B, self and gate terms in the
// JSON body; heat maps of measured J and of the scaled bound. The app only parses options, picks
// the window and calls analyse_jacobian.
#include <string>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/influence/jacobian_analysis.hpp"
#include "cf/nn/config.hpp"

namespace cf::influence {

/// The report (two tables, three notes, body; the tool sets meta) and whether the analysis is
/// consistent: no nonzero block outside the mask, C* <= max C_1 in both norms, and no nonzero
/// Frobenius block where the bound is 0 (false means a bug in the Jacobians or the bound).
struct JacobianReport {
  output::Report report;
  bool consistent = true;
};

/// Build the report of `a` for a model with config `cfg` (a.layer + a.span <= cfg.n_layer);
/// window_start is the position of the window in the token stream (or the capture sequence index).
JacobianReport jacobian_report(const nn::ModelConfig& cfg, const JacobianAnalysis& a, long window_start);

/// Heat map of log10 m(d, s) over the causal lower triangle s <= d (NaN elsewhere and where
/// m(d, s) <= 0, drawn grey, distinct from the smallest values), axes "source position s" /
/// "target position d", colour bar "log10 <quantity>" (e.g. quantity "||J_ds||_F").
plot::Heatmap log10_lower_heatmap(const Eigen::MatrixXd& m, const std::string& title, const std::string& quantity);

}  // namespace cf::influence
