// cf::gpu::emu::Trainer: the device trainer with its buffers in host memory, the CUDA kernels
// emulated on the CPU, Thrust on OpenMP and SGEMM from OpenBLAS (issue 14). The body is
// trainer_impl.inc, the source trainer_cuda.cu compiles for the device; tests/gpu compare this
// build with the CPU trainer of lib/nn in every CI run.
#include <cblas.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/gpu/trainer.hpp"
#include "trainer_common.hpp"

namespace cf::gpu::emu {

// The backend primitives trainer_impl.inc expects (named: the trainer's members use them).
namespace trainer_backend {
inline auto policy() { return thrust::omp::par; }
void* device_alloc(std::size_t bytes) {
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}
void device_free(void* p) { std::free(p); }
void to_device(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void to_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void fill_zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

/// Row-major C = alpha op(A) op(B) + beta C (OpenBLAS).
struct Blas {
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) const {
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                B, ldb, beta, C, ldc);
  }
};
}  // namespace trainer_backend

#include "trainer_impl.inc"

}  // namespace cf::gpu::emu
