// cf::gpu::emu analysis loops (cf/gpu/analysis_ops.hpp): src/analysis_impl.inc on host memory,
// Thrust on OpenMP, the emulated operations of cf::gpu::emu. What CI runs against the CPU
// analysers (tests/gpu: the whole tools with CF_GPU_EMULATE=1 --device cuda against --device cpu).
#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_ops.hpp"
#include "cf/gpu/functors.hpp"
#include "cf/gpu/ops.hpp"

namespace cf::gpu::emu {

namespace {
inline auto policy() { return thrust::omp::par; }

/// n elements of the emulated device's memory: host memory.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : v_(n) {}
  T* get() { return v_.data(); }
  void upload(const T* host) { std::copy(host, host + v_.size(), v_.begin()); }
  void download(T* host) const { std::copy(v_.begin(), v_.end(), host); }

 private:
  std::vector<T> v_;
};
}  // namespace

#include "analysis_impl.inc"

}  // namespace cf::gpu::emu
