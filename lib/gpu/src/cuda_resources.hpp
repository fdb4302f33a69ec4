#pragma once
// The CUDA back end's resources of one cf::gpu::Context (cf/gpu/context.hpp): created once, on
// the context's first CUDA call, and destroyed with the context (RAII; before, a cuBLAS handle was
// created per GEMM call and cuSOLVER's was freed by hand). nvcc translation units only.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <memory>
#include <mutex>
#include <type_traits>

#include "cf/gpu/context.hpp"

namespace cf::gpu::cuda {

struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
struct CusolverDestroy {
  void operator()(cusolverDnHandle_t h) const { cusolverDnDestroy(h); }
};

/// The one stream of every context's work: the legacy default stream, where the kernels run
/// (CF_LAUNCH names no stream), the Thrust calls (their policies' .on(kStream)), the asynchronous
/// copies and memsets, and the library handles' calls; so every operation is ordered after the
/// previous one and a kernel never needs a host wait before the next.
inline constexpr cudaStream_t kStream = nullptr;

/// The context's cuBLASLt handle, workspace and plans (gemm_epilogue_cuda.cpp).
struct LtState;
struct LtStateDelete {
  void operator()(LtState* s) const;
};

/// One context's stream (kStream) and library handles bound to it.
struct CudaResources final : Context::Resources {
  explicit CudaResources(int device);
  cudaStream_t stream = kStream;
  std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDestroy> blas;
  std::unique_ptr<std::remove_pointer_t<cusolverDnHandle_t>, CusolverDestroy> solver;
  /// Made on the first fused-epilogue GEMM (cuda::gemm_epilogue), not here: a context that never
  /// runs one never loads cuBLASLt.
  std::once_flag lt_once;
  std::unique_ptr<LtState, LtStateDelete> lt;
};

/// The resources of `ctx`, created on the first call (cudaSetDevice(ctx.options().device), then
/// the handles). Throws cf::Error when the CUDA runtime or a library refuses.
CudaResources& cuda_resources(Context& ctx);

}  // namespace cf::gpu::cuda
