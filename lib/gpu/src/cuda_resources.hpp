#pragma once
// The CUDA back end's resources of one cf::gpu::Context (cf/gpu/context.hpp): created once, on
// the context's first CUDA call, and destroyed with the context (RAII; before, a cuBLAS handle was
// created per GEMM call and cuSOLVER's was freed by hand). nvcc translation units only.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <memory>
#include <type_traits>

#include "cf/gpu/context.hpp"

namespace cf::gpu::cuda {

struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
struct CusolverDestroy {
  void operator()(cusolverDnHandle_t h) const { cusolverDnDestroy(h); }
};

/// One context's stream and library handles. The stream is the legacy default stream, where the
/// kernels (CF_LAUNCH) and the Thrust calls of the context run: the handles are bound to it, so
/// every operation of a context is ordered after the previous one.
struct CudaResources final : Context::Resources {
  explicit CudaResources(int device);
  cudaStream_t stream = nullptr;
  std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDestroy> blas;
  std::unique_ptr<std::remove_pointer_t<cusolverDnHandle_t>, CusolverDestroy> solver;
};

/// The resources of `ctx`, created on the first call (cudaSetDevice(ctx.options().device), then
/// the handles). Throws cf::Error when the CUDA runtime or a library refuses.
CudaResources& cuda_resources(Context& ctx);

}  // namespace cf::gpu::cuda
