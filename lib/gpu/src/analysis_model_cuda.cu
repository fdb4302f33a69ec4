// DeviceAnalysisModel<Backend::Cuda> (cf::gpu::cuda::AnalysisModel): the device analysis model on
// a CUDA device (issue 30): buffers in device memory, the functors on Thrust's CUDA backend, SGEMM
// (single and strided batched) from cuBLAS through the context's handle. The body is the template
// of analysis_model_body.hpp, the source CI executes on the CPU through analysis_model_emu.cpp;
// this build has been compiled, not run on a device (docs/gpu.md "What has run where").
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <thrust/execution_policy.h>

#include "analysis_model_body.hpp"
#include "cuda_resources.hpp"

namespace cf::gpu {

namespace {
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(
        str("device analysis model: ", what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")"));
}
void blas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw Error(str("device analysis model: ", what, " failed with status ", int(st)));
}
}  // namespace

/// The CUDA back end's primitives (the contract is in analysis_model_body.hpp).
template <>
struct AnalysisTraits<Backend::Cuda> {
  static auto policy() { return thrust::device; }
  static void* device_alloc(std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  static void device_free(void* p) {
    if (p) cudaFree(p);
  }
  static void to_device(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  static void to_host(void* dst, const void* src, std::size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }
  static void fill_zero(void* p, std::size_t bytes) { cuda_check(cudaMemset(p, 0, bytes), "cudaMemset"); }
  static void* host_alloc(std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMallocHost(&p, bytes), "cudaMallocHost (the pinned staging buffer)");
    return p;
  }
  static void host_free(void* p) {
    if (p) cudaFreeHost(p);
  }
  /// The staged chunk (pinned) copied asynchronously into the device scratch on the legacy default
  /// stream, where the kernels run, and waited for: the caller reuses the staging buffer.
  static constexpr bool kChunkInPlace = false;
  static const void* chunk_to_device(void* scratch, const void* host, std::size_t bytes) {
    cuda_check(cudaMemcpyAsync(scratch, host, bytes, cudaMemcpyHostToDevice, cudaStreamLegacy),
               "cudaMemcpyAsync of a staged weight chunk");
    cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize after a staged weight chunk");
    return scratch;
  }

  /// Row-major C = alpha op(A) op(B) + beta C through cuBLAS (column-major): C^T = op(B)^T op(A)^T,
  /// so the operands swap and keep their transpose flags. The context's handle (one per context).
  class Blas {
   public:
    explicit Blas(Context& ctx) : h_(cuda::cuda_resources(ctx).blas.get()) {}
    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
              float beta, float* C, int ldc) const {
      if (m == 0 || n == 0) return;
      blas_check(cublasSgemm(h_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, B,
                             ldb, A, lda, &beta, C, ldc),
                 "cublasSgemm");
    }
    void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, long long sa,
                      const float* B, int ldb, long long sb, float beta, float* C, int ldc, long long sc,
                      int batch) const {
      if (m == 0 || n == 0 || batch == 0) return;
      blas_check(cublasSgemmStridedBatched(h_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                           &alpha, B, ldb, sb, A, lda, sa, &beta, C, ldc, sc, batch),
                 "cublasSgemmStridedBatched");
    }

   private:
    cublasHandle_t h_ = nullptr;
  };
};

template class DeviceAnalysisModel<Backend::Cuda>;

}  // namespace cf::gpu
