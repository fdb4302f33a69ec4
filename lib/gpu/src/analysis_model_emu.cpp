// DeviceAnalysisModel<Backend::Emulated> (cf::gpu::emu::AnalysisModel): the device analysis model
// with its buffers in host memory, the functors on Thrust / OpenMP and SGEMM from OpenBLAS (issue
// 30). The body is the template of analysis_model_body.hpp, which analysis_model_cuda.cu
// instantiates for the device; tests/gpu compare this build with lib/nn's forward in every CI run.
#include <cblas.h>
#include <thrust/system/omp/execution_policy.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "analysis_model_body.hpp"

namespace cf::gpu {

/// The emulated back end's primitives (the contract is in analysis_model_body.hpp).
template <>
struct AnalysisTraits<Backend::Emulated> {
  static auto policy() { return thrust::omp::par; }
  static void* device_alloc(std::size_t bytes) {
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  static void device_free(void* p) { std::free(p); }
  static void to_device(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void to_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void fill_zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }
  static void* host_alloc(std::size_t bytes) { return device_alloc(bytes); }
  static void host_free(void* p) { std::free(p); }
  /// The emulated device's memory is the host's: a staged chunk is read where it was staged.
  static constexpr bool kChunkInPlace = true;
  static const void* chunk_to_device(void*, const void* host, std::size_t) { return host; }

  /// Row-major C = alpha op(A) op(B) + beta C (OpenBLAS), single and in strided batches.
  struct Blas {
    explicit Blas(Context&) {}
    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
              float beta, float* C, int ldc) const {
      if (m == 0 || n == 0) return;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                  B, ldb, beta, C, ldc);
    }
    void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, long long sa,
                      const float* B, int ldb, long long sb, float beta, float* C, int ldc, long long sc,
                      int batch) const {
      for (int i = 0; i < batch; ++i)
        gemm(ta, tb, m, n, k, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
    }
  };
};

template class DeviceAnalysisModel<Backend::Emulated>;

}  // namespace cf::gpu
