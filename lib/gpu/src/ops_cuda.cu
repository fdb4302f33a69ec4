// cf::gpu::cuda: the kernels of cf/gpu/kernels compiled by nvcc for sm_90, Thrust on the CUDA
// backend (device pointers). The bodies are ops_impl.inc, the same source the emulated CPU build
// runs in CI (ops_emu.cpp); device tests compare both on a machine with a GPU.
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
#include "cf/gpu/kernels/crossentropy.cuh"
#include "cf/gpu/kernels/layernorm.cuh"
#include "cf/gpu/ops.hpp"
#include "ops_common.hpp"

namespace cf::gpu::cuda {

namespace {
using namespace cf::gpu::detail;
inline auto policy() { return thrust::device; }

void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw Error(str(what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ") at ", file, ":", line));
}
#define CF_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

inline void check_launch(const char* what) { check(cudaGetLastError(), what, __FILE__, __LINE__); }

/// Device copies of a TiledMask's arrays (RAII).
class DeviceMask {
 public:
  explicit DeviceMask(const TiledMask& m) : v_(m.view()) {
    v_.row_ptr = upload(m.row_ptr);
    v_.iv_lo = upload(m.iv_lo);
    v_.iv_hi = upload(m.iv_hi);
    v_.qt_ptr = upload(m.qt_ptr);
    v_.qt_list = upload(m.qt_list);
    v_.kt_ptr = upload(m.kt_ptr);
    v_.kt_list = upload(m.kt_list);
  }
  ~DeviceMask() {
    for (int* p : owned_) cudaFree(p);
  }
  DeviceMask(const DeviceMask&) = delete;
  DeviceMask& operator=(const DeviceMask&) = delete;
  kernels::MaskView view() const { return v_; }

 private:
  const int* upload(const std::vector<int>& h) {
    int* d = nullptr;
    const std::size_t bytes = std::max<std::size_t>(1, h.size()) * sizeof(int);
    CF_CUDA_CHECK(cudaMalloc(&d, bytes));
    owned_.push_back(d);
    if (!h.empty()) CF_CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
    return d;
  }
  kernels::MaskView v_;
  std::vector<int*> owned_;
};

/// Zero-filled device scratch (RAII).
class Scratch {
 public:
  Scratch() = default;
  ~Scratch() { cudaFree(p_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void resize(std::size_t n) {
    cudaFree(p_);
    p_ = nullptr;
    CF_CUDA_CHECK(cudaMalloc(&p_, std::max<std::size_t>(1, n) * sizeof(float)));
    CF_CUDA_CHECK(cudaMemset(p_, 0, std::max<std::size_t>(1, n) * sizeof(float)));
  }
  float* data() { return p_; }

 private:
  float* p_ = nullptr;
};
}  // namespace

#include "ops_impl.inc"

namespace {
void check_status(int status, const char* what) {
  if (status != 0) throw Error(str(what, " failed with status ", status));
}
}  // namespace

void gemm_strided_batched(int m, int n, int k, float alpha, const float* A, std::int64_t sa, const float* B,
                          std::int64_t sb, float beta, float* C, std::int64_t sc, int batch) {
  require(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "gemm_strided_batched: negative size");
  cublasHandle_t h = nullptr;
  check_status(cublasCreate(&h), "cublasCreate");
  // row-major C = A B is column-major C^T = B^T A^T: swap the operands
  const cublasStatus_t st = cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, n, sb, A, k, sa,
                                                      &beta, C, n, sc, batch);
  cublasDestroy(h);
  check_status(st, "cublasSgemmStridedBatched");
}

void sym_eig_batched(const float* A, int n, int batch, float* w, float* V) {
  require(n >= 1 && batch >= 0, "sym_eig_batched: n = ", n, ", batch = ", batch);
  cusolverDnHandle_t h = nullptr;
  check_status(cusolverDnCreate(&h), "cusolverDnCreate");
  const std::int64_t nn = static_cast<std::int64_t>(n) * n;
  int lwork = 0;
  int* info = nullptr;
  float* work = nullptr;
  try {
    CF_CUDA_CHECK(cudaMemcpy(V, A, sizeof(float) * nn * batch, cudaMemcpyDeviceToDevice));
    // symmetric: row-major = column-major; eigenvectors come back as columns of the column-major
    // matrix, i.e. rows of the row-major one: transposed below to match the CPU twin
    check_status(cusolverDnSsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, V, n, w, &lwork),
                 "cusolverDnSsyevd_bufferSize");
    CF_CUDA_CHECK(cudaMalloc(&work, sizeof(float) * std::max(1, lwork)));
    CF_CUDA_CHECK(cudaMalloc(&info, sizeof(int)));
    for (int b = 0; b < batch; ++b)
      check_status(cusolverDnSsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, V + b * nn, n,
                                    w + static_cast<std::int64_t>(b) * n, work, lwork, info),
                   "cusolverDnSsyevd");
    thrust::counting_iterator<long long> idx(0);
    thrust::device_vector<float> tmp(V, V + nn * batch);
    const float* src = thrust::raw_pointer_cast(tmp.data());
    thrust::transform(policy(), idx, idx + nn * batch, V, TransposeGather{src, n});
  } catch (...) {
    cudaFree(work);
    cudaFree(info);
    cusolverDnDestroy(h);
    throw;
  }
  cudaFree(work);
  cudaFree(info);
  cusolverDnDestroy(h);
}

}  // namespace cf::gpu::cuda
