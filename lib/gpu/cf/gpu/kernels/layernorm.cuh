#pragma once
// LayerNorm forward/backward kernels (eps given: 1e-5 in GPT-2, arch.norm_eps), the CUDA twins of
// cf::nn::layernorm_forward / layernorm_backward (lib/nn/cf/nn/ops.hpp): one block per row,
// threads strided over the C features, block reductions in shared memory. The residual form
// (issue 31; llm.c's fused_residual_forward) adds the residual branch and normalises the sum in
// one kernel, the sum written once and read back by the thread that wrote it; its backward adds
// the norm's input gradient to the residual stream's gradient and sums the weight gradients per
// block of rows in the same pass (no atomics: norm_weight_grad_kernel finishes them in order).
#include "cf/gpu/kernels/reduce.cuh"

namespace cf::gpu::kernels {

/// Row n of a LayerNorm from its sum s (this thread's share of sum_c x[c]): the variance, the
/// normalised row into out and the statistics. Shared by the plain and the residual kernels, so
/// both give the same floats.
template <int BLOCK>
__device__ void layernorm_row(float* out, float* mean, float* rstd, const float* x, float s, const float* w,
                              const float* b, int n, int C, float eps, float* buf) {
  const float m = block_sum<BLOCK>(s, buf) / C;
  float v = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) v += (x[c] - m) * (x[c] - m);
  const float var = block_sum<BLOCK>(v, buf) / C;
  const float r = 1.0f / sqrtf(var + eps);
  float* o = out + static_cast<long long>(n) * C;
  for (int c = threadIdx.x; c < C; c += BLOCK) o[c] = (x[c] - m) * r * w[c] + b[c];
  if (threadIdx.x == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

/// out, inp [N, C]; mean, rstd [N]; w, b [C]. Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                         const float* b, int N, int C, float eps) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;  // uniform per block: no thread of this block reaches a barrier
  const float* x = inp + static_cast<long long>(n) * C;
  float s = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) s += x[c];
  layernorm_row<BLOCK>(out, mean, rstd, x, s, w, b, n, C, eps, buf);
}

/// sum = a + b, then out = layernorm(sum) as layernorm_forward_kernel (the same arithmetic in the
/// same order, so the same floats as an add followed by it). sum, out, a, b [N, C] (sum may be a);
/// mean, rstd [N]; w, bias [C]. Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void residual_layernorm_forward_kernel(float* sum, float* out, float* mean, float* rstd, const float* a,
                                                  const float* b, const float* w, const float* bias, int N, int C,
                                                  float eps) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;  // uniform per block: no thread of this block reaches a barrier
  const long long row = static_cast<long long>(n) * C;
  float* x = sum + row;
  float s = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) {
    const float v = a[row + c] + b[row + c];
    x[c] = v;
    s += v;
  }
  // every later read of x[c] is by the thread that wrote it: no barrier needed for the sum
  layernorm_row<BLOCK>(out, mean, rstd, x, s, w, bias, n, C, eps, buf);
}

/// dinp [N, C] +=; dw, db [C] += (atomics across rows; null: not computed, e.g. the device trainer
/// reduces them deterministically itself). Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void layernorm_backward_kernel(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                          const float* w, const float* mean, const float* rstd, int N, int C) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;
  const float* x = inp + static_cast<long long>(n) * C;
  const float* d = dout + static_cast<long long>(n) * C;
  float* dx = dinp + static_cast<long long>(n) * C;
  const float m = mean[n], r = rstd[n];
  float a = 0, bsum = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) {
    const float norm = (x[c] - m) * r;
    const float dn = w[c] * d[c];
    a += dn;
    bsum += dn * norm;
  }
  const float dnorm_mean = block_sum<BLOCK>(a, buf) / C;
  const float dnorm_norm_mean = block_sum<BLOCK>(bsum, buf) / C;
  for (int c = threadIdx.x; c < C; c += BLOCK) {
    const float norm = (x[c] - m) * r;
    const float dn = w[c] * d[c];
    dx[c] += (dn - dnorm_mean - norm * dnorm_norm_mean) * r;
    if (dw) atomicAdd(dw + c, norm * d[c]);
    if (db) atomicAdd(db + c, d[c]);
  }
}

/// The residual stream's gradient through a LayerNorm, fused (issue 31): dinp = dres + the norm's
/// input gradient of dout + dpar (dres, dpar null: not added; dres may be dinp): the arithmetic of
/// layernorm_backward_kernel on dinp = dres, then + dpar, in the same order. The same floats up to
/// the compiler's FMA contraction, which g++ (-march with FMA) and nvcc choose per kernel: the
/// tests bound the difference by the roundings of the expression (tests/gpu/test_ops_emu.cpp).
/// Block b takes rows [b rows, (b + 1) rows) in order; with `part` ([gridDim.x, 2, C]) it leaves
/// there its rows' weight-gradient terms (x - mean) rstd dout and dout summed in row order (the
/// sums norm_weight_grad_kernel adds up): one pass over dout and x instead of a second one, and no
/// atomics. Grid ceil(N / rows) blocks, BLOCK threads.
template <int BLOCK>
__global__ void residual_layernorm_backward_kernel(float* dinp, float* part, const float* dres, const float* dpar,
                                                   const float* dout, const float* inp, const float* w,
                                                   const float* mean, const float* rstd, int N, int C, int rows) {
  __shared__ float buf[BLOCK];
  const int first = blockIdx.x * rows, last = first + rows < N ? first + rows : N;
  float* pw = part ? part + 2LL * blockIdx.x * C : nullptr;  // the dw terms' sums, then the db terms'
  for (int n = first; n < last; ++n) {                       // uniform per block: every thread reaches each barrier
    const long long row = static_cast<long long>(n) * C;
    const float* x = inp + row;
    const float* d = dout + row;
    float* dx = dinp + row;
    const float m = mean[n], r = rstd[n];
    float a = 0, bsum = 0;
    for (int c = threadIdx.x; c < C; c += BLOCK) {
      const float norm = (x[c] - m) * r;
      const float dn = w[c] * d[c];
      a += dn;
      bsum += dn * norm;
    }
    const float dnorm_mean = block_sum<BLOCK>(a, buf) / C;
    const float dnorm_norm_mean = block_sum<BLOCK>(bsum, buf) / C;
    for (int c = threadIdx.x; c < C; c += BLOCK) {
      const float norm = (x[c] - m) * r;
      const float dn = w[c] * d[c];
      float v = (dres ? dres[row + c] : 0.0f) + (dn - dnorm_mean - norm * dnorm_norm_mean) * r;
      if (dpar) v += dpar[row + c];
      dx[c] = v;  // dres[row + c] may be dx[c]: read above by this thread, the only one writing it
      if (pw) {   // column c of the block's sums: this thread's alone
        pw[c] = n == first ? norm * d[c] : pw[c] + norm * d[c];
        pw[C + c] = n == first ? d[c] : pw[C + c] + d[c];
      }
    }
  }
}

}  // namespace cf::gpu::kernels
