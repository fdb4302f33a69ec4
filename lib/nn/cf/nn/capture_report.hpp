#pragma once
// The report of the `capture` tool (issue 4; docs/checkpoint_format.md "Capture files"): one row
// per layer with alpha_l in both docs/spec.md §2 forms (Position bias (Herasimchyk et al.) Eq. 1) and the mean
// attention entropy, the JSON body, notes (mean loss, the uniform-head entropy reference, the next command) and the
// plot of alpha_l by layer. The app only parses options, loads tokens and calls capture_model.
#include <cstddef>
#include <string>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/capture.hpp"

namespace cf::nn {

/// What a capture report describes besides the CaptureSummary.
struct CaptureReportInput {
  std::string out;               ///< capture file written
  int seq_len = 0;               ///< T, tokens per captured sequence (>= 1)
  int heads_stored = 0;          ///< H, heads kept in attn_probs / q / k
  std::string tokenizer;         ///< tokenizer name (or "ids from FILE")
  std::size_t input_tokens = 0;  ///< length of the token stream the windows were cut from
};

/// Report (table, body, notes; the tool sets meta) and the alpha_l plot (series token-mean and
/// Frobenius, x = layer).
struct CaptureReport {
  output::Report report;
  plot::LinePlot alpha_plot;
};

/// Build the capture report of a model with config `cfg` (s.layers.size() == cfg.n_layer). The
/// entropy note states the uniform causal head's mean_t log(t + 1) for t < seq_len as reference.
CaptureReport capture_report(const ModelConfig& cfg, const CaptureSummary& s, const CaptureReportInput& in);

}  // namespace cf::nn
