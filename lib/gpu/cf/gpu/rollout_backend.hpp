#pragma once
// The rollout on a device (issue 30; docs/gpu.md): a cf::rollout::LastRowBackend whose structured
// ALiBi path runs the windowed / causal affine-scan step (alibi_rollout_apply_left_window) and whose
// dense path a column-dot rollout loop, both on the device of a cf::gpu::Placement (the CUDA build,
// or its emulated twin on the CPU for CF_GPU_EMULATE=1 and CI); and a cf::rollout::ProductBackend
// whose left products and triple sums run there too.
#include <memory>

#include "cf/gpu/device_option.hpp"
#include "cf/rollout/last_row_backend.hpp"
#include "cf/rollout/product_backend.hpp"

namespace cf::gpu {

/// The device rollout of `b`; null for Placement::Cpu (the CPU paths of lib/rollout). Throws
/// cf::InvalidArgument for Placement::Cuda in a build without CUDA.
std::unique_ptr<rollout::LastRowBackend> make_rollout_backend(Placement b);

/// The device's kernel products and monotonicity sums of `b` (cf/rollout/product_backend.hpp:
/// --matrix, jacobian, monotonicity, verify): dense_left_product and prefix_gap_sums in double
/// (cf/gpu/analysis_ops.hpp); null for Placement::Cpu. Throws cf::InvalidArgument for
/// Placement::Cuda in a build without CUDA.
std::unique_ptr<rollout::ProductBackend> make_product_backend(Placement b);

}  // namespace cf::gpu
