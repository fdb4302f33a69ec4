#pragma once
// Host side of the device trainer (issue 14; docs/gpu.md "Device trainer"): which cf::nn models
// it can train, their plans (cf/gpu/train_plan.hpp), and the cf::nn::UpdateBackend that `train
// --device cuda` hands to the training loop, so the CUDA backend slots in below the model code
// (same parameter layout, same checkpoints, resumable on the CPU).
#include <memory>
#include <string>

#include "cf/gpu/context.hpp"
#include "cf/gpu/device.hpp"  // emulation_requested (CF_GPU_EMULATE)
#include "cf/gpu/train_plan.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/trainer.hpp"

namespace cf::gpu {

/// The first feature of `c` the device trainer cannot train, as a phrase naming it and the config
/// key ("" when every feature is supported). Supported: blocks with LayerNorm, RMSNorm or no norm
/// at any eps, GELU-tanh, GELU-erf or SwiGLU MLPs of any width with or without biases, sequential
/// or parallel residual, an optional embedding norm, qkv / projection biases on or off, tied or
/// untied head; learned, ALiBi, RoPE (any theta, partial rotary) or no positions, grouped-query
/// attention, every mask family of the attention kernels (full, block, swa, bridge, pbb, se-bridge;
/// both fusions), S-D, runway (dot, bilinear) and ELU+1 linear attention, head dimension <= 128.
/// Not supported: head dimension > 128, a registered attention unit whose GPU hook says the
/// trainer does not run it.
std::string device_train_unsupported(const nn::ModelConfig& c);

/// The device plan of `c` for micro-batches of B sequences of T tokens (1 <= T <= block_size):
/// offsets from cf::nn::make_layout, each layer's branch masks (cf::nn::detail::layer_branches)
/// in tiled form, ALiBi slopes. Throws cf::InvalidArgument naming an unsupported feature.
TrainPlan make_train_plan(const nn::ModelConfig& c, int B, int T);

/// Which build of the device trainer a backend runs.
enum class TrainerBuild {
  Cuda,      ///< cf::gpu::cuda::Trainer (needs a CUDA build and a device)
  Emulated,  ///< cf::gpu::emu::Trainer on the CPU (tests; CF_GPU_EMULATE=1 for `train --device cuda`)
};

/// The cf::nn::UpdateBackend of the device trainer, running in `ctx` (which must outlive it), its
/// GEMMs in `precision` (docs/gpu.md "Precision policies"). Throws cf::InvalidArgument for
/// TrainerBuild::Cuda in a build without CUDA.
std::unique_ptr<nn::UpdateBackend> make_update_backend(TrainerBuild build, Context& ctx,
                                                       Precision precision = Precision::Fp32);
/// The same in default_context().
std::unique_ptr<nn::UpdateBackend> make_update_backend(TrainerBuild build);

}  // namespace cf::gpu
