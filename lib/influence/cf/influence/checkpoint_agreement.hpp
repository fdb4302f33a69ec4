#pragma once
// `rollout --model CHECKPOINT --influence auto|FILE` (and `rollout flow` with the same options):
// the Position bias (Herasimchyk et al.) Tables 2-5 comparison on the model's own windows, from the
// checkpoint's path to the report and plot (cf/influence/agreement_table.hpp; docs/influence.md).
#include <functional>
#include <string>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/gradient_seed.hpp"
#include "cf/nn/model.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/last_row_backend.hpp"

namespace cf::influence {

/// What the comparison reads of the command line (rollout's options of the same names).
struct CheckpointAgreementOptions {
  std::string checkpoint;                 ///< --model: causalflow HDF5 or Hugging Face directory
  long n = 0;                             ///< --n (0: min(256, block_size))
  std::string text = "kjv";               ///< --capture-text
  int windows = 64;                       ///< --influence-windows
  std::string influence = "auto";         ///< --influence: auto (measured in process) or a profile file
  std::string target = "probability";     ///< --influence-target (auto)
  std::string kernel_source = "auto";     ///< --kernel-source: auto | alibi | measured
  std::string alpha_kind = "token-mean";  ///< --alpha-kind: token-mean | frobenius
  bool with_flow = false;                 ///< `rollout flow`: the flow column too
  std::string flow_algorithm = "layered";
  // Device work (issue 30; docs/gpu.md "Analysers on the device"), chosen by the tool, which knows
  // lib/gpu: unset = the CPU.
  const rollout::LastRowBackend* rollouts = nullptr;  ///< the variants' last rows
  /// influence auto: the seeded passes of the measurement, made once the model is loaded, for
  /// batches of at most max_B windows of max_T tokens; an empty pass = cf::nn::forward_backward.
  std::function<nn::SeededPass<float>(const nn::Model<float>& model, int max_B, int max_T)> seeded_pass;
  std::string device = "cpu";  ///< where rollouts and seeded_pass's passes run (the report's meta)
};

struct CheckpointAgreement {
  output::Report report;  ///< meta included (tool "rollout" or "rollout flow")
  plot::LinePlot plot;
};

/// Load the checkpoint, cut its windows of `text`, measure the model (and the influence, with
/// influence auto), and compare the rollout variants with the influence. Throws
/// cf::InvalidArgument for n above the block size, a profile of another length or a kernel source
/// the model does not fit (before the long work).
CheckpointAgreement checkpoint_agreement(const CheckpointAgreementOptions& o);

}  // namespace cf::influence
