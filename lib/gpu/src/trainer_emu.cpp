// DeviceTrainer<Backend::Emulated> (cf::gpu::emu::Trainer): the device trainer with its buffers in
// host memory, the CUDA kernels emulated on the CPU, Thrust on OpenMP and SGEMM from OpenBLAS
// (issue 14). The body is the template of trainer_body.hpp, which trainer_cuda.cu instantiates for
// the device; tests/gpu compare this build with the CPU trainer of lib/nn in every CI run.
#include <thrust/system/omp/execution_policy.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "blas_emu.hpp"
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

  /// OpenBLAS (blas_emu.hpp, shared with the analysis model).
  using Blas = emu::Blas;
};

template class DeviceTrainer<Backend::Emulated>;

namespace emu {

template <class T>
using Buf = trainer_body::DBuf<TrainerTraits<Backend::Emulated>, T>;

void precision_gemm(Precision p, bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
                    const float* B, int ldb, bool b_is_weight, float beta, float* C, int ldc) {
  using Tr = TrainerTraits<Backend::Emulated>;
  const std::size_t na = static_cast<std::size_t>(ta ? k : m) * lda, nb = static_cast<std::size_t>(tb ? n : k) * ldb;
  Context ctx;
  const Tr::Blas blas(ctx);
  // B is the whole "parameter array" when it is a weight, at offset 0
  precision_body::PrecisionGemm<Tr, Buf> g(p, b_is_weight ? nb : 0, na, b_is_weight ? 0 : nb);
  if (b_is_weight) g.refresh_weights(B);
  g.gemm(blas, ta, tb, m, n, k, alpha, A, lda, B, ldb, b_is_weight ? 0 : -1, beta, C, ldc);
}

}  // namespace emu

}  // namespace cf::gpu
