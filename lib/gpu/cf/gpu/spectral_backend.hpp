#pragma once
// The spectral weight level on a device (issue 30; docs/gpu.md): every head's symmetric core
// problems batched through sym_eig_batched (cuSOLVER on a device, Eigen in float32 on the emulated
// twin), for cf::spectral::analyse_weights(..., SymEigenSolver).
#include "cf/gpu/device_option.hpp"
#include "cf/spectral/model.hpp"

namespace cf::gpu {

/// The batched eigensolver of `b` (float32: rounding_unit 2^-24; each matrix is scaled by its
/// largest |entry| before the conversion, so no core under- or overflows float32). For
/// Placement::Cpu, a solver with an empty `solve` (callers take the CPU path). Throws
/// cf::InvalidArgument for Placement::Cuda in a build without CUDA.
spectral::SymEigenSolver make_spectral_eigensolver(Placement b);

}  // namespace cf::gpu
