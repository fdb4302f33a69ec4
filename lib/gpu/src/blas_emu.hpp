#pragma once
// The emulated back end's GEMMs (OpenBLAS), shared by the device trainer (trainer_emu.cpp) and the
// device analysis model (analysis_model_emu.cpp): SGEMM, its strided batches, the precision
// policies' GEMMs on already rounded operands (precision_body.hpp) and cuBLASLt's epilogue twin.
// The twin of blas_cuda.hpp.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cf/gpu/context.hpp"
#include "cf/gpu/gemm_epilogue.hpp"
#include "cf/gpu/precision.hpp"

namespace cf::gpu::emu {

/// Row-major C = alpha op(A) op(B) + beta C (OpenBLAS).
class Blas {
 public:
  explicit Blas(Context& ctx) : fused_(ctx.options().fused_epilogues) {}
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) const {
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                B, ldb, beta, C, ldc);
  }
  /// `batch` GEMMs, the i-th on A + i sa, B + i sb, C + i sc.
  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, long long sa,
                    const float* B, int ldb, long long sb, float beta, float* C, int ldc, long long sc,
                    int batch) const {
    for (int i = 0; i < batch; ++i)
      gemm(ta, tb, m, n, k, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
  }
  /// TF32 inputs (already rounded, precision_body.hpp): their products are exact in float32, so
  /// SGEMM is the tensor cores' arithmetic up to the summation order.
  void gemm_tf32(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                 float beta, float* C, int ldc) const {
    gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  /// bfloat16 inputs widened to float32 (exact), then SGEMM (products exact, float32 sums).
  void gemm_bf16(bool ta, bool tb, int m, int n, int k, float alpha, const std::uint16_t* A, int lda,
                 const std::uint16_t* B, int ldb, float beta, float* C, int ldc) const {
    if (m == 0 || n == 0) return;
    widen(a_, A, static_cast<std::size_t>(ta ? k : m) * lda);
    widen(b_, B, static_cast<std::size_t>(tb ? n : k) * ldb);
    gemm(ta, tb, m, n, k, alpha, a_.data(), lda, b_.data(), ldb, beta, C, ldc);
  }

  /// cuBLASLt's twin (emu::gemm_epilogue) on the operands as float32 (bfloat16 widened);
  /// declines when the context turns fused epilogues off, as cuBLASLt declines a shape.
  bool gemm_epilogue(Precision in, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
                     const void* B, int ldb, float beta, float* C, int ldc, const GemmEpilogueArgs& e) const {
    if (!fused_) return false;
    const float* a = static_cast<const float*>(A);
    const float* b = static_cast<const float*>(B);
    if (in == Precision::Bf16) {
      widen(a_, static_cast<const std::uint16_t*>(A), static_cast<std::size_t>(ta ? k : m) * lda);
      widen(b_, static_cast<const std::uint16_t*>(B), static_cast<std::size_t>(tb ? n : k) * ldb);
      a = a_.data(), b = b_.data();
    }
    emu::gemm_epilogue(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, C, ldc, e);
    return true;
  }

 private:
  static void widen(std::vector<float>& out, const std::uint16_t* in, std::size_t n) {
    out.resize(n);
    std::transform(in, in + n, out.begin(), FromBf16());
  }
  bool fused_;
  mutable std::vector<float> a_, b_;  // the widened operands (host memory: this build's device)
};

}  // namespace cf::gpu::emu
