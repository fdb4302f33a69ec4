#pragma once
// Softmax cross-entropy kernels, the CUDA twins of cf::nn::crossentropy_forward / _backward
// (lib/nn/cf/nn/ops.hpp): one block per row of V logits. classifier_kernel is the fused classifier
// of the device trainer (issue 31; llm.c's fused_classifier): one pass over the row for its
// maximum and sum of exponentials, then the loss and, in the same kernel, the logits overwritten
// by what the caller asked for (nothing, the probabilities, or the cross-entropy's gradient), so
// the backward never recomputes the softmax and the probabilities are not written in between.
#include "cf/gpu/kernels/reduce.cuh"

namespace cf::gpu::kernels {

/// What classifier_kernel leaves in a row of logits besides its loss: the logits untouched
/// (validation), the probabilities (an output seed's objective reads them), or d loss / d logits
/// (a training step; the backward starts from it).
enum class ClassifierOut { Loss, Probabilities, Gradient };

/// logits [N, ld], the row's first V entries its classes (ld >= V: the padded vocabulary's
/// columns [V, ld) never enter the softmax and are written 0 wherever the row is written);
/// losses [N] = -log p(target) from the shifted logit (0 where target < 0, the row not counted).
/// Gradient: the row becomes dloss (p - onehot(target)), or 0 for a row not counted.
/// Grid N blocks, BLOCK threads.
template <int BLOCK, ClassifierOut OUT>
__global__ void classifier_kernel(float* logits, float* losses, const int* targets, int N, int V, int ld, float dloss) {
  __shared__ float buf[BLOCK];
  const int n = blockIdx.x;
  if (n >= N) return;  // uniform per block: no thread of this block reaches a barrier
  float* z = logits + static_cast<long long>(n) * ld;
  const int tgt = targets[n];
  if (tgt < 0 && OUT != ClassifierOut::Probabilities) {  // uniform per block, as above
    if (threadIdx.x == 0) losses[n] = 0.0f;
    if (OUT == ClassifierOut::Gradient)
      for (int v = threadIdx.x; v < ld; v += BLOCK) z[v] = 0.0f;
    return;
  }
  // one read of the row: each thread's running maximum m and sum s of exp(z - m) (online softmax;
  // one exponential per logit, the sum rescaled only when the maximum grows)
  float m = -3.402823466e38f, s = 0.0f;
  for (int v = threadIdx.x; v < V; v += BLOCK) {
    const float x = z[v];
    if (x > m) {
      s = s * expf(m - x) + 1.0f;
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  const float zt = tgt >= 0 ? z[tgt] : 0.0f;  // read before any thread overwrites the row
  const float mx = block_max<BLOCK>(m, buf);
  const float sum = block_sum<BLOCK>(s * expf(m - mx), buf);  // a thread without logits adds 0
  if (threadIdx.x == 0) losses[n] = tgt >= 0 ? logf(sum) - (zt - mx) : 0.0f;
  if (OUT == ClassifierOut::Loss) return;
  const float inv = 1.0f / sum;
  for (int v = threadIdx.x; v < ld; v += BLOCK) {
    float out = 0.0f;
    if (v < V) {
      const float p = expf(z[v] - mx) * inv;
      out = OUT == ClassifierOut::Probabilities ? p : (p - (v == tgt ? 1.0f : 0.0f)) * dloss;
    }
    z[v] = out;
  }
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
