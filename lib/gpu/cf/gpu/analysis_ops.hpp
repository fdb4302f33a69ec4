#pragma once
// The analysers' device loops (issue 30; docs/gpu.md): the structured and dense rollout last row
// and the batched symmetric eigenvalues of the spectral cores, each in two builds with the same
// names and arguments, cf::gpu::emu (the emulated / OpenMP operations on the CPU: what CI runs)
// and cf::gpu::cuda (the same source, src/analysis_impl.inc, compiled by nvcc for sm_90).
#include <cstdint>
#include <functional>
#include <vector>

namespace cf::gpu {

namespace emu {
#include "cf/gpu/detail/analysis_decl.inc"
}  // namespace emu

namespace cuda {
#include "cf/gpu/detail/analysis_decl.inc"
}  // namespace cuda

}  // namespace cf::gpu
