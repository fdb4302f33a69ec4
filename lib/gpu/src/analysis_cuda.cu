// cf::gpu::cuda analysis loops (cf/gpu/analysis_ops.hpp): src/analysis_impl.inc compiled by nvcc for
// sm_90 on device memory, Thrust on CUDA, the cuda:: operations (cuSOLVER for the eigenvalues). The
// same body runs emulated in CI (analysis_emu.cpp); this build has been compiled, not run on a device
// (docs/gpu.md "What has run where").
#include <cuda_runtime_api.h>
#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_ops.hpp"
#include "cf/gpu/functors.hpp"
#include "cf/gpu/ops.hpp"

namespace cf::gpu::cuda {

namespace {
inline auto policy() { return thrust::device; }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(str(what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")"));
}

/// n elements of device memory (RAII; at least one element, so that get() is never null).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    cuda_check(cudaMalloc(&p_, sizeof(T) * std::max<std::size_t>(1, n)), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() { return p_; }
  void upload(const T* host) {
    cuda_check(cudaMemcpy(p_, host, sizeof(T) * n_, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  void download(T* host) const {
    cuda_check(cudaMemcpy(host, p_, sizeof(T) * n_, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};
}  // namespace

#include "analysis_impl.inc"

}  // namespace cf::gpu::cuda
