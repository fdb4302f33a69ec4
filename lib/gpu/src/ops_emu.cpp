// cf::gpu::emu: the CUDA kernels of cf/gpu/kernels executed on the CPU by the emulation header,
// the Thrust paths on the OpenMP backend (host pointers). Compiled by the host compiler in every
// build: this is what CI runs against the CPU oracles (tests/gpu).
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/scan.h>
#include <thrust/system/omp/execution_policy.h>
#include <thrust/transform.h>

#include "cf/core/error.hpp"
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/kernels/crossentropy.cuh"
#include "cf/gpu/kernels/layernorm.cuh"
#include "cf/gpu/ops.hpp"
#include "ops_common.hpp"

namespace cf::gpu::emu {

namespace {
using namespace cf::gpu::detail;
inline auto policy() { return thrust::omp::par; }
inline void check_launch(const char*) {}  // emulated launches throw on failure
struct DeviceMask {
  const TiledMask& m;
  explicit DeviceMask(const TiledMask& mm) : m(mm) {}
  kernels::MaskView view() const { return m.view(); }
};
}  // namespace

#include "ops_impl.inc"

}  // namespace cf::gpu::emu
