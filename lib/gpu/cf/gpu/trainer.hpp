#pragma once
// The device trainer (issue 14) in its two builds, one templated body (lib/gpu/src/trainer_body.hpp)
// instantiated for both back ends: cf::gpu::emu::Trainer = DeviceTrainer<Backend::Emulated> runs on
// the CPU (emulated kernels, Thrust on OpenMP, OpenBLAS; always built and tested in CI),
// cf::gpu::cuda::Trainer = DeviceTrainer<Backend::Cuda> on a CUDA device (built when CUDA is on).
// Plain types only, safe for nvcc. The host-side entry points (plans from a cf::nn config, the
// trainer backend of `train --device cuda`) are in cf/gpu/train_step.hpp; docs/gpu.md "Device
// trainer". Pointers passed to the public members are host pointers in both builds.
#include <cstdint>

#include "cf/gpu/context.hpp"
#include "cf/gpu/functors.hpp"
#include "cf/gpu/train_plan.hpp"

namespace cf::gpu {

/// One model resident on the device (llm.c style): parameters, gradients, AdamW moments and every
/// activation of a B x T micro-batch live in device buffers allocated once; a training update is
/// zero_grad, micro_batch per micro-batch (forward, cross-entropy, backward: gradients
/// accumulated), clip (global norm), apply (AdamW), each a sequence of cf::gpu kernels, Thrust
/// calls and GEMMs. The CPU oracle is cf::nn::forward_backward + clip_grad_norm + adamw_step
/// (tests/gpu/test_train_step_emu.cpp).
template <Backend Bk>
class DeviceTrainer {
 public:
  /// Allocate every buffer for `plan` (make_train_plan); parameters and moments start at zero.
  /// Every operation runs in `ctx` (its handles, its attention path), which must outlive the
  /// trainer.
  DeviceTrainer(Context& ctx, TrainPlan plan);
  /// The same in default_context().
  explicit DeviceTrainer(TrainPlan plan);
  ~DeviceTrainer();
  DeviceTrainer(const DeviceTrainer&) = delete;
  DeviceTrainer& operator=(const DeviceTrainer&) = delete;
  const TrainPlan& plan() const;
  /// Copy parameters [total] and AdamW moments m, v [total] (null = zeros) to the device.
  void upload(const float* params, const float* m, const float* v);
  /// Copy them back (host arrays of `total` floats; a null pointer is skipped).
  void download(float* params, float* m, float* v) const;
  /// The accumulated gradient [total] (tests).
  void gradient(float* grad) const;
  void zero_grad();
  /// Forward and backward of one micro-batch (tokens, targets [B T], target < 0 = not counted):
  /// the gradient of the mean loss over counted targets is ADDED to the gradient buffer (nothing
  /// when no target counts). Returns that mean loss (0 when none counts), as
  /// cf::nn::forward_backward does.
  double micro_batch(const std::int32_t* tokens, const std::int32_t* targets);
  /// Loss of one micro-batch, forward only (validation).
  double loss(const std::int32_t* tokens, const std::int32_t* targets);
  /// Divide the gradient by `accum` when accum > 1, then clip it to global norm max_norm (<= 0:
  /// no clipping; the cf::nn::clip_grad_norm rule). Returns the norm before clipping.
  double clip(int accum, double max_norm);
  /// One AdamW update with the hyper-parameters of u (u.wd is replaced by weight_decay on the runs
  /// with decay and by 0 on the others), as cf::nn::adamw_step.
  void apply(const AdamWUpdate& u, float weight_decay);
  /// Whether parameters and moments are all finite.
  bool finite() const;

 private:
  struct Impl;
  Impl* impl_;
  double forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t& count);
};

namespace emu {
using Trainer = DeviceTrainer<Backend::Emulated>;
}  // namespace emu

namespace cuda {
using Trainer = DeviceTrainer<Backend::Cuda>;
}  // namespace cuda

}  // namespace cf::gpu
