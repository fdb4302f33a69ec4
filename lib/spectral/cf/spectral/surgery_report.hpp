#pragma once
// The report of the `spectral-surgery` tool (Routing/filtering (Jamil & Kapadia) §5.1, §6, App. B; docs/spec.md §3;
// docs/spectral.md): validation tokens from a token set or a text file, then one concurrent batch of perplexities
// (baseline, the requested surgery, per-layer / cumulative sweep rows) rendered as the main table,
// the sweep tables, the JSON body and the linearisation-cost plot. The app only parses options
// into a SurgeryRequest.
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/model.hpp"
#include "cf/spectral/surgery_eval.hpp"

namespace cf::spectral {

/// Validation tokens of a surgery run: the val split of token files `data_prefix`
/// (PREFIX.meta.json + PREFIX.val.bin; their vocab_size must be <= vocab_size) when it is
/// non-empty, else every non-empty line of `text_path` tokenized with `tokenizer`
/// (auto | byte | gpt2; a Hugging Face `checkpoint` folder's own tokenizer.json when it has one:
/// tokenize_texts) and joined. Truncated to max_tokens (>= 2). `source` receives the file
/// read. Throws cf::InvalidArgument for unreadable input or fewer than 2 tokens.
std::vector<std::int32_t> load_validation_tokens(const std::string& data_prefix, const std::string& text_path,
                                                 const std::string& tokenizer, int vocab_size, long max_tokens,
                                                 std::string* source, const std::string& checkpoint = "");

/// Everything one surgery report is computed from (parsed and checked by the tool).
struct SurgeryRequest {
  Intervention surgery;                 ///< the requested intervention (rank < 0: no truncation)
  bool has_surgery = false;             ///< evaluate `surgery` (--rank, --linearize or --linear-attention given)
  std::vector<int> layers;              ///< layers of the sweeps (and of the surgery), in [0, n_layer)
  bool per_layer = false;               ///< per-layer sweep: one layer at a time
  bool cumulative = false;              ///< cumulative sweep: layers[0..i] together, front to back
  bool sweep_linear_attention = false;  ///< sweeps replace layers by ELU+1 linear attention (else linearize)
  PerplexitySettings ps;                ///< context and stride, both resolved (> 0)
  std::string layers_label;             ///< --layers as typed, for the row label
  std::string linear_attention_label;   ///< --linear-attention as typed, for the row label
};

/// The report (tables: main, then per-layer and cumulative sweeps; JSON body: baseline, surgery,
/// per_layer, cumulative; no meta) and the sweep plot (x = layer, y = cost in %; no series
/// without a sweep).
struct SurgeryOutcome {
  output::Report report;
  plot::LinePlot sweep_plot;
};

/// Evaluate every perplexity of the request in one batch (evaluate_interventions) and build the
/// report. Deltas and costs are (ppl - baseline) / baseline * 100.
SurgeryOutcome surgery_report(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                              const SurgeryRequest& req);
/// The same for a model held elsewhere, `config` its config: every perplexity on req.ps.evaluate
/// (required), e.g. a device model whose weights stay in their stored dtype (no float32 host model).
SurgeryOutcome surgery_report(const nn::ModelConfig& config, const std::vector<std::int32_t>& tokens,
                              const SurgeryRequest& req);

}  // namespace cf::spectral
