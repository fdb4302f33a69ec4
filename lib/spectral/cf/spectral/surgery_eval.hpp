#pragma once
// Spectral surgery at run time (Routing/filtering (Jamil & Kapadia) §5.1, §6, App. B; docs/spec.md §3): validation
// perplexity (overlapping-stride) with each selected layer's interaction M replaced by its truncation / linearisation
// through the trainer's score hook, or the layer replaced by ELU+1 linear attention; per-layer and cumulative
// front-to-back linearisation sweeps.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cf/nn/model.hpp"
#include "cf/spectral/surgery.hpp"

namespace cf::spectral {

/// One intervention on a model.
struct Intervention {
  SurgerySpec spec;         ///< truncation of the selected layers (rank < 0: none)
  std::vector<int> layers;  ///< layers the truncation / linearisation applies to
  bool linearize = false;   ///< linearize those layers instead (top routing pair + scalar filtering)
  ScalarFiltering scalar = ScalarFiltering::TraceOverN;
  std::vector<int> linear_attention;  ///< layers replaced by ELU+1 linear attention
};

/// One perplexity evaluation (tokens, context, stride, the intervention's hooks), as
/// nn::evaluate_perplexity computes it for the model at hand.
using PerplexityFn = std::function<nn::PerplexityResult(const std::vector<std::int32_t>& tokens, int context,
                                                        int stride, const nn::ForwardHooks* hooks)>;

/// Perplexity settings: windows of `context` tokens every `stride` tokens (nn::evaluate_perplexity).
/// `evaluate` (empty: nn::evaluate_perplexity on the CPU, concurrently over interventions) runs
/// the evaluations elsewhere, one intervention at a time (a device model, lib/gpu).
struct PerplexitySettings {
  int context = 0;  ///< 0 = block_size
  int stride = 0;   ///< 0 = context / 2 (at least 1)
  PerplexityFn evaluate;
};

/// Build the forward hooks of an intervention for a model with config c. The score hook leaves M
/// untouched (bit for bit) when the truncation is the identity in exact arithmetic (rank < 0,
/// rank >= T, or rank >= 2 d_head for every truncated part whose rank is bounded by 2 d_head:
/// R always, F except in S–D layers where F = -D) and the layer is not linearised, so
/// "full-rank surgery" reproduces the baseline perplexity exactly. Layer indices must lie in
/// [0, n_layer).
nn::ForwardHooks make_hooks(const Intervention& iv, const nn::ModelConfig& c);

/// Perplexity of `model` on `tokens` under `iv` (an empty intervention = the baseline).
nn::PerplexityResult evaluate_intervention(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                           const Intervention& iv, const PerplexitySettings& ps);

/// Perplexities of several interventions on the same tokens: result[i] belongs to ivs[i]. The
/// evaluations run concurrently, OpenMP over the interventions (dynamic schedule); each is one serial
/// nn::evaluate_perplexity, whose own parallel regions are nested and run on one thread. Fine-grained OpenMP regions
/// per (layer, head) and window are what made sweeps slow on a loaded 2-core machine (threads spin-waiting for cores);
/// coarse tasks do not suffer from it. Every entry runs the same code path, so an identity intervention equals the
/// baseline entry bit for bit. An exception inside a task is rethrown (the first by index) afterwards.
std::vector<nn::PerplexityResult> evaluate_interventions(const nn::Model<float>& model,
                                                         const std::vector<std::int32_t>& tokens,
                                                         const std::vector<Intervention>& ivs,
                                                         const PerplexitySettings& ps);

/// The same for a model held elsewhere, `c` its config: every evaluation on ps.evaluate (required;
/// cf::InvalidArgument without it), one intervention at a time. A device model of a Hugging Face
/// directory kept in its stored dtype needs no float32 host model (docs/gpu.md "Weights in their
/// stored dtype").
std::vector<nn::PerplexityResult> evaluate_interventions(const nn::ModelConfig& c,
                                                         const std::vector<std::int32_t>& tokens,
                                                         const std::vector<Intervention>& ivs,
                                                         const PerplexitySettings& ps);

/// The interventions of a sweep over `layers`: per-layer (only layer l) or cumulative (layers[0..i]
/// together, front to back); each linearises its layers or, if linear_attention, replaces them by
/// ELU+1 linear attention.
std::vector<Intervention> sweep_interventions(const std::vector<int>& layers, bool linear_attention, bool cumulative);

/// Check a requested rank against the model: 0 <= k <= min(context, 2 d_head(l)) for every
/// selected layer (docs/spec.md §3: rank F, rank R <= 2 d_k; S–D filtering alone: k <= context), and k
/// even whenever the routing part is truncated (Routing, Both; k >= context is full rank and
/// allowed): singular values of a skew matrix come in pairs. Throws cf::InvalidArgument ("rank k
/// larger than possible" / "is odd") naming k, the layer and the bound.
void validate_rank(const nn::ModelConfig& c, const std::vector<int>& layers, Component component, int rank,
                   int context);

/// One row of a sweep.
struct SweepRow {
  int layer = 0;
  double ppl = 0, cost_pct = 0;  ///< cost = (ppl - baseline) / baseline * 100
};

/// Sweep rows from the perplexities of sweep_interventions(layers, ...) (same order).
std::vector<SweepRow> sweep_rows(const std::vector<int>& layers, const std::vector<nn::PerplexityResult>& results,
                                 double baseline_ppl);

/// Per-layer sweep: for each layer l of `layers`, only l is linearised (or, if linear_attention,
/// replaced by ELU+1 linear attention); cumulative sweep: layers[0..i] together, front to back.
/// The rows are evaluated concurrently (evaluate_interventions).
std::vector<SweepRow> sweep_per_layer(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                      const std::vector<int>& layers, bool linear_attention, double baseline_ppl,
                                      const PerplexitySettings& ps);
std::vector<SweepRow> sweep_cumulative(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                       const std::vector<int>& layers, bool linear_attention, double baseline_ppl,
                                       const PerplexitySettings& ps);

}  // namespace cf::spectral
