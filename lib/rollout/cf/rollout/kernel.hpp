#pragma once
// Attention kernels for the rollout of Position bias (Herasimchyk et al.) (docs/spec.md section 2): causal /
// sliding-window masks, ALiBi slopes, constant-plus-diagonal content, and the dense expected kernel Abar(l) = sum_h w_h
// A(l,h). Notation: n positions, L layers, H heads, row i = query, col j = key.
#include <Eigen/Dense>
#include <string>
#include <vector>

#include "cf/core/alibi.hpp"

namespace cf::rollout {

/// Row-major dense matrix (rows are attention rows; filled row by row).
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Attention mask: full causal (j <= i) or sliding window of width w (i-w+1 <= j <= i, self
/// included; docs/spec.md section 0). Implemented here as a predicate (no lib/graph dependency).
struct Mask {
  long window = 0;  ///< 0 = full causal; w >= 1 = sliding window admitting w keys
  /// True iff query i may read key j.
  bool admits(long i, long j) const { return j <= i && (window <= 0 || i - j < window); }
  /// Number of keys row i admits: min(i+1, w).
  long row_size(long i) const { return window > 0 && window < i + 1 ? window : i + 1; }
  /// "causal" or "swa:W".
  std::string name() const;
};

/// Parse "causal" | "swa:W" (W >= 1); throws cf::InvalidArgument otherwise.
Mask parse_mask(const std::string& spec);

/// ALiBi slopes, recipes `simple` (2^(-8h/H), the reference code of Position bias (Herasimchyk et
/// al.)) and `hf` (BLOOM's build_alibi_tensor, any H), and the dispatch on the recipe name: the one
/// implementation in lib/core (cf/core/alibi.hpp), shared with lib/nn and lib/hf.
using cf::alibi_slopes;
using cf::alibi_slopes_hf;
using cf::alibi_slopes_simple;

/// A structured ALiBi model: every layer l and head h has the kernel
///   A(l,h)[i,j] ∝ exp(-m_h (i-j) + delta(l,h) [i = j]) on the mask, 0 elsewhere
/// (constant-plus-diagonal content of Prop. 4.5: the constant c_l cancels in the softmax).
/// The expected kernel is Abar(l) = sum_h w_h A(l,h) (Position bias (Herasimchyk et al.) Eq. 4).
struct AlibiModel {
  std::vector<double> slopes;        ///< H slopes m_h >= 0 (already scaled, e.g. by 1/sqrt(d_head))
  Eigen::MatrixXd delta;             ///< L x H diagonal content; L x 1 or 1 x 1 broadcast; empty = 0
  std::vector<double> head_weights;  ///< H non-negative weights summing to 1; empty = uniform
  Mask mask;                         ///< causal or sliding window
  /// Optional per-layer slopes (a model config with one slope list per layer): L rows of H
  /// slopes; empty = `slopes` at every layer. When set, `slopes` must still hold H entries (layer 1's).
  std::vector<std::vector<double>> layer_slopes;
  /// Optional per-layer head weights: L rows of H non-negative weights (normalised per layer);
  /// empty = `head_weights` at every layer.
  std::vector<std::vector<double>> layer_head_weights;
};

/// delta(l, h) with the broadcasting rules of AlibiModel (l in [0, L), h in [0, H)).
double model_delta(const AlibiModel& model, int l, int h);

/// Slopes of layer l (layer_slopes[l] when per-layer slopes are set, else slopes).
const std::vector<double>& model_slopes(const AlibiModel& model, int l);

/// Normalised head weights (uniform when empty); throws cf::InvalidArgument unless the size is H,
/// every weight >= 0 and the sum > 0.
std::vector<double> model_head_weights(const AlibiModel& model);

/// Normalised head weights of layer l (layer_head_weights[l] when set, else model_head_weights).
std::vector<double> model_head_weights(const AlibiModel& model, int l);

/// True when layers l1 and l2 have the same slopes, head weights and content (same kernel).
bool same_layer_kernel(const AlibiModel& model, int l1, int l2);

/// Validate the model (slopes finite and >= 0, delta finite with broadcastable shape, weights);
/// throws cf::InvalidArgument naming the violated constraint.
void validate_model(const AlibiModel& model);

/// Dense single-head kernel A[i,j] ∝ exp(-slope (i-j) + delta [i=j]) on the mask, n x n,
/// row-stochastic. Each entry is computed from exp() directly (the oracle for the fast path).
RowMatrix alibi_head_kernel_dense(double slope, double delta, const Mask& mask, long n);

/// Dense expected kernel Abar(l) = sum_h w_h A(l,h), n x n, for layer l in [0, L).
RowMatrix alibi_kernel_dense(const AlibiModel& model, int l, long n);

/// Same as alibi_kernel_dense, written into A (resized to n x n only if its shape differs), so a
/// caller looping over layers reuses one buffer (large allocations are slow on some systems).
void alibi_kernel_dense_into(const AlibiModel& model, int l, long n, RowMatrix& A);

/// Read a kernel file: whitespace/comma separated numbers, either one n x n matrix (same kernel
/// at every layer) or L*n rows of n numbers (layer 1 first). Rows are renormalised only if they
/// already sum to 1 within 1e-6; otherwise throws cf::InvalidArgument (malformed or not
/// row-stochastic, negative entries, non-causal mass above 1e-12).
std::vector<RowMatrix> read_kernel_file(const std::string& path);

/// Throw cf::InvalidArgument unless `path` is a causalflow capture file (docs/checkpoint_format.md,
/// "Capture files"): the message says "not an HDF5 file" for a foreign or missing file and "run
/// `capture` first" for a causalflow checkpoint (format = "causalflow-checkpoint").
void require_capture_file(const std::string& path);

/// True if the capture file stores attention probabilities (/layer_0/attn_probs); the file must
/// pass require_capture_file.
bool capture_has_kernels(const std::string& path);

/// Measured expected kernels from a capture: for each layer l (0..L-1, L = number of layer_{l}
/// groups), Abar(l+1) = the uniform mean over the stored heads (Position bias (Herasimchyk et al.) Eq. 4, docs/spec.md
/// §2) and over the N captured sequences of the rows of /layer_{l}/attn_probs [N, H, T, T], each head's row divided by
/// its sum first (branch-fused bridge layers store the sum of the two branches' weights, so their rows sum to 2 where
/// the bridge admits a key). Returns L row-stochastic, causal T x T kernels. Throws cf::InvalidArgument (via
/// require_capture_file) for a file that is not a capture, one without attn_probs ("re-run capture without
/// --no-probs"), negative entries, an empty row or mass above the diagonal beyond 1e-6.
std::vector<RowMatrix> read_capture_kernels(const std::string& path);

}  // namespace cf::rollout
