// DeviceAnalysisModel<Backend::Emulated> (cf::gpu::emu::AnalysisModel): the device analysis model
// with its buffers in host memory, the functors on Thrust / OpenMP and SGEMM from OpenBLAS (issue
// 30). The body is the template of analysis_model_body.hpp, which analysis_model_cuda.cu
// instantiates for the device; tests/gpu compare this build with lib/nn's forward in every CI run.
#include <thrust/system/omp/execution_policy.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "analysis_model_body.hpp"
#include "blas_emu.hpp"

namespace cf::gpu {

/// The emulated back end's primitives (the contract is in analysis_model_body.hpp).
template <>
struct AnalysisTraits<Backend::Emulated> {
  static constexpr Backend kBackend = Backend::Emulated;
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

  /// OpenBLAS (blas_emu.hpp, the trainer's): SGEMM, strided batches and the precision policies' GEMMs.
  using Blas = emu::Blas;
};

template class DeviceAnalysisModel<Backend::Emulated>;

}  // namespace cf::gpu
