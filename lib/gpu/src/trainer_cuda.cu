// cf::gpu::cuda::Trainer: the device trainer on a CUDA device (issue 14): buffers in device
// memory, the kernels of cf/gpu/kernels and Thrust on the CUDA backend, SGEMM from cuBLAS. The
// body is trainer_impl.inc, the source CI executes on the CPU through trainer_emu.cpp.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/gpu/trainer.hpp"
#include "trainer_common.hpp"

namespace cf::gpu::cuda {

// The backend primitives trainer_impl.inc expects (named: the trainer's members use them).
namespace trainer_backend {
inline auto policy() { return thrust::device; }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(str("device trainer: ", what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")"));
}
void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
void device_free(void* p) {
  if (p) cudaFree(p);
}
void to_device(void* dst, const void* src, std::size_t bytes) {
  cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}
void to_host(void* dst, const void* src, std::size_t bytes) {
  cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}
void fill_zero(void* p, std::size_t bytes) { cuda_check(cudaMemset(p, 0, bytes), "cudaMemset"); }

/// Row-major C = alpha op(A) op(B) + beta C through cuBLAS (column-major): C^T = op(B)^T op(A)^T,
/// so the operands swap and keep their transpose flags. One handle per trainer.
class Blas {
 public:
  Blas() {
    if (cublasCreate(&h_) != CUBLAS_STATUS_SUCCESS) throw Error("device trainer: cublasCreate failed");
  }
  ~Blas() { cublasDestroy(h_); }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) const {
    if (m == 0 || n == 0) return;
    const cublasStatus_t st = cublasSgemm(h_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                          &alpha, B, ldb, A, lda, &beta, C, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) throw Error(str("device trainer: cublasSgemm failed with status ", int(st)));
  }

 private:
  cublasHandle_t h_ = nullptr;
};
}  // namespace trainer_backend

#include "trainer_impl.inc"

}  // namespace cf::gpu::cuda
