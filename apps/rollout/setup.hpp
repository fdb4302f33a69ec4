#pragma once
// rollout's set-up (apps/rollout/setup.cpp), shared by the run functions of main.cpp: the option
// checks that need no model, the in-process capture of a checkpoint before
// cf::rollout::make_source, the agreement table of --model CHECKPOINT --influence, and the limits
// of the flow and dichotomy modes.
#include <Eigen/Dense>
#include <optional>
#include <string>
#include <vector>

#include "cf/model/temporary_capture.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/source.hpp"
#include "options.hpp"

namespace cf::rollout_app {

/// What every subcommand starts from: the kernels' source and, for a checkpoint, its capture
/// (a temporary file, removed with the Setup).
struct Setup {
  std::optional<cf::model::TemporaryCapture> capture;
  rollout::RolloutSource s;
};

/// Check the options that need no model, capture a checkpoint in process, then make the source
/// (n = `default_n` when --n is not given).
void setup(Setup& st, const Options& o, long default_n);

/// Refuse --plot for a mode that draws none (exit 2).
void refuse_plot(const Options& o, const std::string& mode);

/// --model CHECKPOINT with --influence: the comparison on the model's own windows (issue 10).
bool checkpoint_with_influence(const Options& o);

/// Refuse the options of that comparison given without it.
void refuse_checkpoint_options(const Options& o);

/// `--model CHECKPOINT --influence auto|FILE`: the Tables 2-5 comparison on the model's own
/// windows (cf/influence/checkpoint_agreement.hpp; docs/influence.md), emitted and plotted.
void run_influence_agreement(const Options& o, bool with_flow = false);

/// --influence FILE|LIST read (a number list, or influence --out CSV/JSON) with n entries; empty
/// without --influence.
Eigen::VectorXd influence_profile(const Options& o, long n);

/// `rollout flow`'s limits on a source: n <= 2048, the edges over all sources, --target and
/// --flow-matrix (exit 2 with the limit).
void check_flow_limits(const Options& o, const rollout::RolloutSource& s);

/// The dichotomy's two schedules (--schedule, --schedule2): const or power only.
std::vector<rollout::AlphaSpec> dichotomy_schedules(const Options& o);

}  // namespace cf::rollout_app
