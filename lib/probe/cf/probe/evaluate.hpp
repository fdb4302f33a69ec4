#pragma once
// Evaluation of trained checkpoints on task files (issue 11): batched forward passes without a
// backward pass, reading the next-token distribution at the scored positions only.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cf/data/task_file.hpp"
#include "cf/nn/model.hpp"
#include "cf/probe/boundary_copy.hpp"

namespace cf::probe {

/// Called after each batch with (rows done, rows total); may be empty.
using Progress = std::function<void(std::int64_t done, std::int64_t total)>;

/// Next-token probabilities of a batch: B sequences of T tokens (tokens[b*T + t]) -> pointer to
/// B*T rows of vocab_size probabilities (row b*T + t = distribution of token t+1), valid until the
/// next use of `ws`. Exactly the cost of a forward pass with no target (nn::forward_backward);
/// tested against softmax(nn::forward_logits).
const float* forward_probs(const nn::Model<float>& model, const std::int32_t* tokens, int B, int T,
                           nn::Workspace<float>& ws);

/// A model's forward pass as forward_probs returns it: B sequences of T tokens -> B*T rows of
/// vocab_size next-token probabilities, valid until the next call. The CPU's (cpu_probs_forward) or
/// a device model's (apps/probe, docs/gpu.md "Analysis model"); the evaluations read only this.
using ProbsForward = std::function<const float*(const std::int32_t* tokens, int B, int T)>;

/// forward_probs of `model` on a workspace of its own (`model` must outlive the function).
ProbsForward cpu_probs_forward(const nn::Model<float>& model);

/// Logits [B T, V] of B sequences of T tokens written to `logits` (a device model's forward pass).
using LogitsForward = std::function<void(const std::int32_t* tokens, int B, int T, std::vector<float>& logits)>;

/// The ProbsForward of a model whose logits `forward` computes: each row through the CPU forward
/// pass's own softmax (nn::crossentropy_forward), so only the logits differ from forward_probs.
ProbsForward probs_from_logits(LogitsForward forward, int vocab_size);

/// A checkpoint as the probe reads it: its config, and the float32 host model when one was loaded
/// (the CPU's forward pass reads it; a device model of a Hugging Face directory kept in its stored
/// dtype needs none: docs/gpu.md "Weights in their stored dtype").
struct ProbeModel {
  std::string path;
  nn::ModelConfig config;
  std::shared_ptr<const nn::Model<float>> host;  ///< null: config only
};

/// Reads checkpoint `path` for the probe; empty = load_probe_model (the float32 host model).
using LoadModel = std::function<ProbeModel(const std::string& path)>;

/// `path`'s float32 host model (cf::model::load_model) and its config; a refusal is prefixed with
/// "--checkpoint 'PATH': cannot read the model and its mask schedule: ".
ProbeModel load_probe_model(const std::string& path);

/// Builds the forward pass of each loaded checkpoint; empty = the CPU's (cpu_probs_forward of its host model).
using MakeForward = std::function<ProbsForward(const ProbeModel& model)>;

/// Check that a model can read a task: seq_len <= block_size ("context above the model's") and
/// every task token < the model's vocab_size. Throws cf::InvalidArgument naming both values.
void check_model_fits(const nn::ModelConfig& c, int seq_len, int task_vocab, const std::string& what);

/// Score every readout of the split (rows of s.seq_len + 1 tokens; readouts = mask bytes, the
/// readout of mask[p+1] is p): top-1 over the K alphabet tokens and the cross-entropy of the label
/// with the probabilities renormalised over the K tokens (a valid K-way predictor, so Prop. 3's
/// bound applies to it). `covered` from the all-layer closure of the model's schedule on seq_len
/// positions. `max_rows` > 0 limits the rows read. `forward`: the model's forward pass (empty = the
/// CPU's, cpu_probs_forward).
std::vector<Readout> evaluate_boundary_copy(const nn::Model<float>& model, const BoundaryCopySpec& s,
                                            const data::TaskSplit& split, int batch, int max_rows,
                                            const Progress& progress = {}, const ProbsForward& forward = {});
/// The same on the forward pass `forward` (required) of a model with config `c`.
std::vector<Readout> evaluate_boundary_copy(const nn::ModelConfig& c, const ProbsForward& forward,
                                            const BoundaryCopySpec& s, const data::TaskSplit& split, int batch,
                                            int max_rows, const Progress& progress = {});

/// Per-phase accuracy, cross-entropy, covered fraction pi, bound pi + (1-pi)/K, (1-pi) log K, and
/// the one-sided exact binomial p-value of "accuracy > bound"; `significant` uses the Bonferroni
/// level alpha / m (m = phases with at least one readout). Phases without readouts are omitted.
std::vector<PhaseResult> summarise_phases(const std::vector<Readout>& readouts, int K, int b, double alpha);

}  // namespace cf::probe
