#pragma once
// Capture files (docs/checkpoint_format.md "Capture files"): per layer and head the attention
// probabilities, Q and K, and the per-token norms of the residual stream entering the attention
// block and of the attention output, plus the residual mixing coefficients alpha_l of docs/spec.md §2
// (Position bias (Herasimchyk et al.) Eq. 1) in both forms. Written by `capture`, read by `rollout` / `spectral`.
// The writer streams one (layer, sequence) at a time, so captures larger than memory are fine.
#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cf/io/hdf5.hpp"

namespace cf::io {

/// Residual mixing coefficient of one layer in the two forms of docs/spec.md §2.
struct ResidualAlpha {
  double token_mean = 0;  ///< mean over samples of mean_t ||a_t|| / (||x_t|| + ||a_t||)
  double frobenius = 0;   ///< mean over samples of ||A||_F / (||X||_F + ||A||_F)  (Eq. 1)
};

/// alpha_l from per-token norms: resid_norm(n, t) = ||x_t||_2 of sample n entering the attention
/// block, attn_norm(n, t) = ||a_t||_2 after the output projection; both N x T with N, T >= 1 and
/// non-negative entries. Uses ||X||_F = sqrt(sum_t ||x_t||^2). A token (or sample) whose two
/// norms are both 0 contributes alpha = 0. Throws cf::InvalidArgument on shape mismatch or
/// negative entries. Reference: docs/spec.md §2 (Position bias (Herasimchyk et al.) Eq. 1 and the token-averaged
/// variant of its code).
ResidualAlpha residual_alpha(const Eigen::Ref<const Eigen::MatrixXd>& resid_norm,
                             const Eigen::Ref<const Eigen::MatrixXd>& attn_norm);

/// What a capture holds: N sequences of T tokens through L layers with per-layer head counts and
/// head dimensions (d_head may differ per layer).
struct CaptureHeader {
  std::string config_json;     ///< the model config (checkpoint `config` attribute)
  std::string source;          ///< text or data path the sequences came from
  int n_seq = 0, seq_len = 0;  ///< N >= 1, T >= 1
  std::vector<int> n_head;     ///< per layer, >= 1 (size L >= 1)
  std::vector<int> d_head;     ///< per layer, >= 1 (size L)
  std::vector<int> heads;      ///< model head indices stored in attn_probs/q/k (empty = all
                               ///< heads, /heads omitted); else size n_head[l] for every layer
};

/// One layer's capture of one sequence (row-major float32 buffers).
struct LayerCapture {
  const float* attn_probs = nullptr;      ///< [H, T, T], row = query (may be null: not stored)
  const float* q = nullptr;               ///< [H, T, d_head] (may be null)
  const float* k = nullptr;               ///< [H, T, d_head] (may be null)
  const float* resid_in_norm = nullptr;   ///< [T], required
  const float* attn_out_norm = nullptr;   ///< [T], required
  const float* resid_out_norm = nullptr;  ///< [T], ||x_t + a_t||_2 leaving the attention block (may be null)
};

/// Streaming writer handed to the fill function of write_capture_atomic.
class CaptureWriter {
 public:
  /// Store layer `layer` (0..L-1) of sequence `seq` (0..N-1). Every (layer, seq) pair must be
  /// written exactly once before the fill function returns (else cf::Error).
  void write(int layer, int seq, const LayerCapture& c);
  /// Store the token ids of sequence `seq` ([T] entries) in /tokens [N, T] (optional).
  void write_tokens(int seq, const std::vector<std::int32_t>& tokens);

 private:
  friend void write_capture_atomic(const std::string&, const CaptureHeader&,
                                   const std::function<void(CaptureWriter&)>&);
  CaptureWriter(File& f, const CaptureHeader& h);
  void finish();
  File& file_;
  const CaptureHeader& header_;
  std::vector<Eigen::MatrixXd> resid_, attn_;  // per layer, N x T
  std::vector<std::vector<bool>> done_;        // per layer, per sequence
  bool started_ = false, probs_ = false, qk_ = false, out_norm_ = false, tokens_ = false;
};

/// Write a capture file atomically (cf::io::write_hdf5_atomic): root attributes format =
/// "causalflow-capture", format_version = 1, config, source; per layer l the datasets
/// /layer_{l}/attn_probs [N, H, T, T], /layer_{l}/q and /layer_{l}/k [N, H, T, d_head],
/// /layer_{l}/resid_in_norm and /layer_{l}/attn_out_norm [N, T], optional /layer_{l}/resid_out_norm
/// [N, T], attributes alpha_token_mean and alpha_frobenius; root datasets /alpha_token_mean and
/// /alpha_frobenius [L] (float64); /tokens [N, T] (int64) if written; /heads [H'] (int64) when
/// header.heads is not empty. Datasets whose pointer was null in the first write (whatever its layer and sequence) are
/// omitted.
/// Throws cf::InvalidArgument for an inconsistent header.
void write_capture_atomic(const std::string& path, const CaptureHeader& header,
                          const std::function<void(CaptureWriter&)>& fill);

}  // namespace cf::io
