// DeviceTrainer<Backend::Cuda> (cf::gpu::cuda::Trainer): the device trainer on a CUDA device
// (issue 14): buffers in device memory, the kernels of cf/gpu/kernels and Thrust on the CUDA
// backend, SGEMM (or, under a precision policy, tensor-core GemmEx) from cuBLAS through the
// context's handle, the linear layers' fused epilogues from cuBLASLt (cf/gpu/gemm_epilogue.hpp).
// The body is the template of trainer_body.hpp, the source CI executes on the CPU through
// trainer_emu.cpp.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <thrust/execution_policy.h>

#include <cstdint>

#include "cuda_resources.hpp"
#include "trainer_body.hpp"

namespace cf::gpu {

namespace {
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(str("device trainer: ", what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")"));
}
}  // namespace

/// The CUDA back end's primitives (the contract is in trainer_body.hpp).
template <>
struct TrainerTraits<Backend::Cuda> {
  static constexpr Backend kBackend = Backend::Cuda;
  /// On the context's stream, without the wait Thrust's default policy makes after every call
  /// (issue 31: about 300 waits a step before); calls returning a value still wait for it.
  static auto policy() { return thrust::cuda::par_nosync.on(cuda::kStream); }
  template <class Alloc>
  static auto policy(Alloc& a) {
    return thrust::cuda::par_nosync(a).on(cuda::kStream);
  }
  static void* device_alloc(std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  static void device_free(void* p) {
    if (p) cudaFree(p);
  }
  static void* pinned_alloc(std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMallocHost(&p, bytes), "cudaMallocHost");
    return p;
  }
  static void pinned_free(void* p) {
    if (p) cudaFreeHost(p);
  }
  static void to_device(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  static void to_device_async(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda::kStream), "cudaMemcpyAsync");
  }
  static void to_host(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }
  static void wait() { cuda_check(cudaStreamSynchronize(cuda::kStream), "cudaStreamSynchronize"); }
  static void fill_zero(void* p, std::size_t bytes) {
    cuda_check(cudaMemsetAsync(p, 0, bytes, cuda::kStream), "cudaMemsetAsync");
  }

  /// Row-major C = alpha op(A) op(B) + beta C through cuBLAS (column-major): C^T = op(B)^T op(A)^T,
  /// so the operands swap and keep their transpose flags. The context's handle (one per context).
  class Blas {
   public:
    explicit Blas(Context& ctx)
        : ctx_(&ctx), h_(cuda::cuda_resources(ctx).blas.get()), fused_(ctx.options().fused_epilogues) {}
    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
              float beta, float* C, int ldc) const {
      if (m == 0 || n == 0) return;
      const cublasStatus_t st = cublasSgemm(h_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                            &alpha, B, ldb, A, lda, &beta, C, ldc);
      if (st != CUBLAS_STATUS_SUCCESS) throw Error(str("device trainer: cublasSgemm failed with status ", int(st)));
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
    void gemm_ex(bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda, const void* B, int ldb,
                 cudaDataType in, cublasComputeType_t compute, float beta, float* C, int ldc) const {
      if (m == 0 || n == 0) return;
      const cublasStatus_t st =
          cublasGemmEx(h_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, B, in, ldb,
                       A, in, lda, &beta, C, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
      if (st != CUBLAS_STATUS_SUCCESS) throw Error(str("device trainer: cublasGemmEx failed with status ", int(st)));
    }
    Context* ctx_;
    cublasHandle_t h_ = nullptr;
    bool fused_;
  };
};

template class DeviceTrainer<Backend::Cuda>;

}  // namespace cf::gpu
