#pragma once
// The bodies of the cf::gpu operations (Ops<Bk>, cf/gpu/ops.hpp), one template for both back ends:
// instantiated by g++ in ops_emu.cpp (kernels emulated, Thrust on OpenMP) and by nvcc in
// ops_cuda.cu. Keeping one body is what makes the CPU-executed tests meaningful for the device
// build. The instantiating file first specialises OpsTraits<Bk> (the contract; it static_asserts
// ops_body::IsOpsTraits below). The body counts its allocations and host waits
// (cf/gpu/device_stats.hpp) where it calls the primitives, so both builds count the same points:
//   policy()            a Thrust execution policy,
//   check_launch(what)  error check after a kernel launch,
//   alloc(bytes) / release(p)   memory where the kernels run,
//   upload(dst, src, bytes)     a blocking copy from the host,
//   fill_zero(p, bytes)         memset 0, ordered on the context's stream (no host wait),
//   Scratch             RAII float buffer where the kernels run (.resize(n) zero-filled, .data()),
//   gemm_strided_batched(ctx, ...), sym_eig_batched(ctx, ...)   the library calls (OpenBLAS and
//                       Eigen on the CPU; cuBLAS and cuSOLVER through the context's handles).
#include <thrust/count.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/device_stats.hpp"
#include "cf/gpu/kernels/attention.cuh"
#include "cf/gpu/kernels/crossentropy.cuh"
#include "cf/gpu/kernels/flash_attention.cuh"
#if !CF_EMULATED  // the emulated build runs the rounded reference (its software mma is for tests: slow)
#include "cf/gpu/kernels/flash_attention_mma.cuh"
#endif
#include "cf/gpu/kernels/layernorm.cuh"
#include "cf/gpu/kernels/rmsnorm.cuh"
#include "cf/gpu/kernels/top_prediction.cuh"
#include "cf/gpu/ops.hpp"
#include "ops_common.hpp"

namespace cf::gpu {

/// A back end's primitives for the operation bodies (specialised by ops_emu.cpp / ops_cuda.cu).
template <Backend Bk>
struct OpsTraits;

namespace ops_body {

using namespace cf::gpu::detail;  // the functors of ops_common.hpp

/// The compile-checked contract of OpsTraits<Bk> (what the bodies below use).
template <class Tr, class = void>
struct IsOpsTraits : std::false_type {};
template <class Tr>
struct IsOpsTraits<
    Tr, std::void_t<decltype(Tr::policy()), decltype(Tr::check_launch("")), decltype(Tr::alloc(std::size_t(1))),
                    decltype(Tr::release(nullptr)), decltype(Tr::upload(nullptr, nullptr, std::size_t(1))),
                    decltype(Tr::fill_zero(nullptr, std::size_t(1))),
                    decltype(std::declval<typename Tr::Scratch&>().resize(std::size_t(1))),
                    decltype(std::declval<typename Tr::Scratch&>().data()),
                    decltype(Tr::gemm_strided_batched(std::declval<Context&>(), 0, 0, 0, 1.0f, nullptr, 0, nullptr, 0,
                                                      0.0f, nullptr, 0, 0)),
                    decltype(Tr::sym_eig_batched(std::declval<Context&>(), nullptr, 0, 0, nullptr, nullptr))>>
    : std::true_type {};

constexpr int kRowBlock = 128;  // threads per row for the row-wise kernels (LayerNorm, softmax)

/// The FlashAttention-2 kernels (kernels/flash_attention.cuh) for head features F (kFlashSd,
/// kFlashRunway), their operands rounded by Round (no visit counter: the tests that count visits
/// launch the kernels themselves).
template <class Tr, int DH, int F, class Round>
void flash_forward(const AttentionShape& s, const kernels::MaskView& mv, const float* slopes,
                   const kernels::HeadExtras& x, const float* q, const float* k, const float* v, float* y, float* lse,
                   float* obr) {
  auto* kern = kernels::flash_forward_kernel<DH, F, Round>;
  CF_LAUNCH(kern, dim3(mv.ftiles, s.H, s.B), dim3(32 * kernels::kFlashForwardWarps), mv, s.H, s.dh, s.scale, slopes, x,
            q, k, v, y, lse, obr, nullptr);
  Tr::check_launch("attention_forward (flash)");
}

template <class Tr, int DH, int F, class Round>
void flash_backward(const AttentionShape& s, const kernels::MaskView& mv, const float* slopes,
                    const kernels::HeadExtras& x, const float* q, const float* k, const float* v, const float* dy,
                    const float* lse, const float* obr, float* dsum, float* dq, float* dk, float* dv,
                    const kernels::HeadExtraGrads& xg) {
  const dim3 grid(mv.ftiles, s.H, s.B), block(32 * kernels::kFlashBackwardWarps);
  auto* kd = kernels::flash_dsum_kernel<kernels::kFlashBackwardWarps>;
  CF_LAUNCH(kd, grid, block, mv.nb, s.T, s.H, s.dh, dy, obr, dsum);
  Tr::check_launch("attention_backward (flash, row terms)");
  auto* kkv = kernels::flash_backward_kv_kernel<DH, F, Round>;
  CF_LAUNCH(kkv, grid, block, mv, s.H, s.dh, s.scale, slopes, x, q, k, v, dy, lse, dsum, dq, dk, dv, xg, nullptr);
  Tr::check_launch("attention_backward (flash, keys)");
  auto* kq = kernels::flash_backward_q_kernel<DH, F, Round>;
  CF_LAUNCH(kq, grid, block, mv, s.H, s.dh, s.scale, slopes, x, q, k, v, dy, lse, dsum, dq, dk, xg, nullptr);
  Tr::check_launch("attention_backward (flash, queries)");
}

/// The flash kernels' features of a head: plain, S-D or runway (-1: S-D with a runway, which no
/// model builds, runs on the general kernels).
inline int flash_features(const kernels::HeadExtras& x) {
  if (x.damp && x.rw_v) return -1;
  return x.damp ? kernels::kFlashSd : x.rw_v ? kernels::kFlashRunway : 0;
}

/// How a plain head runs on `path` at the call's precision (cf/gpu/context.hpp, AttentionPath).
enum class FlashKernels { Fp32, RoundedTf32, RoundedBf16, MmaTf32, MmaBf16 };

inline FlashKernels flash_kernels(AttentionPath path, Precision p) {
  if (path == AttentionPath::Flash32 || p == Precision::Fp32) return FlashKernels::Fp32;
  const bool mma = path == AttentionPath::Flash && !CF_EMULATED;  // the emulated build: the reference
  if (p == Precision::Tf32) return mma ? FlashKernels::MmaTf32 : FlashKernels::RoundedTf32;
  return mma ? FlashKernels::MmaBf16 : FlashKernels::RoundedBf16;
}

/// The flash kernels `fk` on a plain head (x without S-D or a runway), forward.
template <class Tr, int DH>
void flash_forward_in(FlashKernels fk, const AttentionShape& s, const kernels::MaskView& mv, const float* slopes,
                      const kernels::HeadExtras& x, const float* q, const float* k, const float* v, float* y,
                      float* lse, float* obr) {
  if (fk == FlashKernels::Fp32) flash_forward<Tr, DH, 0, RoundFp32>(s, mv, slopes, x, q, k, v, y, lse, obr);
  if (fk == FlashKernels::RoundedTf32) flash_forward<Tr, DH, 0, RoundTf32>(s, mv, slopes, x, q, k, v, y, lse, obr);
  if (fk == FlashKernels::RoundedBf16) flash_forward<Tr, DH, 0, RoundBf16>(s, mv, slopes, x, q, k, v, y, lse, obr);
#if !CF_EMULATED
  if (fk == FlashKernels::MmaTf32 || fk == FlashKernels::MmaBf16) {
    if (fk == FlashKernels::MmaTf32)
      kernels::mma::forward<kernels::mma::Tf32, DH>(mv, s.B, s.H, s.dh, s.scale, slopes, q, k, v, y, lse, obr);
    else
      kernels::mma::forward<kernels::mma::Bf16, DH>(mv, s.B, s.H, s.dh, s.scale, slopes, q, k, v, y, lse, obr);
    Tr::check_launch("attention_forward (flash, tensor cores)");
  }
#endif
}

/// The same, backward: the row terms D (float32 under every precision), then dK, dV and dQ.
template <class Tr, int DH>
void flash_backward_in(FlashKernels fk, const AttentionShape& s, const kernels::MaskView& mv, const float* slopes,
                       const kernels::HeadExtras& x, const float* q, const float* k, const float* v, const float* dy,
                       const float* lse, const float* obr, float* dsum, float* dq, float* dk, float* dv,
                       const kernels::HeadExtraGrads& xg) {
  if (fk == FlashKernels::Fp32)
    flash_backward<Tr, DH, 0, RoundFp32>(s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
  if (fk == FlashKernels::RoundedTf32)
    flash_backward<Tr, DH, 0, RoundTf32>(s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
  if (fk == FlashKernels::RoundedBf16)
    flash_backward<Tr, DH, 0, RoundBf16>(s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
#if !CF_EMULATED
  if (fk == FlashKernels::MmaTf32 || fk == FlashKernels::MmaBf16) {
    auto* kd = kernels::flash_dsum_kernel<kernels::kFlashBackwardWarps>;
    CF_LAUNCH(kd, dim3(mv.ftiles, s.H, s.B), dim3(32 * kernels::kFlashBackwardWarps), mv.nb, s.T, s.H, s.dh, dy, obr,
              dsum);
    Tr::check_launch("attention_backward (flash, row terms)");
    if (fk == FlashKernels::MmaTf32)
      kernels::mma::backward<kernels::mma::Tf32, DH>(mv, s.B, s.H, s.dh, s.scale, slopes, q, k, v, dy, lse, dsum, dq,
                                                     dk, dv);
    else
      kernels::mma::backward<kernels::mma::Bf16, DH>(mv, s.B, s.H, s.dh, s.scale, slopes, q, k, v, dy, lse, dsum, dq,
                                                     dk, dv);
    Tr::check_launch("attention_backward (flash, tensor cores)");
  }
#endif
}

/// Whether `path` runs the flash kernels (plain heads in some precision, S-D and runway heads in
/// float32).
inline bool flash_path(AttentionPath path) { return path != AttentionPath::Plain && path != AttentionPath::Generic; }

template <class Tr, int DH>
void attention_forward_dh(AttentionPath path, const AttentionShape& s, const kernels::MaskView& mv, const float* slopes,
                          const kernels::HeadExtras& x, const float* q, const float* k, const float* v, float* y,
                          float* lse, float* obr) {
  const int f = flash_features(x);
  if (flash_path(path) && f >= 0) {  // S-D and runway heads: float32 under every precision
    if (f == 0)
      flash_forward_in<Tr, DH>(flash_kernels(path, s.precision), s, mv, slopes, x, q, k, v, y, lse, obr);
    else if (f == kernels::kFlashSd)
      flash_forward<Tr, DH, kernels::kFlashSd, RoundFp32>(s, mv, slopes, x, q, k, v, y, lse, obr);
    else
      flash_forward<Tr, DH, kernels::kFlashRunway, RoundFp32>(s, mv, slopes, x, q, k, v, y, lse, obr);
    return;
  }
  if (f == 0 && path == AttentionPath::Plain) {  // the register-resident path (the reference)
    auto* kern = kernels::attention_forward_plain_kernel<kAttentionTile, DH>;
    CF_LAUNCH(kern, dim3(mv.ntiles, s.H, s.B), dim3(kAttentionTile), mv, s.H, s.dh, s.scale, slopes, q, k, v, y, lse,
              obr);
    Tr::check_launch("attention_forward");
    return;
  }
  auto* kern = kernels::attention_forward_kernel<kAttentionTile, DH>;
  CF_LAUNCH(kern, dim3(mv.ntiles, s.H, s.B), dim3(kAttentionTile), mv, s.H, s.dh, s.scale, slopes, x, q, k, v, y, lse,
            obr);
  Tr::check_launch("attention_forward");
}

template <class Tr, int DH>
void attention_backward_dh(AttentionPath path, const AttentionShape& s, const kernels::MaskView& mv,
                           const float* slopes, const kernels::HeadExtras& x, const float* q, const float* k,
                           const float* v, const float* dy, const float* lse, const float* obr, float* dsum, float* dq,
                           float* dk, float* dv, const kernels::HeadExtraGrads& xg) {
  const int f = flash_features(x);
  if (flash_path(path) && f >= 0) {  // S-D and runway heads: float32 under every precision
    if (f == 0)
      flash_backward_in<Tr, DH>(flash_kernels(path, s.precision), s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk,
                                dv, xg);
    else if (f == kernels::kFlashSd)
      flash_backward<Tr, DH, kernels::kFlashSd, RoundFp32>(s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv,
                                                           xg);
    else
      flash_backward<Tr, DH, kernels::kFlashRunway, RoundFp32>(s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk,
                                                               dv, xg);
    return;
  }
  if (f == 0 && path == AttentionPath::Plain) {  // the register-resident path (the reference)
    auto* kq = kernels::attention_backward_q_plain_kernel<kAttentionTile, DH>;
    CF_LAUNCH(kq, dim3(mv.ntiles, s.H, s.B), dim3(kAttentionTile), mv, s.H, s.dh, s.scale, slopes, q, k, v, dy, lse,
              obr, dsum, dq);
    Tr::check_launch("attention_backward (queries)");
    auto* kkv = kernels::attention_backward_kv_plain_kernel<kAttentionTile, DH>;
    CF_LAUNCH(kkv, dim3(mv.ntiles, s.H, s.B), dim3(kAttentionTile), mv, s.H, s.dh, s.scale, slopes, q, k, v, dy, lse,
              dsum, dk, dv);
    Tr::check_launch("attention_backward (keys)");
    return;
  }
  auto* kq = kernels::attention_backward_q_kernel<kAttentionTile, DH>;
  CF_LAUNCH(kq, dim3(mv.ntiles, s.H, s.B), dim3(kAttentionTile), mv, s.H, s.dh, s.scale, slopes, x, q, k, v, dy, lse,
            obr, dsum, dq, dk, xg);
  Tr::check_launch("attention_backward (queries)");
  auto* kkv = kernels::attention_backward_kv_kernel<kAttentionTile, DH>;
  CF_LAUNCH(kkv, dim3(mv.ntiles, s.H, s.B), dim3(kAttentionTile), mv, s.H, s.dh, s.scale, slopes, x, q, k, v, dy, lse,
            dsum, dq, dk, dv, xg);
  Tr::check_launch("attention_backward (keys)");
}

/// The kernels' view of the extras; with a runway, u [B, T, dh] is computed into `u` (scratch).
template <class Tr>
kernels::HeadExtras head_extras(const AttentionShape& s, const AttentionExtras& e, float* u) {
  kernels::HeadExtras x;
  x.damp = e.damp;
  if (!e.runway_v) return x;
  require(e.runway_stride >= static_cast<std::int64_t>(s.T) * s.dh || s.B == 1, "attention: runway_stride ",
          e.runway_stride, " < T dh = ", static_cast<std::int64_t>(s.T) * s.dh);
  x.rw_v = e.runway_v;
  x.rw_stride = e.runway_stride;
  x.rw_B = e.runway_B;
  x.rw_c = 1.0f / std::sqrt(static_cast<float>(s.dh));
  require(u != nullptr, "attention: a runway needs AttentionScratch::runway_u");
  x.rw_u = u;
  auto* kern = kernels::runway_u_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3((s.T + kRowBlock - 1) / kRowBlock, s.B), dim3(kRowBlock), x, s.T, s.dh, u);
  Tr::check_launch("attention: runway u");
  return x;
}

/// The scratch a call with extras e needs, allocated for this call (the TiledMask overloads).
template <Backend Bk, class Tr>
struct CallScratch {
  typename Tr::Scratch u, g;
  AttentionScratch w;
  CallScratch(const AttentionShape& s, const AttentionExtras& e) {
    if (!e.runway_v) return;
    w.runway_u = take(u, static_cast<std::size_t>(s.B) * s.T * s.dh);
    if (e.runway_B) w.runway_g = take(g, static_cast<std::size_t>(s.B) * s.H * s.T * s.dh);
  }
  static float* take(typename Tr::Scratch& b, std::size_t n) {
    count_allocation(Bk, n * sizeof(float));
    b.resize(n);
    return b.data();
  }
};

inline void check_attention(const AttentionShape& s, const kernels::MaskView& m) {
  require(s.B >= 1 && s.H >= 1 && s.T >= 1 && s.dh >= 1, "attention: B, H, T, dh must be >= 1 (got ", s.B, ", ", s.H,
          ", ", s.T, ", ", s.dh, ")");
  require(s.dh <= 128, "attention: head dimension ", s.dh, " > 128 (the kernels' capacity)");
  require(m.T == s.T, "attention: mask built for T = ", m.T, " but the call has T = ", s.T);
}

}  // namespace ops_body

template <Backend Bk>
void Ops<Bk>::layernorm_forward(Context& ctx, float* out, float* mean, float* rstd, const float* inp, const float* w,
                                const float* b, int N, int C, float eps) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::layernorm_forward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), out, mean, rstd, inp, w, b, N, C, eps);
  OpsTraits<Bk>::check_launch("layernorm_forward");
}

template <Backend Bk>
void Ops<Bk>::layernorm_backward(Context& ctx, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                 const float* w, const float* mean, const float* rstd, int N, int C) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::layernorm_backward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  OpsTraits<Bk>::check_launch("layernorm_backward");
}

template <Backend Bk>
void Ops<Bk>::rmsnorm_forward(Context& ctx, float* out, float* rstd, const float* inp, const float* w, int N, int C,
                              float eps) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::rmsnorm_forward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), out, rstd, inp, w, N, C, eps);
  OpsTraits<Bk>::check_launch("rmsnorm_forward");
}

template <Backend Bk>
void Ops<Bk>::rmsnorm_backward(Context& ctx, float* dinp, float* dw, const float* dout, const float* inp,
                               const float* w, const float* rstd, int N, int C) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::rmsnorm_backward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), dinp, dw, dout, inp, w, rstd, N, C);
  OpsTraits<Bk>::check_launch("rmsnorm_backward");
}

template <Backend Bk>
void Ops<Bk>::residual_layernorm_forward(Context& ctx, float* sum, float* out, float* mean, float* rstd, const float* a,
                                         const float* b, const float* w, const float* bias, int N, int C, float eps) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::residual_layernorm_forward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), sum, out, mean, rstd, a, b, w, bias, N, C, eps);
  OpsTraits<Bk>::check_launch("residual_layernorm_forward");
}

template <Backend Bk>
void Ops<Bk>::residual_rmsnorm_forward(Context& ctx, float* sum, float* out, float* rstd, const float* a,
                                       const float* b, const float* w, int N, int C, float eps) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::residual_rmsnorm_forward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), sum, out, rstd, a, b, w, N, C, eps);
  OpsTraits<Bk>::check_launch("residual_rmsnorm_forward");
}

template <Backend Bk>
void Ops<Bk>::residual_layernorm_backward(Context& ctx, float* dinp, float* part, const float* dres, const float* dpar,
                                          const float* dout, const float* inp, const float* w, const float* mean,
                                          const float* rstd, int N, int C) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::residual_layernorm_backward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(norm_partial_rows(N)), dim3(kRowBlock), dinp, part, dres, dpar, dout, inp, w, mean, rstd, N, C,
            kNormRows);
  OpsTraits<Bk>::check_launch("residual_layernorm_backward");
}

template <Backend Bk>
void Ops<Bk>::residual_rmsnorm_backward(Context& ctx, float* dinp, float* part, const float* dres, const float* dpar,
                                        const float* dout, const float* inp, const float* w, const float* rstd, int N,
                                        int C) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::residual_rmsnorm_backward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(norm_partial_rows(N)), dim3(kRowBlock), dinp, part, dres, dpar, dout, inp, w, rstd, N, C,
            kNormRows);
  OpsTraits<Bk>::check_launch("residual_rmsnorm_backward");
}

template <Backend Bk>
void Ops<Bk>::norm_weight_grad(Context& ctx, float* dw, float* db, const float* part, int N, int C) {
  using namespace ops_body;
  const long long outputs = static_cast<long long>(db ? 2 : 1) * C;
  if (N <= 0 || outputs == 0) return;
  auto* kern = kernels::norm_weight_grad_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(static_cast<unsigned>((outputs + kRowBlock - 1) / kRowBlock)), dim3(kRowBlock), dw, db, part,
            norm_partial_rows(N), C);
  OpsTraits<Bk>::check_launch("norm_weight_grad");
}

template <Backend Bk>
void Ops<Bk>::classifier(Context& ctx, float* logits, float* losses, const std::int32_t* targets, int N, int V, int ld,
                         float dloss, kernels::ClassifierOut out) {
  using namespace ops_body;
  using kernels::ClassifierOut;
  require(V >= 1 && ld >= V, "classifier: need 1 <= V <= ld (got V = ", V, ", ld = ", ld, ")");
  if (N <= 0) return;
  // the output is a template parameter: each kernel has only its own final pass
  auto* kern = out == ClassifierOut::Loss ? kernels::classifier_kernel<kRowBlock, ClassifierOut::Loss>
               : out == ClassifierOut::Probabilities
                   ? kernels::classifier_kernel<kRowBlock, ClassifierOut::Probabilities>
                   : kernels::classifier_kernel<kRowBlock, ClassifierOut::Gradient>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), logits, losses, targets, N, V, ld, dloss);
  OpsTraits<Bk>::check_launch("classifier");
}

template <Backend Bk>
void Ops<Bk>::top_prediction(Context&, const float* probs, kernels::TopPrediction* out, int B, int T, int V, int ld) {
  using namespace ops_body;
  require(V >= 1 && ld >= V && T >= 1, "top_prediction: need 1 <= V <= ld and T >= 1 (got V = ", V, ", ld = ", ld,
          ", T = ", T, ")");
  if (B <= 0) return;
  CF_LAUNCH(kernels::top_prediction_kernel<kRowBlock>, dim3(B), dim3(kRowBlock), probs, out, B, T, V, ld);
  OpsTraits<Bk>::check_launch("top_prediction");
}

template <Backend Bk>
std::int64_t Ops<Bk>::crossentropy_forward(Context& ctx, float* logits, float* losses, const std::int32_t* targets,
                                           int N, int V) {
  using namespace ops_body;
  if (N <= 0) return 0;
  classifier(ctx, logits, losses, targets, N, V, V, 0.0f, kernels::ClassifierOut::Probabilities);
  count_host_sync(Bk);  // the count returns to the host
  return thrust::count_if(OpsTraits<Bk>::policy(), targets, targets + N, NonNegative());
}

template <Backend Bk>
void Ops<Bk>::crossentropy_backward(Context& ctx, float* probs, const std::int32_t* targets, int N, int V,
                                    float scale) {
  using namespace ops_body;
  if (N <= 0) return;
  auto* kern = kernels::crossentropy_backward_kernel<kRowBlock>;
  CF_LAUNCH(kern, dim3(N), dim3(kRowBlock), probs, targets, N, V, scale);
  OpsTraits<Bk>::check_launch("crossentropy_backward");
}

template <Backend Bk>
void Ops<Bk>::gelu_forward(Context& ctx, float* out, const float* inp, std::int64_t n) {
  using namespace ops_body;
  thrust::transform(OpsTraits<Bk>::policy(), inp, inp + n, out, GeluForward());
}

template <Backend Bk>
void Ops<Bk>::gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, std::int64_t n) {
  using namespace ops_body;
  // dinp += f(inp, dout): zip the three streams and write the sum back
  auto first = thrust::make_zip_iterator(thrust::make_tuple(inp, dout, dinp));
  thrust::transform(OpsTraits<Bk>::policy(), first, first + n, dinp, GeluBackwardAccumulate());
}

template <Backend Bk>
void Ops<Bk>::gelu_erf_forward(Context& ctx, float* out, const float* inp, std::int64_t n) {
  using namespace ops_body;
  thrust::transform(OpsTraits<Bk>::policy(), inp, inp + n, out, GeluErfForward());
}

template <Backend Bk>
void Ops<Bk>::gelu_erf_backward(Context& ctx, float* dinp, const float* inp, const float* dout, std::int64_t n) {
  using namespace ops_body;
  auto first = thrust::make_zip_iterator(thrust::make_tuple(inp, dout, dinp));
  thrust::transform(OpsTraits<Bk>::policy(), first, first + n, dinp, GeluErfBackwardAccumulate());
}

template <Backend Bk>
void Ops<Bk>::swiglu_forward(Context& ctx, float* out, const float* h, std::int64_t N, std::int64_t F) {
  using namespace ops_body;
  thrust::counting_iterator<long long> idx(0);
  thrust::transform(OpsTraits<Bk>::policy(), idx, idx + N * F, out, SwigluForward{h, F});
}

template <Backend Bk>
void Ops<Bk>::swiglu_backward(Context& ctx, float* dh, const float* h, const float* dout, std::int64_t N,
                              std::int64_t F) {
  using namespace ops_body;
  thrust::counting_iterator<long long> idx(0);
  thrust::for_each(OpsTraits<Bk>::policy(), idx, idx + N * F, SwigluBackward{dh, h, dout, F});
}

template <Backend Bk>
void Ops<Bk>::rope_apply(Context& ctx, float* x, std::int64_t nseq, int Tn, int dh, std::int64_t ld,
                         std::int64_t seq_stride, bool inverse, int rot, double base) {
  using namespace ops_body;
  const int r = rot > 0 ? rot : dh;
  require(r <= dh && r % 2 == 0, "rope_apply: rotary dimension ", r, " must be even and <= d_head = ", dh);
  const long long total = static_cast<long long>(nseq) * Tn * (r / 2);
  if (total <= 0) return;
  thrust::counting_iterator<long long> idx(0);
  thrust::for_each(OpsTraits<Bk>::policy(), idx, idx + total,
                   RopeRotate{x, Tn, r / 2, r, ld, seq_stride, inverse, base});
}

template <Backend Bk>
void Ops<Bk>::adamw_update(Context& ctx, float* params, const float* grad, float* m, float* v, std::int64_t n,
                           const AdamWUpdate& u) {
  using namespace ops_body;
  auto first = thrust::make_zip_iterator(thrust::make_tuple(params, grad, m, v));
  thrust::for_each(OpsTraits<Bk>::policy(), first, first + n, AdamWApply{u});
}

template <Backend Bk>
void Ops<Bk>::affine_scan_by_key(Context& ctx, const int* keys, const Affine* in, Affine* out, std::int64_t n) {
  using namespace ops_body;
  thrust::inclusive_scan_by_key(OpsTraits<Bk>::policy(), keys, keys + n, in, out, thrust::equal_to<int>(),
                                AffineCompose());
}

template <Backend Bk>
ResidentMask<Bk>::ResidentMask(const TiledMask& m) : view_(m.view()) {
  // the eleven arrays (the tile lists and the flash kernels' tile plan) packed in one buffer, in
  // MaskView's order, each at least one int
  constexpr int kArrays = 11;
  const std::vector<int>* arrays[kArrays] = {&m.row_ptr, &m.iv_lo,  &m.iv_hi,   &m.qt_ptr, &m.qt_list, &m.kt_ptr,
                                             &m.kt_list, &m.fq_ptr, &m.fq_list, &m.fk_ptr, &m.fk_list};
  std::vector<int> packed;
  std::size_t at[kArrays];
  for (int a = 0; a < kArrays; ++a) {
    at[a] = packed.size();
    packed.insert(packed.end(), arrays[a]->begin(), arrays[a]->end());
    if (arrays[a]->empty()) packed.push_back(0);
  }
  const std::size_t bytes = packed.size() * sizeof(int);
  storage_ = OpsTraits<Bk>::alloc(bytes);
  count_allocation(Bk, bytes);
  count_host_sync(Bk);  // a blocking copy
  try {
    OpsTraits<Bk>::upload(storage_, packed.data(), bytes);
  } catch (...) {
    OpsTraits<Bk>::release(storage_);  // the destructor does not run for a constructor that throws
    throw;
  }
  const int* base = static_cast<const int*>(storage_);
  const int** views[kArrays] = {&view_.row_ptr, &view_.iv_lo,  &view_.iv_hi,   &view_.qt_ptr,
                                &view_.qt_list, &view_.kt_ptr, &view_.kt_list, &view_.fq_ptr,
                                &view_.fq_list, &view_.fk_ptr, &view_.fk_list};
  for (int a = 0; a < kArrays; ++a) *views[a] = base + at[a];
}

template <Backend Bk>
ResidentMask<Bk>::~ResidentMask() {
  OpsTraits<Bk>::release(storage_);
}

template <Backend Bk>
void Ops<Bk>::attention_forward_ex(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                   const AttentionExtras& e, const float* q, const float* k, const float* v, float* y,
                                   float* lse, float* obr) {
  using namespace ops_body;
  check_attention(s, mask.view());
  const ResidentMask<Bk> dm(mask);
  const CallScratch<Bk, OpsTraits<Bk>> w(s, e);
  attention_forward_ex(ctx, s, dm, slopes, e, w.w, q, k, v, y, lse, obr);
}

template <Backend Bk>
void Ops<Bk>::attention_forward_ex(Context& ctx, const AttentionShape& s, const ResidentMask<Bk>& mask,
                                   const float* slopes, const AttentionExtras& e, const AttentionScratch& w,
                                   const float* q, const float* k, const float* v, float* y, float* lse, float* obr) {
  using namespace ops_body;
  const kernels::MaskView& mv = mask.view();
  check_attention(s, mv);
  const AttentionPath path = ctx.attention();
  const kernels::HeadExtras x = head_extras<OpsTraits<Bk>>(s, e, w.runway_u);
  if (s.dh <= 32)
    attention_forward_dh<OpsTraits<Bk>, 32>(path, s, mv, slopes, x, q, k, v, y, lse, obr);
  else if (s.dh <= 64)
    attention_forward_dh<OpsTraits<Bk>, 64>(path, s, mv, slopes, x, q, k, v, y, lse, obr);
  else
    attention_forward_dh<OpsTraits<Bk>, 128>(path, s, mv, slopes, x, q, k, v, y, lse, obr);
}

template <Backend Bk>
void Ops<Bk>::attention_forward(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                const float* q, const float* k, const float* v, float* y, float* lse, float* obr) {
  using namespace ops_body;
  attention_forward_ex(ctx, s, mask, slopes, AttentionExtras{}, q, k, v, y, lse, obr);
}

template <Backend Bk>
void Ops<Bk>::attention_backward_ex(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                    const AttentionExtras& e, const float* q, const float* k, const float* v,
                                    const float* dy, const float* lse, const float* obr, float* dsum, float* dq,
                                    float* dk, float* dv, const AttentionExtraGrads& g) {
  using namespace ops_body;
  check_attention(s, mask.view());
  const ResidentMask<Bk> dm(mask);
  const CallScratch<Bk, OpsTraits<Bk>> w(s, e);
  attention_backward_ex(ctx, s, dm, slopes, e, w.w, q, k, v, dy, lse, obr, dsum, dq, dk, dv, g);
}

template <Backend Bk>
void Ops<Bk>::attention_backward_ex(Context& ctx, const AttentionShape& s, const ResidentMask<Bk>& mask,
                                    const float* slopes, const AttentionExtras& e, const AttentionScratch& w,
                                    const float* q, const float* k, const float* v, const float* dy, const float* lse,
                                    const float* obr, float* dsum, float* dq, float* dk, float* dv,
                                    const AttentionExtraGrads& g) {
  using namespace ops_body;
  const kernels::MaskView& mv = mask.view();
  check_attention(s, mv);
  require(!e.damp || g.ddamp, "attention_backward: S-D damping given without its gradient ddamp");
  require(!e.runway_v || (g.dvs && g.dvl), "attention_backward: runway given without its gradients dvs, dvl");
  const AttentionPath path = ctx.attention();
  const kernels::HeadExtras x = head_extras<OpsTraits<Bk>>(s, e, w.runway_u);
  kernels::HeadExtraGrads xg;
  xg.ddamp = g.ddamp, xg.dvs = g.dvs, xg.dvl = g.dvl;
  if (e.runway_v && e.runway_B && g.dB) {  // no dB (analysis use): neither g nor its reduction
    require(w.runway_g != nullptr, "attention_backward: the bilinear runway needs AttentionScratch::runway_g");
    OpsTraits<Bk>::fill_zero(w.runway_g, sizeof(float) * s.B * s.H * s.T * s.dh);
    xg.g = w.runway_g;
  }
  if (s.dh <= 32)
    attention_backward_dh<OpsTraits<Bk>, 32>(path, s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
  else if (s.dh <= 64)
    attention_backward_dh<OpsTraits<Bk>, 64>(path, s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
  else
    attention_backward_dh<OpsTraits<Bk>, 128>(path, s, mv, slopes, x, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
  if (xg.g) {
    auto* kern = kernels::runway_dB_kernel<kRowBlock>;
    CF_LAUNCH(kern, dim3((s.dh * s.dh + kRowBlock - 1) / kRowBlock, s.H, s.B), dim3(kRowBlock), x, s.T, s.H, s.dh, xg.g,
              g.dB);
    OpsTraits<Bk>::check_launch("attention_backward (runway dB)");
  }
}

template <Backend Bk>
void Ops<Bk>::attention_backward(Context& ctx, const AttentionShape& s, const TiledMask& mask, const float* slopes,
                                 const float* q, const float* k, const float* v, const float* dy, const float* lse,
                                 const float* obr, float* dsum, float* dq, float* dk, float* dv) {
  using namespace ops_body;
  attention_backward_ex(ctx, s, mask, slopes, AttentionExtras{}, q, k, v, dy, lse, obr, dsum, dq, dk, dv,
                        AttentionExtraGrads{});
}

template <Backend Bk>
void Ops<Bk>::alibi_rollout_apply_left(Context& ctx, const double* slopes, const double* deltas, const double* weights,
                                       int H, const double* v, double* out, std::int64_t n, Affine* scratch) {
  using namespace ops_body;
  require(H >= 1 && n >= 1, "alibi_rollout_apply_left: H = ", H, ", n = ", n, " (need both >= 1)");
  const long long total = static_cast<long long>(H) * n;
  thrust::counting_iterator<long long> idx(0);
  thrust::transform(OpsTraits<Bk>::policy(), idx, idx + total, scratch, AlibiScanInput{slopes, deltas, v, n});
  auto keys = thrust::make_transform_iterator(idx, SegmentOf{n});
  thrust::inclusive_scan_by_key(OpsTraits<Bk>::policy(), keys, keys + total, scratch, scratch,
                                thrust::equal_to<long long>(), AffineCompose());
  thrust::transform(OpsTraits<Bk>::policy(), idx, idx + n, out, AlibiGather{slopes, deltas, weights, v, scratch, H, n});
}

template <Backend Bk>
void Ops<Bk>::alibi_rollout_apply_left_window(Context& ctx, const double* slopes, const double* deltas,
                                              const double* weights, int H, std::int64_t window, const double* v,
                                              double* out, std::int64_t n, Affine* scratch) {
  using namespace ops_body;
  require(H >= 1 && n >= 1, "alibi_rollout_apply_left_window: H = ", H, ", n = ", n, " (need both >= 1)");
  if (window <= 0 || window >= n) return alibi_rollout_apply_left(ctx, slopes, deltas, weights, H, v, out, n, scratch);
  const long long total = static_cast<long long>(H) * n;
  thrust::counting_iterator<long long> idx(0);
  if (window == 1) {  // every row reads only itself: out_j = v_j sum_h w_h
    thrust::transform(OpsTraits<Bk>::policy(), idx, idx + n, out,
                      WindowGather{slopes, deltas, weights, v, scratch, scratch, H, WindowRows{n, 0}});
    return;
  }
  const WindowRows w{n, window - 1};
  Affine *suf = scratch, *pre = scratch + total;
  thrust::transform(OpsTraits<Bk>::policy(), idx, idx + total, suf, WindowSufInput{slopes, deltas, v, w});
  auto skeys = thrust::make_transform_iterator(idx, WindowSufKey{w});
  thrust::inclusive_scan_by_key(OpsTraits<Bk>::policy(), skeys, skeys + total, suf, suf, thrust::equal_to<long long>(),
                                AffineCompose());
  thrust::transform(OpsTraits<Bk>::policy(), idx, idx + total, pre, WindowPreInput{slopes, deltas, v, w});
  auto pkeys = thrust::make_transform_iterator(idx, WindowPreKey{w});
  thrust::inclusive_scan_by_key(OpsTraits<Bk>::policy(), pkeys, pkeys + total, pre, pre, thrust::equal_to<long long>(),
                                AffineCompose());
  thrust::transform(OpsTraits<Bk>::policy(), idx, idx + n, out,
                    WindowGather{slopes, deltas, weights, v, suf, pre, H, w});
}

template <Backend Bk>
void Ops<Bk>::gemm_strided_batched(Context& ctx, int m, int n, int k, float alpha, const float* A, std::int64_t sa,
                                   const float* B, std::int64_t sb, float beta, float* C, std::int64_t sc, int batch) {
  require(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "gemm_strided_batched: negative size");
  OpsTraits<Bk>::gemm_strided_batched(ctx, m, n, k, alpha, A, sa, B, sb, beta, C, sc, batch);
}

template <Backend Bk>
void Ops<Bk>::sym_eig_batched(Context& ctx, const float* A, int n, int batch, float* w, float* V) {
  require(n >= 1 && batch >= 0, "sym_eig_batched: n = ", n, ", batch = ", batch);
  OpsTraits<Bk>::sym_eig_batched(ctx, A, n, batch, w, V);
}

}  // namespace cf::gpu
