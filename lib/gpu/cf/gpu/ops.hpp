#pragma once
// The heavy operations of the trainer and analysers with two implementations of one interface
// (issue 14; STYLE.md habit 7): namespace cf::gpu::emu runs the CUDA kernels on the CPU through
// the emulation header and the Thrust paths on OpenMP (host pointers; always built, tested in
// CI), namespace cf::gpu::cuda runs the same kernel sources compiled by nvcc (device pointers;
// built when CUDA is on, run only on a machine with a device). The CPU oracle of each is the
// lib/nn / lib/rollout function named in its doc.
#include <cstdint>

#include "cf/gpu/attention.hpp"
#include "cf/gpu/functors.hpp"

namespace cf::gpu {

namespace emu {
#include "cf/gpu/detail/ops_decl.inc"
}  // namespace emu

namespace cuda {
#include "cf/gpu/detail/ops_decl.inc"
}  // namespace cuda

}  // namespace cf::gpu
