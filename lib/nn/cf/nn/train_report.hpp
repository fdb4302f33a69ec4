#pragma once
// The report and loss plot of the `train` tool (issue 4; docs/trainer.md): the summary table
// (steps, parameters, last train loss, best validation loss, unigram entropy, mean tokens/s), the
// JSON body with both configurations, and the loss curve against the unigram-entropy bar.
#include <cstdint>
#include <string>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/trainer.hpp"

namespace cf::nn {

/// The report of one training run (meta included: tool "train", the train config, the model
/// config used, the data source and `resume_from`). Checkpoint paths are named in tc.out_dir;
/// mean tokens/s is the mean over r.history (0 when empty).
output::Report train_report(const ModelConfig& used, const TrainConfig& tc, const TrainData& data, const TrainResult& r,
                            std::int64_t nparams, const std::string& resume_from);

/// Loss plot: series "train" (loss per recorded step), "validation" (finite validation losses)
/// and "unigram entropy" (a flat line over the recorded steps; empty without history).
plot::LinePlot loss_plot(const TrainResult& r, double unigram_entropy);

}  // namespace cf::nn
