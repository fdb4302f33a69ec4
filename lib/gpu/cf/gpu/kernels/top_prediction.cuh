#pragma once
// Each sequence's top prediction (issue 30: influence's top-prediction seed, cf::nn::TopSeed, on the
// device): the argmax of its last row of probabilities, one block per sequence, the vocabulary
// strided over the block's threads and the (value, index) pairs reduced in shared memory. Written
// without warp shuffles so the same source runs under the CPU emulation (cf/gpu/emulation.hpp).
#include <cstdint>

#include "cf/gpu/emulation.hpp"

namespace cf::gpu::kernels {

/// A sequence's top prediction: its token and probability.
struct TopPrediction {
  std::int32_t token;
  float prob;
};

/// Whether entry (av, ai) is picked over (bv, bi) by cf::nn::apply_top_seed's scan (y = 0, then y = v
/// whenever p[v] > p[y]): a NaN at index 0 is never left (every comparison with it is false), a NaN
/// elsewhere is never taken, and among the numbers the largest wins, the first index on ties (so
/// -0 and +0 tie). A strict total order on the entries of a row, so any reduction tree picks the
/// scan's entry. An index < 0 is an empty slot (a thread without entries), below everything.
__host__ __device__ __forceinline__ bool top_beats(float av, int ai, float bv, int bi) {
  if (ai < 0 || bi < 0) return bi < 0 && ai >= 0;
  // rank: 2 = NaN at index 0, 1 = a number, 0 = NaN elsewhere (x != x: NaN, without <cmath> on the device)
  const int ar = av != av ? (ai == 0 ? 2 : 0) : 1, br = bv != bv ? (bi == 0 ? 2 : 0) : 1;
  if (ar != br) return ar > br;
  if (ar == 1 && av != bv) return av > bv;
  return ai < bi;
}

/// out[b] = the top prediction at the last position of sequence b of probs [B T, ld] (the first V
/// columns of each row; ld: the padded vocabulary), as cf::nn::apply_top_seed picks it. Grid B
/// blocks, BLOCK threads (a power of two); deterministic (top_beats is a total order).
template <int BLOCK>
__global__ void top_prediction_kernel(const float* probs, TopPrediction* out, int B, int T, int V, int ld) {
  static_assert((BLOCK & (BLOCK - 1)) == 0, "BLOCK must be a power of two");
  __shared__ float val[BLOCK];
  __shared__ int idx[BLOCK];
  const int b = blockIdx.x, t = threadIdx.x;
  if (b >= B) return;  // uniform per block: no thread of this block reaches a barrier
  const float* p = probs + (static_cast<long long>(b + 1) * T - 1) * ld;
  float bv = 0.0f;
  int bi = -1;
  for (int v = t; v < V; v += BLOCK) {
    const float x = p[v];
    if (top_beats(x, v, bv, bi)) bv = x, bi = v;
  }
  val[t] = bv;
  idx[t] = bi;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s && top_beats(val[t + s], idx[t + s], val[t], idx[t])) val[t] = val[t + s], idx[t] = idx[t + s];
    __syncthreads();
  }
  if (t == 0) out[b] = TopPrediction{idx[0], val[0]};
}

}  // namespace cf::gpu::kernels
