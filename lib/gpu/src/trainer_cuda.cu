// DeviceTrainer<Backend::Cuda> (cf::gpu::cuda::Trainer): the device trainer on a CUDA device
// (issue 14): buffers in device memory, the kernels of cf/gpu/kernels and Thrust on the CUDA
// backend, SGEMM (or, under a precision policy, tensor-core GemmEx) from cuBLAS through the
// context's handle, the linear layers' fused epilogues from cuBLASLt (cf/gpu/gemm_epilogue.hpp).
// The body is the template of trainer_body.hpp, the source CI executes on the CPU through
// trainer_emu.cpp.
#include <cuda_runtime_api.h>
#include <thrust/execution_policy.h>

#include <cstdint>

#include "blas_cuda.hpp"
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

  /// cuBLAS / cuBLASLt through the context's handle (blas_cuda.hpp, shared with the analysis model).
  using Blas = cuda::Blas;
};

template class DeviceTrainer<Backend::Cuda>;

}  // namespace cf::gpu
