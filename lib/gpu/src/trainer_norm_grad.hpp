#pragma once
// The residual stream's gradient through a pre-norm in the device trainer (norm_backward in
// trainer_body.hpp). With LayerNorm or RMSNorm one kernel (Ops::residual_layernorm_backward,
// _rmsnorm_) writes dx = dres + the norm's input gradient + dpar and sums the weight gradients'
// terms per block of kNormRows rows in row order; Ops::norm_weight_grad adds those sums to the
// gradient in block order. No atomics: a run is reproducible bit for bit and a resumed run equals
// the straight one (issue 31: bf16 resume exactness). Without normalisation the same sum is the
// elementwise functor below.
#include "cf/gpu/functors.hpp"

namespace cf::gpu::detail {

/// dx[i] = dres[i] + dnorm[i] + dpar[i], dres and dpar null where absent, added in that order (the
/// order of the norms' kernels: the residual's gradient, the branch's, then a parallel branch's).
struct ResidualGradSum {
  const float *dres, *dnorm, *dpar;
  CF_HD float operator()(long long i) const {
    float v = dres ? dres[i] + dnorm[i] : dnorm[i];
    if (dpar) v += dpar[i];
    return v;
  }
};

}  // namespace cf::gpu::detail
