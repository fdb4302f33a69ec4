#pragma once
// Helpers shared by the probe report builders (internal to lib/probe).
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/data/task_file.hpp"
#include "cf/nn/model.hpp"
#include "cf/probe/evaluate.hpp"
#include "cf/probe/report.hpp"

namespace cf::probe::detail {
/// cf::model::load_model, its refusal prefixed with "--checkpoint 'PATH': cannot read the model" +
/// `what` (e.g. " and its mask schedule").
nn::Model<float> load_checkpoint_model(const std::string& path, const std::string& what = "");
/// Checkpoint `path` read by o.load (empty: load_probe_model), its refusal prefixed as load_probe_model's.
ProbeModel load_checkpoint(const ProbeOptions& o, const std::string& path);
/// A progress callback printing "PREFIX: done/total ROWS | elapsed s | ETA s" at most every 2 s,
/// only on a terminal (docs/conventions.md "Progress"); empty when `quiet` or not visible.
Progress row_progress(bool quiet, const std::string& prefix, const std::string& rows);
Progress make_progress(const ProbeOptions& o, const std::string& label);
void add_paired(output::Report& r, const std::string& title, const PairedResult& p, const ProbeOptions& o,
                const std::string& key);
/// The forward pass of each model: o.forward's, or the CPU's when it is empty.
std::vector<ProbsForward> model_forwards(const ProbeOptions& o, const std::vector<ProbeModel>& models);
void check_pair(const std::vector<ProbeModel>& models, const std::vector<std::string>& paths);
/// CSV `table` key of model m's table when two checkpoints are compared: `base`_A / `base`_B, the
/// names of the paired tables (the title's slug stops at the ':' before the checkpoint path).
inline std::string model_table_name(const std::string& base, std::size_t m) {
  return base + "_" + static_cast<char>('A' + m);
}
/// `base` with "_suffix" before the extension ("" stays "").
std::string plot_path(const std::string& base, const std::string& suffix);
}  // namespace cf::probe::detail
