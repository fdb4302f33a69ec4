#pragma once
// RMSNorm forward/backward kernels (Llama), the CUDA twins of cf::nn::rmsnorm_forward /
// rmsnorm_backward (lib/nn/cf/nn/variant_ops.hpp): one block per row, threads strided over the C
// features, block reductions in shared memory, as layernorm.cuh (and its residual form).
#include "cf/gpu/kernels/reduce.cuh"

namespace cf::gpu::kernels {

/// out = x / sqrt(mean(x^2) + eps) * w. out, inp [N, C]; rstd [N]; w [C]. Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* w, int N, int C,
                                       float eps) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;  // uniform per block: no thread of this block reaches a barrier
  const float* x = inp + static_cast<long long>(n) * C;
  float s = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) s += x[c] * x[c];
  const float r = 1.0f / sqrtf(block_sum<BLOCK>(s, buf) / C + eps);
  float* o = out + static_cast<long long>(n) * C;
  for (int c = threadIdx.x; c < C; c += BLOCK) o[c] = x[c] * r * w[c];
  if (threadIdx.x == 0) rstd[n] = r;
}

/// sum = a + b, then out = rmsnorm(sum) as rmsnorm_forward_kernel (the same floats as an add
/// followed by it). sum, out, a, b [N, C] (sum may be a); rstd [N]; w [C]. Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void residual_rmsnorm_forward_kernel(float* sum, float* out, float* rstd, const float* a, const float* b,
                                                const float* w, int N, int C, float eps) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;  // uniform per block: no thread of this block reaches a barrier
  const long long row = static_cast<long long>(n) * C;
  float* x = sum + row;
  float s = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) {
    const float v = a[row + c] + b[row + c];
    x[c] = v;
    s += v * v;
  }
  const float r = 1.0f / sqrtf(block_sum<BLOCK>(s, buf) / C + eps);
  float* o = out + row;
  for (int c = threadIdx.x; c < C; c += BLOCK) o[c] = x[c] * r * w[c];  // x[c]: this thread's own write
  if (threadIdx.x == 0) rstd[n] = r;
}

/// dx = r (g - x r mean(g x r)), g = w dout: dinp [N, C] +=; dw [C] += (atomics across rows; null:
/// not computed).
/// Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void rmsnorm_backward_kernel(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                        const float* rstd, int N, int C) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;
  const float* x = inp + static_cast<long long>(n) * C;
  const float* d = dout + static_cast<long long>(n) * C;
  float* dx = dinp + static_cast<long long>(n) * C;
  const float r = rstd[n];
  float a = 0;
  for (int c = threadIdx.x; c < C; c += BLOCK) a += w[c] * d[c] * x[c] * r;
  const float gy = block_sum<BLOCK>(a, buf) / C;
  for (int c = threadIdx.x; c < C; c += BLOCK) {
    dx[c] += r * (w[c] * d[c] - x[c] * r * gy);
    if (dw) atomicAdd(dw + c, x[c] * r * d[c]);
  }
}

/// The residual stream's gradient through an RMSNorm, fused as residual_layernorm_backward_kernel:
/// dinp = dres + the norm's input gradient of dout + dpar (dres, dpar null: not added; dres may be
/// dinp), the arithmetic of rmsnorm_backward_kernel on dinp = dres, then + dpar (the same floats up
/// to FMA contraction, as there); with `part`
/// ([gridDim.x, 1, C]) block b leaves there the sum of its rows' x rstd dout in row order.
/// Grid ceil(N / rows) blocks, BLOCK threads.
template <int BLOCK>
__global__ void residual_rmsnorm_backward_kernel(float* dinp, float* part, const float* dres, const float* dpar,
                                                 const float* dout, const float* inp, const float* w, const float* rstd,
                                                 int N, int C, int rows) {
  __shared__ float buf[BLOCK];
  const int first = blockIdx.x * rows, last = first + rows < N ? first + rows : N;
  float* pw = part ? part + static_cast<long long>(blockIdx.x) * C : nullptr;
  for (int n = first; n < last; ++n) {  // uniform per block: every thread reaches each barrier
    const long long row = static_cast<long long>(n) * C;
    const float* x = inp + row;
    const float* d = dout + row;
    float* dx = dinp + row;
    const float r = rstd[n];
    float a = 0;
    for (int c = threadIdx.x; c < C; c += BLOCK) a += w[c] * d[c] * x[c] * r;
    const float gy = block_sum<BLOCK>(a, buf) / C;
    for (int c = threadIdx.x; c < C; c += BLOCK) {
      float v = (dres ? dres[row + c] : 0.0f) + r * (w[c] * d[c] - x[c] * r * gy);
      if (dpar) v += dpar[row + c];
      dx[c] = v;  // dres[row + c] may be dx[c]: read above by this thread, the only one writing it
      if (pw) pw[c] = n == first ? x[c] * r * d[c] : pw[c] + x[c] * r * d[c];  // column c: this thread's alone
    }
  }
}

}  // namespace cf::gpu::kernels
