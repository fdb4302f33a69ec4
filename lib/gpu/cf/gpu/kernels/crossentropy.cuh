#pragma once
// Softmax cross-entropy kernels, the CUDA twins of cf::nn::crossentropy_forward / _backward
// (lib/nn/cf/nn/ops.hpp): one block per row of V logits.
#include "cf/gpu/kernels/reduce.cuh"

namespace cf::gpu::kernels {

/// logits [N, V] replaced by probabilities; losses [N] = -log p(target) from the shifted logit
/// (0 where target < 0). Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void crossentropy_forward_kernel(float* logits, float* losses, const int* targets, int N, int V) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;
  float* z = logits + static_cast<long long>(n) * V;
  float mx = -3.402823466e38f;
  for (int v = threadIdx.x; v < V; v += BLOCK) mx = z[v] > mx ? z[v] : mx;
  mx = block_max<BLOCK>(mx, buf);
  const int tgt = targets[n];
  const float zt = tgt >= 0 ? z[tgt] - mx : 0.0f;  // read before the row is overwritten
  __syncthreads();
  float s = 0;
  for (int v = threadIdx.x; v < V; v += BLOCK) {
    const float e = expf(z[v] - mx);
    z[v] = e;
    s += e;
  }
  const float sum = block_sum<BLOCK>(s, buf);
  const float inv = 1.0f / sum;
  for (int v = threadIdx.x; v < V; v += BLOCK) z[v] *= inv;
  if (threadIdx.x == 0) losses[n] = tgt >= 0 ? logf(sum) - zt : 0.0f;
}

/// probs [N, V] -> dlogits in place: scale (p - onehot(target)); rows with target < 0 become 0.
/// Grid N blocks, BLOCK threads.
template <int BLOCK>
__global__ void crossentropy_backward_kernel(float* probs, const int* targets, int N, int V, float scale) {
  const int n = blockIdx.x;
  if (n >= N) return;
  float* p = probs + static_cast<long long>(n) * V;
  const int tgt = targets[n];
  for (int v = threadIdx.x; v < V; v += BLOCK) p[v] = tgt < 0 ? 0.0f : (p[v] - (v == tgt ? 1.0f : 0.0f)) * scale;
}

}  // namespace cf::gpu::kernels
