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

}  // namespace cf::gpu::kernels
