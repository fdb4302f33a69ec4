#pragma once
// The CUDA back end's GEMMs (cuBLAS through the context's handle, cuBLASLt for the epilogues),
// shared by the device trainer (trainer_cuda.cu) and the device analysis model
// (analysis_model_cuda.cu): SGEMM, its strided batches, the precision policies' tensor-core GEMMs
// on already rounded operands (precision_body.hpp) and the fused epilogues. The twin of
// blas_emu.hpp; row-major C = alpha op(A) op(B) + beta C through column-major cuBLAS:
// C^T = op(B)^T op(A)^T, so the operands swap and keep their transpose flags.
#include <cublas_v2.h>

#include <cstdint>

#include "cf/core/error.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/gemm_epilogue.hpp"
#include "cf/gpu/precision.hpp"
#include "cuda_resources.hpp"

namespace cf::gpu::cuda {

class Blas {
 public:
  explicit Blas(Context& ctx) : ctx_(&ctx), h_(cuda_resources(ctx).blas.get()), fused_(ctx.options().fused_epilogues) {}
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) const {
    if (m == 0 || n == 0) return;
    check(cublasSgemm(h_, op(tb), op(ta), n, m, k, &alpha, B, ldb, A, lda, &beta, C, ldc), "cublasSgemm");
  }
  /// `batch` GEMMs, the i-th on A + i sa, B + i sb, C + i sc.
  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, long long sa,
                    const float* B, int ldb, long long sb, float beta, float* C, int ldc, long long sc,
                    int batch) const {
    if (m == 0 || n == 0 || batch == 0) return;
    check(cublasSgemmStridedBatched(h_, op(tb), op(ta), n, m, k, &alpha, B, ldb, sb, A, lda, sa, &beta, C, ldc, sc,
                                    batch),
          "cublasSgemmStridedBatched");
  }
  /// TF32 inputs (rounded to nearest even by precision_body.hpp, so the tensor cores' own
  /// conversion is exact), float32 accumulation and output.
  void gemm_tf32(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                 float beta, float* C, int ldc) const {
    gemm_ex(ta, tb, m, n, k, alpha, A, lda, B, ldb, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, beta, C, ldc);
  }
  /// bfloat16 inputs, float32 accumulation and output.
  void gemm_bf16(bool ta, bool tb, int m, int n, int k, float alpha, const std::uint16_t* A, int lda,
                 const std::uint16_t* B, int ldb, float beta, float* C, int ldc) const {
    gemm_ex(ta, tb, m, n, k, alpha, A, lda, B, ldb, CUDA_R_16BF, CUBLAS_COMPUTE_32F, beta, C, ldc);
  }

  /// cuBLASLt with the epilogue (cf/gpu/gemm_epilogue.hpp); false where it has no algorithm
  /// for the call or the context turns fused epilogues off.
  bool gemm_epilogue(Precision in, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
                     const void* B, int ldb, float beta, float* C, int ldc, const GemmEpilogueArgs& e) const {
    return fused_ && cuda::gemm_epilogue(*ctx_, in, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, e);
  }

 private:
  static cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }
  static void check(cublasStatus_t st, const char* what) {
    if (st != CUBLAS_STATUS_SUCCESS) throw Error(str("cuBLAS: ", what, " failed with status ", int(st)));
  }
  void gemm_ex(bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda, const void* B, int ldb,
               cudaDataType in, cublasComputeType_t compute, float beta, float* C, int ldc) const {
    if (m == 0 || n == 0) return;
    check(cublasGemmEx(h_, op(tb), op(ta), n, m, k, &alpha, B, in, ldb, A, in, lda, &beta, C, CUDA_R_32F, ldc, compute,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }
  Context* ctx_;
  cublasHandle_t h_ = nullptr;
  bool fused_;
};

}  // namespace cf::gpu::cuda
