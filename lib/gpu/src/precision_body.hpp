#pragma once
// The device trainer's GEMMs under a precision policy (cf/gpu/precision.hpp; docs/gpu.md
// "Precision policies"), one template for both back ends like trainer_body.hpp. The rounding is
// done here, by Thrust transforms with the functors of precision.hpp, in both builds; the back
// end's Blas then multiplies values that are already TF32 or bfloat16, so the CUDA build's tensor
// cores and the emulated build's OpenBLAS SGEMM see the same inputs (products exact in float32,
// accumulation in float32, only the summation order differs, as for SGEMM). Besides the trainer's
// TrainerTraits<Bk> contract, Tr::Blas provides (compile-checked below):
//   gemm_tf32(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)   float inputs holding TF32 values
//   gemm_bf16(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)   bfloat16 bits (std::uint16_t) inputs
// both row-major with float32 C, like gemm, and the fused-epilogue GEMM (cf/gpu/gemm_epilogue.hpp)
//   gemm_epilogue(in, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, e) -> bool
// with A and B as `in` stores them (float, or bfloat16 bits), false when it does not take the call
// (cuBLASLt has no algorithm; the emulated build with fused epilogues off): PrecisionGemm then runs
// the plain GEMM and the epilogue's functors, the fallback.
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cf/gpu/device_stats.hpp"
#include "cf/gpu/gemm_epilogue.hpp"
#include "cf/gpu/precision.hpp"

namespace cf::gpu::precision_body {

template <class Blas, class = void>
struct HasLowPrecisionGemms : std::false_type {};
template <class Blas>
struct HasLowPrecisionGemms<Blas,
                            std::void_t<decltype(std::declval<const Blas&>().gemm_tf32(
                                            false, false, 0, 0, 0, 1.0f, static_cast<const float*>(nullptr), 0,
                                            static_cast<const float*>(nullptr), 0, 0.0f, nullptr, 0)),
                                        decltype(std::declval<const Blas&>().gemm_bf16(
                                            false, false, 0, 0, 0, 1.0f, static_cast<const std::uint16_t*>(nullptr), 0,
                                            static_cast<const std::uint16_t*>(nullptr), 0, 0.0f, nullptr, 0))>>
    : std::true_type {};

template <class Blas, class = void>
struct HasGemmEpilogue : std::false_type {};
template <class Blas>
struct HasGemmEpilogue<Blas, std::void_t<decltype(bool(std::declval<const Blas&>().gemm_epilogue(
                                 Precision::Fp32, false, false, 0, 0, 0, 1.0f, static_cast<const void*>(nullptr), 0,
                                 static_cast<const void*>(nullptr), 0, 0.0f, nullptr, 0, GemmEpilogueArgs{})))>>
    : std::true_type {};

/// The GEMMs of one device trainer or analysis model in policy `prec`: the weights' low-precision
/// copy (made by refresh_weights after every upload and AdamW update, or the caller's array in the
/// policy's format: borrow_weights) and the scratch that activations are rounded into per GEMM.
/// Buf<T> is the owner's device array (reset(n), get(), size()). Under Fp32 it holds nothing and
/// gemm is the back end's SGEMM, unchanged.
template <class Tr, template <class> class Buf>
class PrecisionGemm {
 public:
  static_assert(HasLowPrecisionGemms<typename Tr::Blas>::value,
                "TrainerTraits<Bk>::Blas lacks gemm_tf32 / gemm_bf16 (precision_body.hpp)");
  static_assert(HasGemmEpilogue<typename Tr::Blas>::value,
                "TrainerTraits<Bk>::Blas lacks gemm_epilogue (precision_body.hpp)");

  /// `params`: the flat parameter array's length; `a_max`, `b_max`: the most elements a GEMM's
  /// first (activation or output gradient) and second (input activation) operand spans.
  PrecisionGemm(Precision prec, std::size_t params, std::size_t a_max, std::size_t b_max) : prec_(prec) {
    if (prec_ == Precision::Tf32) w32_.reset(params), a32_.reset(a_max), b32_.reset(b_max);
    if (prec_ == Precision::Bf16) w16_.reset(params), a16_.reset(a_max), b16_.reset(b_max);
    weights_ = prec_ == Precision::Bf16 ? static_cast<const void*>(w16_.get()) : w32_.get();
  }

  /// Round the parameters W [params] into the weights' copy (once per update).
  void refresh_weights(const float* W) {
    if (prec_ == Precision::Tf32) thrust::transform(Tr::policy(), W, W + w32_.size(), w32_.get(), RoundTf32());
    if (prec_ == Precision::Bf16) thrust::transform(Tr::policy(), W, W + w16_.size(), w16_.get(), ToBf16());
  }
  /// Read the weights from `w` (device memory the caller keeps: bfloat16 bits under Bf16, TF32
  /// values as float under Tf32) instead of a copy of their own (constructed with params 0): the
  /// analysis model's stored bf16 matrices are the GEMM operand as they are.
  void borrow_weights(const void* w) { weights_ = w; }
  /// Grow the activation scratch to at least a_max / b_max elements (the analysis model's batch
  /// shape changes between forward passes; the trainer sizes it once at construction).
  void reserve(std::size_t a_max, std::size_t b_max) {
    if (prec_ == Precision::Tf32) grow(a32_, a_max), grow(b32_, b_max);
    if (prec_ == Precision::Bf16) grow(a16_, a_max), grow(b16_, b_max);
  }

  Precision precision() const { return prec_; }

  /// Row-major C = alpha op(A) op(B) + beta C with A an activation and B the weight at offset
  /// `b_weight` of the parameter array W (B == W + b_weight; with borrowed weights B is not read,
  /// the operand is the borrowed array at b_weight), or an activation when b_weight < 0.
  void gemm(const typename Tr::Blas& blas, bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
            const float* B, int ldb, std::int64_t b_weight, float beta, float* C, int ldc) {
    if (m == 0 || n == 0) return;
    count_gemm(Tr::kBackend);
    const Operands o = round_operands(ta, tb, m, n, k, A, lda, B, ldb, b_weight);
    plain(blas, o, ta, tb, m, n, k, alpha, lda, ldb, beta, C, ldc);
  }

  /// gemm, then the epilogue e (cf/gpu/gemm_epilogue.hpp) on the same rounded inputs: fused by the
  /// back end (cuBLASLt, or its emulated twin) when it takes the call, else the plain GEMM and the
  /// epilogue's functors on the stream (the fallback; on the emulated build the same functors as
  /// the twin, so both give the same bits). Returns whether the back end fused it.
  bool gemm(const typename Tr::Blas& blas, bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
            const float* B, int ldb, std::int64_t b_weight, float beta, float* C, int ldc, const GemmEpilogueArgs& e) {
    if (e.kind == GemmEpilogue::None || m == 0 || n == 0) {
      gemm(blas, ta, tb, m, n, k, alpha, A, lda, B, ldb, b_weight, beta, C, ldc);
      return false;
    }
    count_gemm(Tr::kBackend);
    const Operands o = round_operands(ta, tb, m, n, k, A, lda, B, ldb, b_weight);
    if (blas.gemm_epilogue(prec_, ta, tb, m, n, k, alpha, o.a, lda, o.b, ldb, beta, C, ldc, e)) return true;
    plain(blas, o, ta, tb, m, n, k, alpha, lda, ldb, beta, e.kind == GemmEpilogue::GeluAuxBias ? e.aux : C, ldc);
    const auto first = thrust::counting_iterator<long long>(0);
    const auto mn = first + static_cast<long long>(m) * n;
    if (e.kind == GemmEpilogue::Bias)
      thrust::for_each(Tr::policy(), first, mn, detail::EpilogueBias{C, e.bias, n, ldc});
    if (e.kind == GemmEpilogue::GeluAuxBias)
      thrust::for_each(Tr::policy(), first, mn, detail::EpilogueGeluAux{C, e.aux, e.bias, n, ldc});
    if (e.kind == GemmEpilogue::DGelu)
      thrust::for_each(Tr::policy(), first, mn, detail::EpilogueDGelu{C, e.aux, n, ldc});
    if (e.kind == GemmEpilogue::BiasGrad) {
      if (prec_ == Precision::Bf16)
        thrust::for_each(
            Tr::policy(), first, first + m,
            detail::EpilogueBiasGrad<std::uint16_t>{e.bias_grad, static_cast<const std::uint16_t*>(o.a), k, lda, ta});
      else
        thrust::for_each(Tr::policy(), first, first + m,
                         detail::EpilogueBiasGrad<float>{e.bias_grad, static_cast<const float*>(o.a), k, lda, ta});
    }
    return false;
  }

 private:
  /// A GEMM's operands as the back end reads them: float (Fp32, TF32 values) or bfloat16 bits.
  struct Operands {
    const void *a, *b;
  };
  /// A rounded into the scratch, B the weights' copy or rounded into the scratch (Fp32: as given).
  Operands round_operands(bool ta, bool tb, int m, int n, int k, const float* A, int lda, const float* B, int ldb,
                          std::int64_t b_weight) {
    const std::size_t na = span(ta ? k : m, lda), nb = span(tb ? n : k, ldb);
    if (prec_ == Precision::Fp32) return Operands{A, B};
    if (prec_ == Precision::Tf32) {
      thrust::transform(Tr::policy(), A, A + na, a32_.get(), RoundTf32());
      return Operands{a32_.get(), operand(B, nb, b_weight, static_cast<const float*>(weights_), b32_, RoundTf32())};
    }
    thrust::transform(Tr::policy(), A, A + na, a16_.get(), ToBf16());
    return Operands{a16_.get(), operand(B, nb, b_weight, static_cast<const std::uint16_t*>(weights_), b16_, ToBf16())};
  }
  /// The back end's GEMM for prec_ on rounded operands.
  void plain(const typename Tr::Blas& blas, const Operands& o, bool ta, bool tb, int m, int n, int k, float alpha,
             int lda, int ldb, float beta, float* C, int ldc) const {
    if (prec_ == Precision::Fp32)
      blas.gemm(ta, tb, m, n, k, alpha, static_cast<const float*>(o.a), lda, static_cast<const float*>(o.b), ldb, beta,
                C, ldc);
    else if (prec_ == Precision::Tf32)
      blas.gemm_tf32(ta, tb, m, n, k, alpha, static_cast<const float*>(o.a), lda, static_cast<const float*>(o.b), ldb,
                     beta, C, ldc);
    else
      blas.gemm_bf16(ta, tb, m, n, k, alpha, static_cast<const std::uint16_t*>(o.a), lda,
                     static_cast<const std::uint16_t*>(o.b), ldb, beta, C, ldc);
  }
  static std::size_t span(int rows, int ld) { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(ld); }
  template <class T>
  static void grow(Buf<T>& b, std::size_t n) {
    if (n > b.size()) b.reset(n);
  }
  /// B in the low format: the weights' copy at its offset, or B rounded into the scratch.
  template <class T, class Round>
  static const T* operand(const float* B, std::size_t nb, std::int64_t b_weight, const T* weights,
                          const Buf<T>& scratch, Round round) {
    if (b_weight >= 0) return weights + b_weight;
    thrust::transform(Tr::policy(), B, B + nb, scratch.get(), round);
    return scratch.get();
  }

  Precision prec_;
  const void* weights_ = nullptr;  ///< the weights in the policy's format: w32_ / w16_, or borrowed
  Buf<float> w32_, a32_, b32_;
  Buf<std::uint16_t> w16_, a16_, b16_;
};

}  // namespace cf::gpu::precision_body
