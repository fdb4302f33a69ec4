#pragma once
// Block-wide sum in shared memory (tree reduction with a barrier per level). Written without
// warp shuffles so the same source runs under the CPU emulation (cf/gpu/emulation.hpp).
#include "cf/gpu/emulation.hpp"

namespace cf::gpu::kernels {

/// Sum of `v` over the block's BLOCK threads (BLOCK a power of two, blockDim.x == BLOCK); every
/// thread gets the result. `buf` is BLOCK floats of __shared__ memory owned by the caller; the
/// function begins and ends with a barrier so `buf` may be reused by the next call.
template <int BLOCK>
__device__ __forceinline__ float block_sum(float v, float* buf) {
  static_assert((BLOCK & (BLOCK - 1)) == 0, "BLOCK must be a power of two");
  const int t = threadIdx.x;
  __syncthreads();
  buf[t] = v;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  const float r = buf[0];
  __syncthreads();
  return r;
}

/// Maximum over the block, same contract as block_sum.
template <int BLOCK>
__device__ __forceinline__ float block_max(float v, float* buf) {
  const int t = threadIdx.x;
  __syncthreads();
  buf[t] = v;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] = buf[t] > buf[t + s] ? buf[t] : buf[t + s];
    __syncthreads();
  }
  const float r = buf[0];
  __syncthreads();
  return r;
}

/// The second stage of the fused norm backwards' weight gradients (layernorm.cuh, rmsnorm.cuh):
/// dw[c] += part[0][0][c] + part[1][0][c] + ... in block order, and with db (LayerNorm) db[c] +=
/// the part[b][1][c] likewise. part [blocks, K, C], K = 2 with db, else 1. One thread per output,
/// grid ceil(K C / BLOCK), BLOCK threads (a template: header-defined kernels, one per TU); the same
/// order on every device and run (deterministic).
template <int BLOCK>
__global__ void norm_weight_grad_kernel(float* dw, float* db, const float* part, int blocks, int C) {
  const int K = db ? 2 : 1;
  const long long i = static_cast<long long>(blockIdx.x) * BLOCK + threadIdx.x;
  if (i >= static_cast<long long>(K) * C) return;
  const int j = static_cast<int>(i / C), c = static_cast<int>(i % C);
  float* out = j ? db : dw;
  float s = out[c];
  for (int b = 0; b < blocks; ++b) s += part[(static_cast<long long>(b) * K + j) * C + c];
  out[c] = s;
}

}  // namespace cf::gpu::kernels
