#pragma once
// The norms' weight (and bias) gradients of the device trainer, reduced over the rows in row order
// by one thread per feature: deterministic on both back ends, so a run is reproducible bit for bit
// and a resumed run equals the straight one (issue 31: bf16 resume exactness). The norm kernels'
// own atomics (one add per row in whatever order the blocks run) are skipped by passing them null
// weight gradients. The sums are the kernels' terms, added to the gradient in the order row 0,
// 1, ..., N - 1: what the emulated kernels computed on one thread before.
#include "cf/gpu/functors.hpp"

namespace cf::gpu::detail {

/// LayerNorm: dw[c] += sum_n (x[n,c] - mean[n]) rstd[n] dout[n,c]; db[c] += sum_n dout[n,c] (db may
/// be null). Index c in [0, C).
struct LayerNormWeightGrad {
  float *dw, *db;
  const float *dout, *inp, *mean, *rstd;
  int N, C;
  CF_HD void operator()(long long c) const {
    float w = dw[c], b = db ? db[c] : 0.0f;
    for (long long n = 0; n < N; ++n) {
      const float d = dout[n * C + c], norm = (inp[n * C + c] - mean[n]) * rstd[n];
      w += norm * d;
      b += d;
    }
    dw[c] = w;
    if (db) db[c] = b;
  }
};

/// RMSNorm: dw[c] += sum_n x[n,c] rstd[n] dout[n,c]. Index c in [0, C).
struct RmsNormWeightGrad {
  float* dw;
  const float *dout, *inp, *rstd;
  int N, C;
  CF_HD void operator()(long long c) const {
    float w = dw[c];
    for (long long n = 0; n < N; ++n) w += inp[n * C + c] * rstd[n] * dout[n * C + c];
    dw[c] = w;
  }
};

}  // namespace cf::gpu::detail
