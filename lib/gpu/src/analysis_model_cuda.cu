// DeviceAnalysisModel<Backend::Cuda> (cf::gpu::cuda::AnalysisModel): the device analysis model on
// a CUDA device (issue 30): buffers in device memory, the functors on Thrust's CUDA backend, SGEMM
// (single and strided batched) from cuBLAS through the context's handle. The body is the template
// of analysis_model_body.hpp, the source CI executes on the CPU through analysis_model_emu.cpp;
// this build has been compiled, not run on a device (docs/gpu.md "What has run where").
#include <cuda_runtime_api.h>
#include <thrust/execution_policy.h>

#include "analysis_model_body.hpp"
#include "blas_cuda.hpp"

namespace cf::gpu {

namespace {
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(
        str("device analysis model: ", what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")"));
}
}  // namespace

/// The CUDA back end's primitives (the contract is in analysis_model_body.hpp).
template <>
struct AnalysisTraits<Backend::Cuda> {
  static constexpr Backend kBackend = Backend::Cuda;
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

  /// cuBLAS through the context's handle (blas_cuda.hpp, the trainer's): SGEMM, strided batches and
  /// the precision policies' tensor-core GEMMs (cublasGemmEx).
  using Blas = cuda::Blas;
};

template class DeviceAnalysisModel<Backend::Cuda>;

}  // namespace cf::gpu
