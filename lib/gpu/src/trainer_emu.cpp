// DeviceTrainer<Backend::Emulated> (cf::gpu::emu::Trainer): the device trainer with its buffers in
// host memory, the CUDA kernels emulated on the CPU, Thrust on OpenMP and SGEMM from OpenBLAS
// (issue 14). The body is the template of trainer_body.hpp, which trainer_cuda.cu instantiates for
// the device; tests/gpu compare this build with the CPU trainer of lib/nn in every CI run.
#include <cblas.h>
#include <thrust/system/omp/execution_policy.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "trainer_body.hpp"

namespace cf::gpu {

/// The emulated back end's primitives (the contract is in trainer_body.hpp).
template <>
struct TrainerTraits<Backend::Emulated> {
  static constexpr Backend kBackend = Backend::Emulated;
  static auto policy() { return thrust::omp::par; }
  template <class Alloc>
  static auto policy(Alloc& a) {
    return thrust::omp::par(a);
  }
  static void* device_alloc(std::size_t bytes) {
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  static void device_free(void* p) { std::free(p); }
  static void* pinned_alloc(std::size_t bytes) { return device_alloc(bytes); }
  static void pinned_free(void* p) { std::free(p); }
  static void to_device(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void to_device_async(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void to_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void wait() {}  // every call above has finished when it returns
  static void fill_zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

  /// Row-major C = alpha op(A) op(B) + beta C (OpenBLAS).
  struct Blas {
    explicit Blas(Context&) {}
    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
              float beta, float* C, int ldc) const {
      if (m == 0 || n == 0) return;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                  B, ldb, beta, C, ldc);
    }
  };
};

template class DeviceTrainer<Backend::Emulated>;

}  // namespace cf::gpu
