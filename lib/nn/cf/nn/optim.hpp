#pragma once
// AdamW with decoupled weight decay on matrices, warm-up + cosine learning-rate schedule and
// global-norm gradient clipping (issue 4 "Training"). Deterministic: every reduction runs over
// fixed chunks in a fixed order, so results do not depend on the thread count.
#include <cstdint>
#include <vector>

#include "cf/nn/params.hpp"

namespace cf::nn {

/// AdamW hyper-parameters (defaults of issue 4: betas 0.9 / 0.95, weight decay 0.1 on matrices).
struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

/// Optimizer state: first and second moments in the parameter layout, and the step count t
/// (number of updates done). Stored in checkpoints under /optim.
struct AdamWState {
  std::vector<float> m, v;
  std::int64_t t = 0;
};

/// Learning rate at update `step` (0-based) of `max_steps`: linear warm-up from lr/warmup to lr
/// over `warmup` steps, then cosine decay to min_lr at max_steps (nanoGPT recipe).
/// Requires warmup >= 0, max_steps >= 1, 0 <= min_lr <= lr.
double lr_schedule(std::int64_t step, std::int64_t warmup, std::int64_t max_steps, double lr, double min_lr);

/// L2 norm of the whole gradient (double accumulation over fixed chunks).
double grad_norm(const std::vector<float>& grad);

/// Scale `grad` so that its global norm is at most max_norm (max_norm <= 0: no clipping);
/// returns the norm before clipping.
double clip_grad_norm(std::vector<float>& grad, double max_norm);

/// One AdamW update: t += 1; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; bias-corrected step;
/// p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p) with wd only on tensors with decay = true.
/// State vectors are sized on first use. Throws cf::InvalidArgument on size mismatch.
void adamw_step(std::vector<float>& params, const std::vector<float>& grad, AdamWState& state,
                const ParamLayout& layout, double lr, const AdamWConfig& cfg);

}  // namespace cf::nn
