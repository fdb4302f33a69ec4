#pragma once
// The training loop behind the `train` tool: deterministic batches, AdamW with warm-up + cosine
// and clipping, gradient accumulation, periodic validation, atomic checkpoints (last + best),
// exact resume, NaN/Inf stop and a cooperative stop flag (SIGINT in the app). Everything a run
// depends on is a function of (seed, step), so --resume reproduces an uninterrupted run bit for bit
// at a given thread count.
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/nn/checkpoint.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/optim.hpp"

namespace cf::nn {

/// Token streams for training: train and validation ids (< vocab_size), the data source and the
/// unigram entropy of the training split (nats, the bar a model must beat).
struct TrainData {
  std::vector<std::int32_t> train, val;
  int vocab_size = 256;
  std::string source;
  double unigram_entropy = 0;
  /// Aligned task data (cf/data/task_file.hpp): > 0 = each split is rows of row_len tokens, a
  /// batch takes whole rows (input = row[0..T-1], target = row[1..T] with T = row_len - 1) and
  /// only targets whose mask byte is 1 are scored. 0 = one token stream sampled at random offsets.
  int row_len = 0;
  std::vector<std::uint8_t> train_mask, val_mask;  ///< per token, aligned data only
};

/// Byte-level data from a text file: ids = bytes, the last val_fraction of the bytes is the
/// validation split. Throws cf::InvalidArgument for a missing or empty file or a split too short.
TrainData load_text_bytes(const std::string& path, double val_fraction);

/// Byte-level data from a text already in memory (`source` names it in messages).
TrainData bytes_from_text(const std::string& text, const std::string& source, double val_fraction);

/// Byte-level data from a packaged corpus ("brown", "kjv"; cf/data/corpus.hpp) or a text file path.
TrainData load_corpus_bytes(const std::string& spec, double val_fraction);

/// Data prepared by `prepare-data` (<prefix>.train.bin, .val.bin, .meta.json; cf/data/token_file.hpp).
/// A task file (`prepare-data --task`, cf/data/task_file.hpp) loads as aligned rows with masks.
TrainData load_token_files(const std::string& prefix);

/// Training-run settings. Paths: out_dir receives last.h5, best.h5, log.csv (and the plot).
struct TrainConfig {
  std::string out_dir = "run";
  std::int64_t max_steps = 1000;  ///< total optimizer updates of the run (defines the schedule)
  std::int64_t stop_after = 0;    ///< > 0: stop (and checkpoint) after this many updates in total
  int batch = 8;                  ///< sequences per micro-batch
  int seq_len = 256;              ///< T <= block_size
  int grad_accum = 1;             ///< micro-batches per update
  double lr = 1e-3, min_lr = 1e-4;
  std::int64_t warmup = 100;
  double grad_clip = 1.0;  ///< <= 0: off
  AdamWConfig adamw;
  std::int64_t eval_interval = 100;  ///< validate every this many updates (and at the end)
  int eval_batches = 4;              ///< micro-batches of validation
  std::int64_t ckpt_interval = 100;  ///< write last.h5 every this many updates (and at the end)
  std::int64_t keep_every = 0;       ///< > 0: also keep step_XXXXXX.h5 every this many updates (issue 10)
  std::uint64_t seed = 1337;
  /// What the run trains on, stored with the options (train_config) so that a --resume can tell
  /// whether it reads the same data: TrainData::source and data_checksum (empty: not recorded).
  std::string data_source, data_checksum;
  /// The number format of the updates' GEMMs, recorded for --resume and reports: "fp32" (this
  /// library's CPU trainer), or the device trainer's policy (`train --precision`, cf/gpu/precision.hpp).
  std::string precision = "fp32";
  nlohmann::json to_json() const;
};

/// FNV-1a 64 (data::Fnv1a64, 16 hex digits) over the split sizes, the train split, the validation
/// split and, for aligned task data, the row length and the masks: equal for the same tokens split
/// the same way.
std::string data_checksum(const TrainData& data);

/// What the loop reports after every update (for progress lines and the CSV log).
struct StepInfo {
  std::int64_t step = 0;  ///< updates done
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, eta_s = 0;
  double val_loss = std::nan("");  ///< NaN unless validated at this step
};

/// How a run ended.
struct TrainResult {
  std::int64_t steps_done = 0;
  double last_loss = 0, best_val_loss = std::nan(""), final_val_loss = std::nan("");
  bool interrupted = false;  ///< stopped by the stop flag (checkpoint written)
  std::vector<StepInfo> history;
};

/// Where the updates of a run are computed when not by the CPU code of this library: the device
/// trainer of lib/gpu behind `train --device cuda` (cf/gpu/train_step.hpp, docs/gpu.md "Device
/// trainer"). The loop keeps batch sampling, the schedule, the NaN/Inf checks, the validation
/// windows (their losses from the backend), checkpoints and logs; between load() and store() it owns the
/// parameters and the AdamW moments (the model does not change: same layout, same checkpoints).
class UpdateBackend {
 public:
  virtual ~UpdateBackend() = default;
  /// Take the parameters and optimizer state (m, v empty = zeros) for micro-batches of B x T
  /// sequences; throws cf::InvalidArgument naming a config feature the backend cannot train.
  virtual void load(const Model<float>& model, const AdamWState& st, int B, int T) = 0;
  /// Zero the gradient.
  virtual void zero_grad() = 0;
  /// Forward and backward of one micro-batch (x, y [B T], as forward_backward): the gradient of
  /// its mean loss is added to the gradient; returns that loss.
  virtual double micro_batch(const std::int32_t* x, const std::int32_t* y) = 0;
  /// Mean loss of one micro-batch, forward only (validation; same inputs as micro_batch).
  virtual double loss(const std::int32_t* x, const std::int32_t* y) = 0;
  /// Divide the gradient by grad_accum (when > 1), clip it as clip_grad_norm; returns the norm
  /// before clipping.
  virtual double clip(int grad_accum, double max_norm) = 0;
  /// One AdamW update as adamw_step, as its update number t (1-based; bias corrections).
  virtual void apply(double lr, const AdamWConfig& cfg, std::int64_t t) = 0;
  /// Whether parameters and moments are all finite.
  virtual bool finite() = 0;
  /// Copy parameters and moments back into host arrays (resized to the layout; st.t untouched).
  virtual void store(std::vector<float>& params, AdamWState& st) = 0;
};

/// The checks train() makes on its inputs before any work, for `model` (the model trained: the
/// fresh config, or a resumed checkpoint's): counts and intervals >= 1, a valid CF_GEMM, seq_len in
/// [1, block_size] and within aligned task rows, the data's vocabulary within the model's, and
/// splits longer than seq_len + 1. Throws cf::InvalidArgument naming the violated bound. A tool
/// calls it before printing anything about the run (train: its header line); train() calls it too.
void check_train_inputs(const ModelConfig& model, const TrainConfig& cfg, const TrainData& data);

/// Run (or, with resume_from non-empty, continue) training. A fresh run initialises the model
/// from `model_config` with cfg.seed; a resumed run takes model, optimizer and step from the
/// checkpoint (model_config ignored). Non-finite loss or gradient norm throws cf::Error naming
/// the step, leaving the last good checkpoint in place. `stop` (may be null) is polled after each
/// update: when set, last.h5 is written and the run returns with interrupted = true. `backend`
/// (may be null: the CPU) computes the updates (UpdateBackend).
TrainResult train(const ModelConfig& model_config, const TrainConfig& cfg, const TrainData& data,
                  const std::string& resume_from, const std::function<void(const StepInfo&)>& on_step,
                  const std::atomic<bool>* stop, UpdateBackend* backend = nullptr);

/// Continue training from a checkpoint already read (with its optimizer state: load_checkpoint's
/// default), as train() with resume_from naming its file; a tool that reads the checkpoint to
/// check the command line passes it here, so the file is read once.
TrainResult train(Checkpoint resumed, const TrainConfig& cfg, const TrainData& data,
                  const std::function<void(const StepInfo&)>& on_step, const std::atomic<bool>* stop,
                  UpdateBackend* backend = nullptr);

/// Path of the checkpoint kept at `step` by TrainConfig::keep_every: out_dir/step_XXXXXX.h5 (six
/// digits, zero-padded; more digits past 999,999).
std::string kept_path(const std::string& out_dir, std::int64_t step);

/// Mean validation loss over cfg.eval_batches fixed windows of the validation split.
double validation_loss(const Model<float>& model, const TrainConfig& cfg, const TrainData& data);

}  // namespace cf::nn
