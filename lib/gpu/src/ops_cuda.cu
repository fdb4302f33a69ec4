// Ops<Backend::Cuda> (cf::gpu::cuda): the kernels of cf/gpu/kernels compiled by nvcc for sm_90,
// Thrust on the CUDA backend (device pointers), cuBLAS / cuSOLVER through the context's handles.
// The bodies are the templates of ops_body.hpp, the same source the emulated CPU build runs in CI
// (ops_emu.cpp); device tests compare both on a machine with a GPU.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform.h>

#include <algorithm>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/ops.hpp"
#include "cuda_resources.hpp"
#include "ops_body.hpp"

namespace cf::gpu::cuda {

namespace {
void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw Error(str(what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ") at ", file, ":", line));
}
#define CF_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

inline void check_launch(const char* what) { check(cudaGetLastError(), what, __FILE__, __LINE__); }

/// n zero-filled elements of T on the device (RAII).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) { resize(n); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void resize(std::size_t n) {
    cudaFree(p_);
    p_ = nullptr;
    const std::size_t bytes = std::max<std::size_t>(1, n) * sizeof(T);
    CF_CUDA_CHECK(cudaMalloc(&p_, bytes));
    CF_CUDA_CHECK(cudaMemsetAsync(p_, 0, bytes, kStream));
  }
  T* data() { return p_; }

 private:
  T* p_ = nullptr;
};

void check_status(int status, const char* what) {
  if (status != 0) throw Error(str(what, " failed with status ", status));
}
}  // namespace

CudaResources::CudaResources(int device) {
  CF_CUDA_CHECK(cudaSetDevice(device));
  cublasHandle_t b = nullptr;
  check_status(cublasCreate(&b), "cublasCreate");
  blas.reset(b);
  check_status(cublasSetStream(b, stream), "cublasSetStream");
  cusolverDnHandle_t s = nullptr;
  check_status(cusolverDnCreate(&s), "cusolverDnCreate");
  solver.reset(s);
  check_status(cusolverDnSetStream(s, stream), "cusolverDnSetStream");
}

CudaResources& cuda_resources(Context& ctx) {
  return ctx.resources<CudaResources>([&] { return std::make_unique<CudaResources>(ctx.options().device); });
}

}  // namespace cf::gpu::cuda

namespace cf::gpu {

/// The CUDA back end's primitives (the contract is in ops_body.hpp).
template <>
struct OpsTraits<Backend::Cuda> {
  /// The context's stream without a synchronisation after each call (issue 31; calls returning a
  /// value to the host still wait for it).
  static auto policy() { return thrust::cuda::par_nosync.on(cuda::kStream); }
  static void check_launch(const char* what) { cuda::check_launch(what); }
  static void* alloc(std::size_t bytes) {
    using cuda::check;
    void* p = nullptr;
    CF_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  static void release(void* p) { cudaFree(p); }
  static void upload(void* dst, const void* src, std::size_t bytes) {
    using cuda::check;
    CF_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  static void fill_zero(void* p, std::size_t bytes) {
    using cuda::check;
    CF_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda::kStream));
  }
  using Scratch = cuda::DeviceArray<float>;

  /// cublasSgemmStridedBatched on the context's handle.
  static void gemm_strided_batched(Context& ctx, int m, int n, int k, float alpha, const float* A, std::int64_t sa,
                                   const float* B, std::int64_t sb, float beta, float* C, std::int64_t sc, int batch) {
    // row-major C = A B is column-major C^T = B^T A^T: swap the operands
    cuda::check_status(cublasSgemmStridedBatched(cuda::cuda_resources(ctx).blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, m,
                                                 k, &alpha, B, n, sb, A, k, sa, &beta, C, n, sc, batch),
                       "cublasSgemmStridedBatched");
  }

  /// cusolverDnSsyevd per matrix on the context's handle (syevjBatched is limited to n <= 32).
  static void sym_eig_batched(Context& ctx, const float* A, int n, int batch, float* w, float* V) {
    using namespace cuda;
    cusolverDnHandle_t h = cuda_resources(ctx).solver.get();
    const std::int64_t nn = static_cast<std::int64_t>(n) * n;
    CF_CUDA_CHECK(cudaMemcpy(V, A, sizeof(float) * nn * batch, cudaMemcpyDeviceToDevice));
    // symmetric: row-major = column-major; eigenvectors come back as columns of the column-major
    // matrix, i.e. rows of the row-major one: transposed below to match the CPU twin
    int lwork = 0;
    check_status(cusolverDnSsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, V, n, w, &lwork),
                 "cusolverDnSsyevd_bufferSize");
    DeviceArray<float> work(static_cast<std::size_t>(std::max(1, lwork)));
    DeviceArray<int> info(1);
    for (int b = 0; b < batch; ++b)
      check_status(cusolverDnSsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, V + b * nn, n,
                                    w + static_cast<std::int64_t>(b) * n, work.data(), lwork, info.data()),
                   "cusolverDnSsyevd");
    thrust::counting_iterator<long long> idx(0);
    thrust::device_vector<float> tmp(V, V + nn * batch);
    const float* src = thrust::raw_pointer_cast(tmp.data());
    thrust::transform(thrust::device, idx, idx + nn * batch, V, detail::TransposeGather{src, n});
  }
};

static_assert(ops_body::IsOpsTraits<OpsTraits<Backend::Cuda>>::value, "OpsTraits<Cuda> breaks the contract");

template struct Ops<Backend::Cuda>;
template class ResidentMask<Backend::Cuda>;

}  // namespace cf::gpu
