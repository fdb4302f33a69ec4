#pragma once
// A `train` run from its command-line options (issue 4; docs/trainer.md): the options as given,
// the model and training configuration they describe, and the policy of --resume (the checkpoint
// fixes the model; training options not given come from it; its learning-rate schedule is
// continued unless --replan-schedule). apps/train binds the options and calls these in order.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "cf/nn/checkpoint.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/trainer.hpp"

namespace cf::nn {

/// The largest --steps (and every step-count option) a run accepts.
constexpr long long kMaxSteps = 100000000;

/// The options of one train run, with their command-line defaults (apps/train binds each to its
/// flag; the flag is named beside each group).
struct TrainRunOptions {
  std::string text, corpus, data, out_dir = "run", resume;  ///< --text --corpus --data --out-dir --resume
  double val_fraction = 0.1;
  // model (--n-layer ... --no-bias)
  int n_layer = 4, n_head = 4, d_model = 256, block_size = 256, vocab = 0;
  std::string pos = "learned", norm = "layernorm", attn = "full", fusion = "branch", d_head;
  int b = 64, w = 64, e = 32;
  double sd_eps = 0.1;
  bool no_bias = false;
  // training (--steps ... --seed)
  std::int64_t steps = 1000, stop_after = 0, warmup = 100, eval_interval = 100, ckpt_interval = 100;
  std::int64_t keep_every = 0;
  int batch = 8, seq_len = 256, accum = 1, eval_batches = 4, log_every = 10;
  double lr = 1e-3, min_lr = 1e-4, clip = 1.0, weight_decay = 0.1;
  std::uint64_t seed = 1337;
  bool overwrite = false;  ///< --overwrite: replace the run already in --out-dir
  bool replan = false;     ///< --replan-schedule: --resume with another --steps re-plans the cosine
};

/// Whether an option (by its flag, e.g. "--steps") was given on the command line (a default does
/// not count).
using OptionGiven = std::function<bool(const std::string& flag)>;

/// Whether any layer of `mc` has one of `kinds`.
bool any_layer(const ModelConfig& mc, std::initializer_list<AttnKind> kinds);

/// The model the options describe, with `data_vocab` when --vocab is 0 (not validated: a resumed
/// run takes the checkpoint's). Throws cf::InvalidArgument for a bad --attn or --d-head.
ModelConfig model_from_options(const TrainRunOptions& o, int data_vocab);

/// The training configuration the options describe.
TrainConfig train_config_from_options(const TrainRunOptions& o);

/// --resume: a model option given on the command line must agree with the checkpoint's model `ck`
/// (repeating the original command line is fine); a different value would be ignored, so it is
/// refused naming the option and both values.
void check_resume_model(const TrainRunOptions& o, const OptionGiven& given, const ModelConfig& ck);

/// --resume, after check_resume_model: training options not given come from the checkpoint's
/// train_config (each type- and range-checked, the field named); other data than the checkpoint's
/// is noted on stderr; a run that would end at or before the checkpoint's step is refused; and the
/// learning-rate schedule is continued, or re-planned with --replan-schedule (stated on stderr
/// unless `quiet`). `tc` holds the options' configuration and the data's source and checksum.
void continue_from_checkpoint(const TrainRunOptions& o, const OptionGiven& given, const Checkpoint& ck, TrainConfig& tc,
                              bool quiet);

/// The progress line of one step: "step S/MAX | loss L [| val V] | lr R | |g| G | N tok/s | ETA T".
std::string step_line(const StepInfo& s, std::int64_t max_steps);

}  // namespace cf::nn
