#pragma once
// The spectral cascade over training (issue 10; Routing/filtering (Jamil & Kapadia) App. D: the cascade emerging during
// training): the weight-level analysis of each checkpoint of a series (e.g. the step_XXXXXX.h5
// kept by `train --keep-every`), reduced to per-step metrics for a plot against the step.
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/spectral/model.hpp"
#include "cf/spectral/report.hpp"

namespace cf::spectral {

/// One checkpoint of the series: path, training step, the model summary and the per-layer mean
/// effective routing rank (headline form) of the analysed layers.
struct SeriesPoint {
  std::string path;
  std::int64_t step = 0;
  ModelSummary summary;
  std::vector<int> layers;
  std::vector<double> layer_erank_R;
};

/// Weight-level analysis of every checkpoint (path, step) in order; `layer_spec` as
/// parse_layer_spec ("all", "0-3", ...); `eig` batches the eigenproblems on a device (analyse_weights;
/// null = the CPU path). Throws cf::InvalidArgument for unreadable checkpoints.
std::vector<SeriesPoint> spectral_series(const std::vector<std::pair<std::string, std::int64_t>>& checkpoints,
                                         const std::string& layer_spec, const AnalysisOptions& opt, ErankForm form,
                                         const SymEigenSolver* eig = nullptr);

/// Table (step, checkpoint, mean erank(R), median rho, routing heads, heads, per-layer erank(R)) and the
/// plot of mean erank(R) per layer against the step (one series per layer).
output::Table series_table(const std::vector<SeriesPoint>& s);
plot::LinePlot series_plot(const std::vector<SeriesPoint>& s, ErankForm form);

/// The report of a series (no meta: the tool sets it): series_table and body {"series": [{step,
/// checkpoint, erank_R_mean, rho_median, routing_heads, layers, layer_erank_R}, ...]}.
output::Report series_report(const std::vector<SeriesPoint>& s);

}  // namespace cf::spectral
