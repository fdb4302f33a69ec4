#pragma once
// The device trainer's two builds (issue 14): cf::gpu::emu::Trainer runs on the CPU (emulated
// kernels, Thrust on OpenMP, OpenBLAS; always built and tested in CI), cf::gpu::cuda::Trainer on a
// CUDA device (built when CUDA is on). Plain types only, safe for nvcc. The host-side entry points
// (plans from a cf::nn config, the trainer backend of `train --device cuda`) are in
// cf/gpu/train_step.hpp; docs/gpu.md "Device trainer".
#include <cstdint>

#include "cf/gpu/functors.hpp"
#include "cf/gpu/train_plan.hpp"

namespace cf::gpu {

namespace emu {
#include "cf/gpu/detail/trainer_decl.inc"
}  // namespace emu

namespace cuda {
#include "cf/gpu/detail/trainer_decl.inc"
}  // namespace cuda

}  // namespace cf::gpu
