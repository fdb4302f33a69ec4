#pragma once
// Tiled causal attention, forward and backward, for every mask family and both bridge fusions
// (issue 14; the CUDA twin of the trainer's attention, lib/nn). FlashAttention-style: a block
// owns one tile of TILE query rows (one thread per row) and visits only the key tiles its rows
// admit (host-built lists, cf/gpu/attention.hpp), with an online softmax per branch, so no T x T
// matrix exists. Branch fusion (seed 002 Eqs. 34-35): every branch is its own softmax and the
// head output is the sum of the branch outputs; the log-sum-exp of each (row, branch) and each
// branch's normalised output are saved for the backward pass, which recomputes the probabilities
// tile by tile (dQ per query tile, dK/dV per key tile: no atomics).
//
// Logits: s_ij = scale q_i.k_j - slope_h (i - j) (ALiBi; slope 0 = none). RoPE is applied to q and
// k before the call (an elementwise rotation). Runway rewiring and S-D are not in these kernels
// (docs/gpu.md).
//
// Layout: q, k, v, y, dq, dk, dv, dy [B, H, T, dh] contiguous; lse, dsum [B, H, nb, T];
// obr [B, H, nb, T, dh]. dh <= DH (compile-time capacity).
#include "cf/gpu/emulation.hpp"

namespace cf::gpu::kernels {

/// Device view of a tiled mask (all arrays on the device that runs the kernel).
/// Branch br, row i admits keys in the closed intervals iv_lo[k]..iv_hi[k] for
/// k in row_ptr[br*(T+1)+i] .. row_ptr[br*(T+1)+i+1] (at most kMaxIntervals per row).
/// Query tile q of branch br visits key tiles qt_list[qt_ptr[br*(nQ+1)+q] ..]; key tile kt is
/// visited by query tiles kt_list[kt_ptr[br*(nK+1)+kt] ..]. nQ = nK = ceil(T / TILE).
struct MaskView {
  int T = 0, nb = 0, ntiles = 0;
  const int* row_ptr = nullptr;
  const int* iv_lo = nullptr;
  const int* iv_hi = nullptr;
  const int* qt_ptr = nullptr;
  const int* qt_list = nullptr;
  const int* kt_ptr = nullptr;
  const int* kt_list = nullptr;
};
inline constexpr int kMaxIntervals = 4;

struct RowIntervals {
  int n = 0;
  int lo[kMaxIntervals], hi[kMaxIntervals];
};

__device__ __forceinline__ RowIntervals row_intervals(const MaskView& m, int br, int i) {
  RowIntervals r;
  if (i >= m.T) return r;
  const int a = m.row_ptr[br * (m.T + 1) + i], b = m.row_ptr[br * (m.T + 1) + i + 1];
  r.n = b - a;
  for (int k = 0; k < r.n; ++k) r.lo[k] = m.iv_lo[a + k], r.hi[k] = m.iv_hi[a + k];
  return r;
}

__device__ __forceinline__ bool admits(const RowIntervals& r, int j) {
  for (int k = 0; k < r.n; ++k)
    if (j >= r.lo[k] && j <= r.hi[k]) return true;
  return false;
}

/// Forward. Grid (ntiles, H, B), TILE threads.
template <int TILE, int DH>
__global__ void attention_forward_kernel(MaskView m, int H, int dh, float scale, const float* slopes, const float* q,
                                         const float* k, const float* v, float* y, float* lse, float* obr) {
  __shared__ float Ks[TILE][DH];
  __shared__ float Vs[TILE][DH];
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int i = qt * TILE + threadIdx.x;
  const long long head = (static_cast<long long>(b) * H + h) * T;
  const float slope = slopes ? slopes[h] : 0.0f;
  float qi[DH], acc[DH], yi[DH];
  for (int d = 0; d < dh; ++d) {
    qi[d] = i < T ? q[(head + i) * dh + d] : 0.0f;
    yi[d] = 0;
  }
  for (int br = 0; br < m.nb; ++br) {
    const RowIntervals rows = row_intervals(m, br, i);
    float mx = -3.402823466e38f, l = 0;
    for (int d = 0; d < dh; ++d) acc[d] = 0;
    const int t0 = m.qt_ptr[br * (m.ntiles + 1) + qt], t1 = m.qt_ptr[br * (m.ntiles + 1) + qt + 1];
    for (int t = t0; t < t1; ++t) {
      const int kt = m.qt_list[t];
      __syncthreads();  // the previous tile is no longer read
      {
        const int j = kt * TILE + threadIdx.x;
        for (int d = 0; d < dh; ++d) {
          Ks[threadIdx.x][d] = j < T ? k[(head + j) * dh + d] : 0.0f;
          Vs[threadIdx.x][d] = j < T ? v[(head + j) * dh + d] : 0.0f;
        }
      }
      __syncthreads();
      if (i >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int j = kt * TILE + r;
        if (j >= T || !admits(rows, j)) continue;
        float s = 0;
        for (int d = 0; d < dh; ++d) s += qi[d] * Ks[r][d];
        s = s * scale - slope * static_cast<float>(i - j);
        if (s > mx) {  // rescale the running sum to the new maximum
          const float c = expf(mx - s);
          l *= c;
          for (int d = 0; d < dh; ++d) acc[d] *= c;
          mx = s;
        }
        const float p = expf(s - mx);
        l += p;
        for (int d = 0; d < dh; ++d) acc[d] += p * Vs[r][d];
      }
    }
    if (i < T) {
      const long long st = (static_cast<long long>(b) * H + h) * m.nb + br;
      lse[st * T + i] = l > 0 ? mx + logf(l) : -3.402823466e38f;  // no admitted key: branch adds 0
      const float inv = l > 0 ? 1.0f / l : 0.0f;
      for (int d = 0; d < dh; ++d) {
        const float o = acc[d] * inv;
        obr[(st * T + i) * dh + d] = o;
        yi[d] += o;
      }
    }
  }
  if (i < T)
    for (int d = 0; d < dh; ++d) y[(head + i) * dh + d] = yi[d];
}

/// Backward, query side: dq += scale sum_j dS_ij k_j, and dsum[br, i] = dy_i . o_br,i (the row
/// term of the softmax backward, saved for the key side). Grid (ntiles, H, B), TILE threads.
template <int TILE, int DH>
__global__ void attention_backward_q_kernel(MaskView m, int H, int dh, float scale, const float* slopes,
                                            const float* q, const float* k, const float* v, const float* dy,
                                            const float* lse, const float* obr, float* dsum, float* dq) {
  __shared__ float Ks[TILE][DH];
  __shared__ float Vs[TILE][DH];
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int i = qt * TILE + threadIdx.x;
  const long long head = (static_cast<long long>(b) * H + h) * T;
  const float slope = slopes ? slopes[h] : 0.0f;
  float qi[DH], dyi[DH], dqi[DH];
  for (int d = 0; d < dh; ++d) {
    qi[d] = i < T ? q[(head + i) * dh + d] : 0.0f;
    dyi[d] = i < T ? dy[(head + i) * dh + d] : 0.0f;
    dqi[d] = 0;
  }
  for (int br = 0; br < m.nb; ++br) {
    const RowIntervals rows = row_intervals(m, br, i);
    const long long st = (static_cast<long long>(b) * H + h) * m.nb + br;
    float D = 0, L = 0;
    if (i < T) {
      for (int d = 0; d < dh; ++d) D += dyi[d] * obr[(st * T + i) * dh + d];
      dsum[st * T + i] = D;
      L = lse[st * T + i];
    }
    const int t0 = m.qt_ptr[br * (m.ntiles + 1) + qt], t1 = m.qt_ptr[br * (m.ntiles + 1) + qt + 1];
    for (int t = t0; t < t1; ++t) {
      const int kt = m.qt_list[t];
      __syncthreads();
      {
        const int j = kt * TILE + threadIdx.x;
        for (int d = 0; d < dh; ++d) {
          Ks[threadIdx.x][d] = j < T ? k[(head + j) * dh + d] : 0.0f;
          Vs[threadIdx.x][d] = j < T ? v[(head + j) * dh + d] : 0.0f;
        }
      }
      __syncthreads();
      if (i >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int j = kt * TILE + r;
        if (j >= T || !admits(rows, j)) continue;
        float s = 0, dp = 0;
        for (int d = 0; d < dh; ++d) s += qi[d] * Ks[r][d], dp += dyi[d] * Vs[r][d];
        s = s * scale - slope * static_cast<float>(i - j);
        const float p = expf(s - L);
        const float ds = p * (dp - D);
        for (int d = 0; d < dh; ++d) dqi[d] += scale * ds * Ks[r][d];
      }
    }
  }
  if (i < T)
    for (int d = 0; d < dh; ++d) dq[(head + i) * dh + d] += dqi[d];
}

/// Backward, key side: dk += scale sum_i dS_ij q_i, dv += sum_i P_ij dy_i (needs dsum from the
/// query side). Grid (ntiles, H, B), TILE threads (one per key row).
template <int TILE, int DH>
__global__ void attention_backward_kv_kernel(MaskView m, int H, int dh, float scale, const float* slopes,
                                             const float* q, const float* k, const float* v, const float* dy,
                                             const float* lse, const float* dsum, float* dk, float* dv) {
  __shared__ float Qs[TILE][DH];
  __shared__ float dYs[TILE][DH];
  __shared__ float Ls[TILE], Ds[TILE];
  __shared__ int Ln[TILE], Llo[TILE][kMaxIntervals], Lhi[TILE][kMaxIntervals];
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int j = kt * TILE + threadIdx.x;
  const long long head = (static_cast<long long>(b) * H + h) * T;
  const float slope = slopes ? slopes[h] : 0.0f;
  float kj[DH], vj[DH], dkj[DH], dvj[DH];
  for (int d = 0; d < dh; ++d) {
    kj[d] = j < T ? k[(head + j) * dh + d] : 0.0f;
    vj[d] = j < T ? v[(head + j) * dh + d] : 0.0f;
    dkj[d] = dvj[d] = 0;
  }
  for (int br = 0; br < m.nb; ++br) {
    const long long st = (static_cast<long long>(b) * H + h) * m.nb + br;
    const int t0 = m.kt_ptr[br * (m.ntiles + 1) + kt], t1 = m.kt_ptr[br * (m.ntiles + 1) + kt + 1];
    for (int t = t0; t < t1; ++t) {
      const int qt = m.kt_list[t];
      __syncthreads();
      {
        const int i = qt * TILE + threadIdx.x;
        for (int d = 0; d < dh; ++d) {
          Qs[threadIdx.x][d] = i < T ? q[(head + i) * dh + d] : 0.0f;
          dYs[threadIdx.x][d] = i < T ? dy[(head + i) * dh + d] : 0.0f;
        }
        const RowIntervals rows = row_intervals(m, br, i);
        Ln[threadIdx.x] = rows.n;
        for (int c = 0; c < rows.n; ++c) Llo[threadIdx.x][c] = rows.lo[c], Lhi[threadIdx.x][c] = rows.hi[c];
        Ls[threadIdx.x] = i < T ? lse[st * T + i] : 0.0f;
        Ds[threadIdx.x] = i < T ? dsum[st * T + i] : 0.0f;
      }
      __syncthreads();
      if (j >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int i = qt * TILE + r;
        if (i >= T) break;
        bool in = false;
        for (int c = 0; c < Ln[r]; ++c) in = in || (j >= Llo[r][c] && j <= Lhi[r][c]);
        if (!in) continue;
        float s = 0, dp = 0;
        for (int d = 0; d < dh; ++d) s += Qs[r][d] * kj[d], dp += dYs[r][d] * vj[d];
        s = s * scale - slope * static_cast<float>(i - j);
        const float p = expf(s - Ls[r]);
        const float ds = p * (dp - Ds[r]);
        for (int d = 0; d < dh; ++d) {
          dvj[d] += p * dYs[r][d];
          dkj[d] += scale * ds * Qs[r][d];
        }
      }
    }
  }
  if (j < T)
    for (int d = 0; d < dh; ++d) {
      dk[(head + j) * dh + d] += dkj[d];
      dv[(head + j) * dh + d] += dvj[d];
    }
}

}  // namespace cf::gpu::kernels
