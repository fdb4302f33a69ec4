#pragma once
// The `mc-eval` tool's work (issue 33, docs/mc-eval.md): zero-shot multiple-choice scoring of one or two
// checkpoints on a JSONL file (cf/probe/multiple_choice.hpp), accuracies with percentile bootstrap
// intervals, and for two checkpoints the paired exact McNemar test and bootstrap interval of the
// difference on the same items (cf/probe/stats.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/probe/multiple_choice.hpp"
#include "cf/probe/stats.hpp"

namespace cf::probe {

/// Options of `eval`.
struct EvalOptions {
  std::string data;                      ///< JSONL file of items
  std::vector<std::string> checkpoints;  ///< one or two (HDF5 checkpoint or Hugging Face folder)
  std::string layout = "auto";           ///< auto | generic | arc | hellaswag | piqa | csqa
  std::string templ = "harness";         ///< harness | verbatim (the item's `context` field)
  std::string truncate = "left";         ///< left | refuse: a context + choice above block_size
  std::string gpt2_dir;                  ///< GPT-2 vocabulary files ("" = default)
  int batch = 16;                        ///< (item, choice) rows per forward pass
  int max_items = 0;                     ///< 0 = every item
  int resamples = 2000;                  ///< bootstrap resamples
  double level = 0.95;                   ///< bootstrap interval level
  std::uint64_t boot_seed = 1;
  std::string plot;    ///< "" | FILE.svg | FILE.png: accuracies with their intervals
  bool quiet = false;  ///< no progress lines
  /// Where each checkpoint's forward passes run: empty = the CPU; apps/mc-eval sets the device
  /// analysis model's for --device cuda|auto (docs/gpu.md "Analysis model").
  MakeLogprobForward forward;
};

/// Percentile bootstrap interval of mean(a) (an accuracy): the paired bootstrap of a against
/// all-zero outcomes, which resamples a alone (same draws, same quantile rule).
BootstrapCi mean_bootstrap_ci(const std::vector<double>& a, int resamples, double level, std::uint64_t seed);

/// Run the evaluation and return the report. Throws cf::InvalidArgument for bad input (a bad line
/// of --data, an unreadable checkpoint, a context above the block size with --truncate refuse).
output::Report run_eval(const EvalOptions& o);

}  // namespace cf::probe
