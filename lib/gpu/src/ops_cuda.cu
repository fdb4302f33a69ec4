// cf::gpu::cuda: the kernels of cf/gpu/kernels compiled by nvcc for sm_90, Thrust on the CUDA
// backend (device pointers). The bodies are ops_impl.inc, the same source the emulated CPU build
// runs in CI (ops_emu.cpp); device tests compare both on a machine with a GPU.
#include <cuda_runtime_api.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform.h>

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
  if (e != cudaSuccess) throw Error(str(what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ") at ", file, ":", line));
}
#define CF_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

inline void check_launch(const char* what) {
  check(cudaGetLastError(), what, __FILE__, __LINE__);
}

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
}  // namespace

#include "ops_impl.inc"

}  // namespace cf::gpu::cuda
