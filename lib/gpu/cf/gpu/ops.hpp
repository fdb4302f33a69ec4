#pragma once
// The heavy operations of the trainer and analysers with two builds of one interface (issue 14;
// STYLE.md habit 7): Ops<Backend::Emulated> runs the CUDA kernels on the CPU through the
// emulation header and the Thrust paths on OpenMP (host pointers; always built, tested in CI),
// Ops<Backend::Cuda> runs the same kernel sources compiled by nvcc (device pointers; built when
// CUDA is on, run only on a machine with a device). Both are instantiated from one templated
// body (lib/gpu/src/ops_body.hpp, docs/gpu.md "Twins"). Every operation takes the execution
// context (cf/gpu/context.hpp); the free functions of namespaces cf::gpu::emu and cf::gpu::cuda
// are the same operations with and without a Context (the latter on default_context()). The CPU
// oracle of each is the lib/nn / lib/rollout function named in its doc.
#include <cstdint>

#include "cf/gpu/attention.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/functors.hpp"
#include "cf/gpu/kernels/crossentropy.cuh"
#include "cf/gpu/kernels/top_prediction.cuh"

namespace cf::gpu {

/// A TiledMask copied once where back end Bk's kernels read it (device memory; host memory in the
/// emulated build), one allocation for its seven arrays (issue 31: the device trainer keeps one
/// per layer of its plan; before, every attention call allocated, copied and freed seven arrays
/// with blocking calls). The attention calls taking a TiledMask make one per call. Defined in
/// ops_body.hpp, instantiated with Ops<Bk>.
template <Backend Bk>
class ResidentMask {
 public:
  explicit ResidentMask(const TiledMask& mask);
  ~ResidentMask();
  ResidentMask(const ResidentMask&) = delete;
  ResidentMask& operator=(const ResidentMask&) = delete;
  /// Pointers where the kernels run, valid while this object lives.
  const kernels::MaskView& view() const { return view_; }

 private:
  kernels::MaskView view_;
  void* storage_ = nullptr;
};

/// Scratch of the tiled attention calls with a runway, kept by the caller (issue 31: none is
/// allocated per call): runway_u [B, T, dh] (forward and backward), runway_g [B, H, T, dh] (the
/// bilinear form's backward). Null where the call does not need it.
struct AttentionScratch {
  float* runway_u = nullptr;
  float* runway_g = nullptr;
};

/// Rows per block of the fused norm backwards (Ops::residual_layernorm_backward, _rmsnorm_): each
/// block's weight-gradient sums are one row of their partial sums, norm_partial_rows(N) rows of
/// 2 C (LayerNorm: w, b) or C (RMSNorm) floats. A constant, not the device's size: the sums, and so
/// the gradients, are the same on every device and in the emulated build.
inline constexpr int kNormRows = 32;
inline int norm_partial_rows(int N) { return (N + kNormRows - 1) / kNormRows; }

/// The operations of one back end (definitions: ops_body.hpp, instantiated in ops_emu.cpp and
/// ops_cuda.cu; a member a back end lacks is a link error, never a silent fallback).
template <Backend Bk>
struct Ops {
  /// Twin of cf::nn::layernorm_forward: out, inp [N, C]; mean, rstd [N]; w, b [C]; eps as arch.norm_eps.
  static void layernorm_forward(Context& ctx, float* out, float* mean, float* rstd, const float* inp, const float* w,
                                const float* b, int N, int C, float eps = 1e-5f);
  /// Twin of cf::nn::layernorm_backward: dinp [N, C], dw, db [C] accumulated (dw, db null: skipped).
  static void layernorm_backward(Context& ctx, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                 const float* w, const float* mean, const float* rstd, int N, int C);
  /// Twin of cf::nn::rmsnorm_forward: out, inp [N, C]; rstd [N]; w [C].
  static void rmsnorm_forward(Context& ctx, float* out, float* rstd, const float* inp, const float* w, int N, int C,
                              float eps);
  /// Twin of cf::nn::rmsnorm_backward: dinp [N, C], dw [C] accumulated (dw null: skipped).
  static void rmsnorm_backward(Context& ctx, float* dinp, float* dw, const float* dout, const float* inp,
                               const float* w, const float* rstd, int N, int C);
  /// sum = a + b and out = LayerNorm(sum) in one kernel (llm.c's fused_residual_forward): the floats
  /// of an add followed by layernorm_forward. sum, out, a, b [N, C] (sum may be a); mean, rstd [N].
  static void residual_layernorm_forward(Context& ctx, float* sum, float* out, float* mean, float* rstd, const float* a,
                                         const float* b, const float* w, const float* bias, int N, int C, float eps);
  /// sum = a + b and out = RMSNorm(sum) in one kernel: the floats of an add followed by
  /// rmsnorm_forward. sum, out, a, b [N, C] (sum may be a); rstd [N].
  static void residual_rmsnorm_forward(Context& ctx, float* sum, float* out, float* rstd, const float* a,
                                       const float* b, const float* w, int N, int C, float eps);
  /// The residual stream's gradient through a LayerNorm in one kernel (issue 31; llm.c's fused
  /// layernorm backward): dinp = dres + the norm's input gradient of dout + dpar, the floats of
  /// layernorm_backward on dinp = dres followed by an add of dpar (dres, dpar null: not added; dres
  /// may be dinp; dout aliases neither). With `part` (norm_partial_rows(N) x 2 C floats) the weight
  /// gradients' terms are summed there per block of kNormRows rows for norm_weight_grad (null:
  /// none). Deterministic: no atomics.
  static void residual_layernorm_backward(Context& ctx, float* dinp, float* part, const float* dres, const float* dpar,
                                          const float* dout, const float* inp, const float* w, const float* mean,
                                          const float* rstd, int N, int C);
  /// The same through an RMSNorm (part: norm_partial_rows(N) x C floats, the dw terms).
  static void residual_rmsnorm_backward(Context& ctx, float* dinp, float* part, const float* dres, const float* dpar,
                                        const float* dout, const float* inp, const float* w, const float* rstd, int N,
                                        int C);
  /// dw [C] += the partial sums `part` of a fused norm backward over N rows, added in block order;
  /// db [C] likewise (LayerNorm; null for RMSNorm's partial sums).
  static void norm_weight_grad(Context& ctx, float* dw, float* db, const float* part, int N, int C);
  /// Twin of cf::nn::crossentropy_forward: logits [N, V] -> probabilities, losses [N]; returns the
  /// number of rows with target >= 0.
  static std::int64_t crossentropy_forward(Context& ctx, float* logits, float* losses, const std::int32_t* targets,
                                           int N, int V);
  /// The fused classifier (kernels::classifier_kernel; llm.c's fused_classifier): losses [N] of the
  /// rows of logits [N, ld] (classes in the first V columns, ld >= V), the rows left as `out` says:
  /// untouched (Loss), softmax probabilities (Probabilities: crossentropy_forward's), or d loss /
  /// d logits for loss = dloss * the sum of counted losses (Gradient: crossentropy_forward then
  /// crossentropy_backward with scale dloss, in one kernel); columns [V, ld) written 0 with the row.
  /// Rows with target < 0 have loss 0 (and gradient 0). No host wait (the caller counts targets).
  static void classifier(Context& ctx, float* logits, float* losses, const std::int32_t* targets, int N, int V, int ld,
                         float dloss, kernels::ClassifierOut out);
  /// Each sequence's top prediction (kernels::top_prediction_kernel): out[b] = the token and
  /// probability at the argmax of the last row of sequence b of probs [B T, ld] (first V columns),
  /// by cf::nn::apply_top_seed's rule (the first index of the largest; a NaN at index 0 is kept, a
  /// NaN elsewhere never taken). One block per sequence; no host wait.
  static void top_prediction(Context& ctx, const float* probs, kernels::TopPrediction* out, int B, int T, int V,
                             int ld);
  /// Twin of cf::nn::crossentropy_backward: probs [N, V] -> scale (p - onehot) in place.
  static void crossentropy_backward(Context& ctx, float* probs, const std::int32_t* targets, int N, int V, float scale);
  /// Twin of cf::nn::gelu_forward (Thrust transform with GeluForward).
  static void gelu_forward(Context& ctx, float* out, const float* inp, std::int64_t n);
  /// Twin of cf::nn::gelu_backward: dinp [n] += gelu'(inp) dout (Thrust transform with GeluBackward).
  static void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, std::int64_t n);
  /// Twin of cf::nn::gelu_erf_forward (Thrust transform with GeluErfForward).
  static void gelu_erf_forward(Context& ctx, float* out, const float* inp, std::int64_t n);
  /// Twin of cf::nn::gelu_erf_backward: dinp [n] += gelu_erf'(inp) dout.
  static void gelu_erf_backward(Context& ctx, float* dinp, const float* inp, const float* dout, std::int64_t n);
  /// Twin of cf::nn::swiglu_forward: out [N, F] = silu(h[:, :F]) h[:, F:], h [N, 2F].
  static void swiglu_forward(Context& ctx, float* out, const float* h, std::int64_t N, std::int64_t F);
  /// Twin of cf::nn::swiglu_backward: dh [N, 2F] += (d gate, d up) from dout [N, F].
  static void swiglu_backward(Context& ctx, float* dh, const float* h, const float* dout, std::int64_t N,
                              std::int64_t F);
  /// Twin of cf::nn::rope_apply over nseq sequences at once (Thrust for_each): sequence s has Tn
  /// rows at x + s seq_stride, row stride ld; pair (2i, 2i+1) of row t rotates by t base^(-2i/r),
  /// r = rot (0 = dh), inverse = the transpose rotation (the backward pass).
  static void rope_apply(Context& ctx, float* x, std::int64_t nseq, int Tn, int dh, std::int64_t ld,
                         std::int64_t seq_stride, bool inverse, int rot = 0, double base = 10000.0);
  /// One AdamW step over n parameters sharing one decay value (twin of the inner loop of
  /// cf::nn::adamw_step; Thrust for_each with AdamWUpdate).
  static void adamw_update(Context& ctx, float* params, const float* grad, float* m, float* v, std::int64_t n,
                           const AdamWUpdate& u);
  /// Inclusive scans of consecutive equal-key segments of affine maps under AffineCompose (Thrust
  /// inclusive_scan_by_key): out[i] = in[first of segment] o ... o in[i].
  static void affine_scan_by_key(Context& ctx, const int* keys, const Affine* in, Affine* out, std::int64_t n);
  /// Tiled attention forward (kernels::attention_forward_kernel): q, k, v, y [B, H, T, dh]; lse
  /// [B, H, nb, T]; obr [B, H, nb, T, dh]; slopes [H] (ALiBi) or null. Throws cf::InvalidArgument
  /// for dh > 128 or a mask of another length.
  static void attention_forward(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                const float* q, const float* k, const float* v, float* y, float* lse, float* obr);
  /// Tiled attention backward: dq, dk, dv [B, H, T, dh] accumulated from dy; dsum [B, H, nb, T]
  /// is scratch (the per-branch row terms dy . o).
  static void attention_backward(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                 const float* q, const float* k, const float* v, const float* dy, const float* lse,
                                 const float* obr, float* dsum, float* dq, float* dk, float* dv);
  /// Tiled attention forward with S-D and / or runway (AttentionExtras; the logits of
  /// kernels/attention.cuh). attention_forward is this call with no extras. Throws
  /// cf::InvalidArgument for dh > 128, a mask of another length, or a runway without its values.
  static void attention_forward_ex(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                   const AttentionExtras& x, const float* q, const float* k, const float* v, float* y,
                                   float* lse, float* obr);
  /// Tiled attention backward with S-D and / or runway: dq, dk, dv as attention_backward, plus the
  /// extras' gradients g (accumulated). attention_backward is this call with no extras.
  static void attention_backward_ex(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                    const AttentionExtras& x, const float* q, const float* k, const float* v,
                                    const float* dy, const float* lse, const float* obr, float* dsum, float* dq,
                                    float* dk, float* dv, const AttentionExtraGrads& g);
  /// attention_forward_ex on a mask made resident once, with caller-kept scratch: no allocation,
  /// no copy, no host wait (the device trainer's calls).
  static void attention_forward_ex(Context& ctx, const AttentionShape& s, const ResidentMask<Bk>& mask,
                                   const float* slopes, const AttentionExtras& x, const AttentionScratch& w,
                                   const float* q, const float* k, const float* v, float* y, float* lse, float* obr);
  /// attention_backward_ex on a mask made resident once, with caller-kept scratch.
  static void attention_backward_ex(Context& ctx, const AttentionShape& s, const ResidentMask<Bk>& mask,
                                    const float* slopes, const AttentionExtras& x, const AttentionScratch& w,
                                    const float* q, const float* k, const float* v, const float* dy, const float* lse,
                                    const float* obr, float* dsum, float* dq, float* dk, float* dv,
                                    const AttentionExtraGrads& g);
  /// One step v <- v Abar(l) of the structured ALiBi rollout on a causal mask (twin of
  /// cf::rollout::alibi_apply_left, Position bias (Herasimchyk et al.) Eqs. 1-3, docs/spec.md §2): per head h the
  /// suffix recurrence S_j = r_h S_{j+1} + v_j a_{h,j} (r_h = exp(-m_h)) as an affine scan over all heads at once
  /// (Thrust inclusive_scan_by_key), then out_j = sum_h w_h (r_h S_{h,j+1} + v_j d_{h,j}). slopes, deltas,
  /// weights [H] (weights normalised); v, out [n]; scratch [H n]. O(H n) work, every term >= 0.
  static void alibi_rollout_apply_left(Context& ctx, const double* slopes, const double* deltas, const double* weights,
                                       int H, const double* v, double* out, std::int64_t n, Affine* scratch);
  /// One step v <- v Abar(l) of the structured ALiBi rollout on a sliding window of `window` keys
  /// (twin of cf::rollout::alibi_apply_left with model.mask.window = window, docs/spec.md §2): per head the
  /// window sums T_j = sum_{j < i <= j+w-1} r^(i-j) v_i a_i as two segmented affine scans over all
  /// heads at once (a within-block suffix and a within-block prefix, blocks of w-1 positions: every
  /// term >= 0, no cancellation), then out_j = sum_h w_h (T_{h,j} + v_j d_{h,j}). window <= 0 or
  /// >= n is the causal step (alibi_rollout_apply_left). v, out [n]; scratch [2 H n].
  static void alibi_rollout_apply_left_window(Context& ctx, const double* slopes, const double* deltas,
                                              const double* weights, int H, std::int64_t window, const double* v,
                                              double* out, std::int64_t n, Affine* scratch);
  /// Strided batched GEMM C_b = alpha A_b B_b + beta C_b, row-major: A_b [m, k], B_b [k, n], C_b [m, n]
  /// at strides sa, sb, sc (OpenBLAS sgemm per batch on the CPU twin, cublasSgemmStridedBatched).
  static void gemm_strided_batched(Context& ctx, int m, int n, int k, float alpha, const float* A, std::int64_t sa,
                                   const float* B, std::int64_t sb, float beta, float* C, std::int64_t sc, int batch);
  /// Eigen-decompositions of `batch` symmetric n x n matrices (row-major, contiguous): eigenvalues
  /// ascending in w [batch, n], eigenvectors as columns of V [batch, n, n] (row-major). The spectral
  /// per-head cores (lib/spectral). CPU twin: Eigen's SelfAdjointEigenSolver; device: one
  /// cusolverDnSsyevd per matrix (syevjBatched is limited to n <= 32, the cores reach 2 d_head).
  static void sym_eig_batched(Context& ctx, const float* A, int n, int batch, float* w, float* V);
};

// Instantiated once each, in ops_emu.cpp and ops_cuda.cu (never implicitly where the bodies are
// visible).
extern template struct Ops<Backend::Emulated>;
extern template struct Ops<Backend::Cuda>;
extern template class ResidentMask<Backend::Emulated>;
extern template class ResidentMask<Backend::Cuda>;

namespace emu {
inline constexpr Backend kBackend = Backend::Emulated;
#include "cf/gpu/detail/ops_decl.inc"
}  // namespace emu

namespace cuda {
inline constexpr Backend kBackend = Backend::Cuda;
#include "cf/gpu/detail/ops_decl.inc"
}  // namespace cuda

}  // namespace cf::gpu
