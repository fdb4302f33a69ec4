#pragma once
// The device trainer (issue 14) in its two builds, one templated body (lib/gpu/src/trainer_body.hpp)
// instantiated for both back ends: cf::gpu::emu::Trainer = DeviceTrainer<Backend::Emulated> runs on
// the CPU (emulated kernels, Thrust on OpenMP, OpenBLAS; always built and tested in CI),
// cf::gpu::cuda::Trainer = DeviceTrainer<Backend::Cuda> on a CUDA device (built when CUDA is on).
// Plain types only (besides cf/nn/gradient_seed.hpp, which has no Eigen), safe for nvcc. The
// host-side entry points (plans from a cf::nn config, the trainer backend of `train --device cuda`)
// are in cf/gpu/train_step.hpp; docs/gpu.md "Device trainer". Pointers passed to the public members
// are host pointers in both builds.
#include <cstdint>
#include <functional>

#include "cf/gpu/context.hpp"
#include "cf/gpu/functors.hpp"
#include "cf/gpu/train_plan.hpp"
#include "cf/nn/gradient_seed.hpp"

namespace cf::gpu {

/// What a DeviceTrainer is built for: training (parameters, gradients, AdamW moments) or analysis
/// (seeded passes only, which read the input-gradient chain alone: neither AdamW moments nor a
/// parameter gradient are allocated, and the backward runs no weight-gradient GEMM, bias sum or norm
/// weight gradient; upload, download and apply refuse moments; gradient, micro_batch and clip refuse).
enum class TrainerUse { Training, Analysis };

/// The seed and read-out of DeviceTrainer::seeded, with the semantics of cf::nn::GradientSeed
/// (lib/nn/cf/nn/gradient_seed.hpp, whose seed rule and TopSeed it shares), in host memory. h(l)
/// [N, C] is the residual stream entering block l (h(0) the embedding output, h(n_layer) the stream
/// before the final norm), N = B T rows.
struct TrainerSeed {
  /// Output seed (resid_layer < 0), the general form: called with the probabilities
  /// softmax(logits) [N, V], copied from the device, it overwrites them with d objective / d
  /// logits, copied back (B T V floats each way).
  std::function<void(float* probs, int N, int V)> on_probs;
  /// Output seed, the top-prediction form (influence's): evaluated on the device, only yhat and
  /// p(yhat) per sequence [B] cross to the host (into top->yhat, top->p_yhat).
  const nn::TopSeed<float>* top = nullptr;
  int resid_layer = -1;          ///< residual seed: 1 <= resid_layer <= n_layer, blocks >= it not run
  const float* resid = nullptr;  ///< [N, C]: the objective is sum resid . h(resid_layer)
  int out_layer = 0;             ///< 0 <= out_layer < resid_layer (output seed: <= n_layer)
  float* dresid = nullptr;       ///< [N, C] receives d objective / d h(out_layer) (null = not wanted)
};

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
  /// trainer. TrainerUse::Analysis allocates neither AdamW moments nor a parameter gradient.
  DeviceTrainer(Context& ctx, TrainPlan plan, TrainerUse use = TrainerUse::Training);
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

  /// Seeded forward and backward of one batch (cf::nn::forward_backward with a GradientSeed, on
  /// the device): the output seed runs the whole forward and replaces the cross-entropy gradient by
  /// the seed's d objective / d logits, the residual seed runs blocks < resid_layer and starts the
  /// backward at h(resid_layer); blocks below out_layer are not back-propagated and the embedding
  /// gets no gradient. A training trainer's gradient buffer is zeroed first and receives the
  /// partial parameter gradient of the visited blocks (cf::nn's scratch); an analysis trainer
  /// computes none. Returns the mean loss over counted targets (output seed) or the objective
  /// (residual seed). Throws cf::InvalidArgument for a bad seed (cf::nn::check_seed_shape) and for
  /// non-finite probabilities of an output seed (weights that overflow float32).
  double seeded(const std::int32_t* tokens, const std::int32_t* targets, const TrainerSeed& seed);
  /// Whether `plan` (the same model at another B x T) fits the buffers allocated at construction:
  /// no more rows or sequences, no layer with more mask branches.
  bool fits(const TrainPlan& plan) const;
  /// Run later batches at the shape of `plan` (fits(plan) required; parameters stay on the device):
  /// an analysis over prefixes of several lengths reuses one trainer.
  void reshape(TrainPlan plan);

 private:
  struct Impl;
  Impl* impl_;
};

namespace emu {
using Trainer = DeviceTrainer<Backend::Emulated>;
}  // namespace emu

namespace cuda {
using Trainer = DeviceTrainer<Backend::Cuda>;
}  // namespace cuda

}  // namespace cf::gpu
