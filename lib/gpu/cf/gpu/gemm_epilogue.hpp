#pragma once
// GEMMs with fused epilogues (issue 31; docs/gpu.md "GEMM epilogues"): the device trainer's linear
// layers add their bias, apply the tanh GELU (keeping its input for the backward), multiply by
// GELU's derivative, or reduce the bias gradient inside the GEMM that produces the values, as
// cuBLASLt's epilogues do, instead of in separate passes over the output.
//  - cuda::gemm_epilogue: cuBLASLt (CUDA builds), one cached plan per shape; false when cuBLASLt
//    has no algorithm for it (the caller then runs the plain GEMM and the functors below);
//  - emu::gemm_epilogue: its twin on the CPU: OpenBLAS SGEMM, then the same functors as the
//    fallback, so the emulated fused path and the fallback agree bit for bit.
// Row-major throughout: R = alpha op(A) op(B) + beta C is [m, n] with leading dimension ldc.
// Plain types only: safe for nvcc.
#include <cstdint>

#include "cf/gpu/context.hpp"
#include "cf/gpu/functors.hpp"
#include "cf/gpu/precision.hpp"

namespace cf::gpu {

/// What a GEMM does to R before (and besides) writing C.
enum class GemmEpilogue {
  None,         ///< C = R
  Bias,         ///< C = R + bias[j], bias [n] per output column (cuBLASLt BIAS)
  GeluAuxBias,  ///< aux = R + bias[j] (bias may be null), C = gelu_tanh(aux); beta 0 (GELU_AUX_BIAS / GELU_AUX)
  DGelu,        ///< C = gelu_tanh'(aux) R, aux read; beta 0 (cuBLASLt DGELU)
  BiasGrad,     ///< C = R and bias_grad[i] = sum_k op(A)[i, k], bias_grad [m] written (cuBLASLt BGRADB:
                ///< the row-major A is cuBLASLt's column-major B)
};

/// The epilogue and its vectors (device memory on the CUDA build). aux is [m, n] with leading
/// dimension ldc, like C.
struct GemmEpilogueArgs {
  GemmEpilogue kind = GemmEpilogue::None;
  const float* bias = nullptr;
  float* aux = nullptr;
  float* bias_grad = nullptr;
};

namespace detail {

/// Element i of an [m, n] result stored with leading dimension ld.
CF_HD inline long long at(long long i, int n, int ld) { return i / n * ld + i % n; }

/// c[i] += bias[column] (Bias).
struct EpilogueBias {
  float* c;
  const float* bias;
  int n, ld;
  CF_HD void operator()(long long i) const { c[at(i, n, ld)] += bias[i % n]; }
};

/// aux[i] += bias[column] (when given), c[i] = gelu_tanh(aux[i]) (GeluAuxBias; aux holds R).
struct EpilogueGeluAux {
  float *c, *aux;
  const float* bias;
  int n, ld;
  CF_HD void operator()(long long i) const {
    const long long e = at(i, n, ld);
    if (bias) aux[e] += bias[i % n];
    c[e] = GeluForward()(aux[e]);
  }
};

/// c[i] = gelu_tanh'(aux[i]) c[i] (DGelu; c holds R).
struct EpilogueDGelu {
  float* c;
  const float* aux;
  int n, ld;
  CF_HD void operator()(long long i) const {
    const long long e = at(i, n, ld);
    c[e] = GeluBackward()(aux[e], c[e]);
  }
};

/// The GEMM's operands as stored: float32 (or TF32 values), or bfloat16 bits.
CF_HD inline float operand_value(float x) { return x; }
CF_HD inline float operand_value(std::uint16_t x) { return FromBf16()(x); }

/// bias_grad[i] = sum over k of op(A)[i, k], in increasing k, float32 (BiasGrad); one i per call.
template <class T>
struct EpilogueBiasGrad {
  float* bias_grad;
  const T* a;
  int k, lda;
  bool ta;
  CF_HD void operator()(long long i) const {
    float s = 0.0f;
    for (int j = 0; j < k; ++j) s += operand_value(ta ? a[static_cast<long long>(j) * lda + i] : a[i * lda + j]);
    bias_grad[i] = s;
  }
};

}  // namespace detail

namespace emu {
/// The CPU twin of cuda::gemm_epilogue (always runs): OpenBLAS SGEMM on float32 operands (TF32
/// values, or bfloat16 widened exactly by the caller), then the epilogue by the functors of
/// detail::. Throws cf::InvalidArgument for a GeluAuxBias or DGelu call with beta != 0 or no aux,
/// a Bias call without bias, a BiasGrad call without bias_grad.
void gemm_epilogue(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                   float beta, float* C, int ldc, const GemmEpilogueArgs& e);
}  // namespace emu

namespace cuda {
/// cuBLASLt: row-major C = epilogue(alpha op(A) op(B) + beta C) on the context's stream, inputs
/// as `in` says (Fp32 float, Tf32 float holding TF32 values, Bf16 bfloat16 bits), float32
/// accumulation and output. The plan (descriptors, layouts, the heuristic's algorithm) is made on
/// the first call of a shape and pointer alignment and reused; the context's cuBLASLt handle and
/// workspace are made on its first call. Returns false, having done nothing, when cuBLASLt has no
/// algorithm for the call (or its aux leading dimension is not a multiple of 8); throws cf::Error
/// when a call fails. CUDA builds only.
bool gemm_epilogue(Context& ctx, Precision in, bool ta, bool tb, int m, int n, int k, float alpha, const void* A,
                   int lda, const void* B, int ldb, float beta, float* C, int ldc, const GemmEpilogueArgs& e);
}  // namespace cuda

}  // namespace cf::gpu
