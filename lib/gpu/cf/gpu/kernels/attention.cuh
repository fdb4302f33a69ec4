#pragma once
// Tiled causal attention, forward and backward, for every mask family and both bridge fusions
// (issue 14; the CUDA twin of the trainer's tiled attention, lib/nn/cf/nn/detail/attention_tiled.hpp).
// FlashAttention-style: a block owns one tile of TILE query rows (one thread per row) and visits
// only the key tiles its rows admit (host-built lists, cf/gpu/attention.hpp), with an online
// softmax per branch, so no T x T matrix exists. Branch fusion (Boundary repair (Yang) Eqs. 34-35): every branch
// is its own softmax and the head output is the sum of the branch outputs; the log-sum-exp of each
// (row, branch) and each branch's normalised output are saved for the backward pass, which
// recomputes the probabilities tile by tile (dQ per query tile, dK/dV per key tile: no atomics).
//
// Logits (the same as the CPU oracle's, cf::nn::detail::attention_head_forward):
//   s_ij = scale q_i.k_j                                  (softmax heads)
//   s_ij = scale (q_i.k_j - k_i.q_j) - [i = j] damp_i     (S-D: skew logits, diagonal damping)
//   s_ij -= slope_h (i - j)                               (ALiBi; slope 0 = none)
//   s_ij -= softplus(tau_ij) for 1 <= j <= i - 2          (runway rewiring, Runway (Lee & Clark) Eqs. 8-14:
//       log beta = -softplus(tau), tau_ij = u_i . vl_j with u_i = c vl_{i-1}, c = 1/sqrt(dh)
//       (dot) or u_i = B^T vl_{i-1} (bilinear); vl = the last head's values of the sequence)
// RoPE is applied to q and k before the call (an elementwise rotation, cf::nn::rope_apply).
// The other side's S-D / runway operands (q_j, k_i, vl_j, u_i) are read through the cache, not
// staged in shared memory: staging them would pass the 48 KB of static shared memory at dh = 128.
// These general kernels are the reference (CF_GPU_ATTENTION=generic) of the flash kernels, which
// run S-D and runway heads by default (flash_attention.cuh); they also run a head with both.
//
// Layout: q, k, v, y, dq, dk, dv, dy [B, H, T, dh] contiguous; lse, dsum [B, H, nb, T];
// obr [B, H, nb, T, dh]; extras: see HeadExtras. dh <= DH (compile-time capacity).
#include "cf/gpu/emulation.hpp"

namespace cf::gpu::kernels {

/// Device view of a tiled mask (all arrays on the device that runs the kernel).
/// Branch br, row i admits keys in the closed intervals iv_lo[k]..iv_hi[k] for
/// k in row_ptr[br*(T+1)+i] .. row_ptr[br*(T+1)+i+1] (at most kMaxIntervals per row).
/// Query tile q of branch br visits key tiles qt_list[qt_ptr[br*(nQ+1)+q] ..]; key tile kt is
/// visited by query tiles kt_list[kt_ptr[br*(nK+1)+kt] ..]. nQ = nK = ceil(T / TILE).
/// The tile plan of the FlashAttention-2 kernels (flash_attention.cuh), on tiles of kFlashTile:
/// query tile q of branch br visits the non-empty key tiles fq_list[fq_ptr[br*(ftiles+1)+q] ..],
/// key tile kt is visited by the query tiles fk_list[fk_ptr[br*(ftiles+1)+kt] ..]; each entry is
/// tile << 1 | full (full: every pair of the tile admitted, no position past T).
struct MaskView {
  int T = 0, nb = 0, ntiles = 0, ftiles = 0;
  const int* row_ptr = nullptr;
  const int* iv_lo = nullptr;
  const int* iv_hi = nullptr;
  const int* qt_ptr = nullptr;
  const int* qt_list = nullptr;
  const int* kt_ptr = nullptr;
  const int* kt_list = nullptr;
  const int* fq_ptr = nullptr;
  const int* fq_list = nullptr;
  const int* fk_ptr = nullptr;
  const int* fk_list = nullptr;
};
inline constexpr int kFlashTile = 64;
inline constexpr int kMaxIntervals = 4;

/// S-D and runway inputs of the kernels (device pointers; null = feature off).
///  damp [B, H, T]: S-D diagonal damping.
///  rw_v: runway, the last head's values of sequence b at rw_v + b * rw_stride, [T, dh] rows.
///  rw_u [B, T, dh]: u_i = c vl_{i-1} (dot) or B^T vl_{i-1} (bilinear), row 0 zero
///  (runway_u_kernel fills it).
///  rw_B [dh, dh] row-major: the bilinear form (null = dot form, rw_c = 1/sqrt(dh)).
struct HeadExtras {
  const float* damp = nullptr;
  const float* rw_v = nullptr;
  long long rw_stride = 0;
  const float* rw_u = nullptr;
  const float* rw_B = nullptr;
  float rw_c = 0;
};

/// Gradients of the S-D / runway inputs (device pointers, accumulated; null where off).
///  ddamp [B, H, T]; dvs [B, H, T, dh]: d/d vl_{i-1} by row i; dvl [B, H, T, dh]: d/d vl_m;
///  g [B, H, T, dh] (bilinear only, scratch): sum_j dtau_ij vl_j, reduced into dB by
///  runway_dB_kernel; null where dB is not wanted (the seeded analysis passes).
struct HeadExtraGrads {
  float* ddamp = nullptr;
  float* dvs = nullptr;
  float* dvl = nullptr;
  float* g = nullptr;
};

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

/// Row `row` of a [T, dh] head matrix into registers (zero past T).
template <int DH>
__device__ __forceinline__ void load_row(float (&dst)[DH], const float* src, int row, int T, int dh) {
  for (int d = 0; d < dh; ++d) dst[d] = row < T && src ? src[static_cast<long long>(row) * dh + d] : 0.0f;
}

/// Cooperative load of the tile of rows [row0, row0 + TILE) of a [T, dh] head matrix into shared
/// memory, one row per thread (zero past T). The caller brackets it with __syncthreads().
template <int TILE, int DH>
__device__ __forceinline__ void load_tile(float (&dst)[TILE][DH], const float* src, int row0, int T, int dh) {
  const int j = row0 + static_cast<int>(threadIdx.x);
  for (int d = 0; d < dh; ++d) dst[threadIdx.x][d] = j < T ? src[static_cast<long long>(j) * dh + d] : 0.0f;
}

__device__ __forceinline__ float dot_row(const float* a, const float* b, int dh) {
  float s = 0;
  for (int d = 0; d < dh; ++d) s += a[d] * b[d];
  return s;
}

/// Runway edge: 1 <= j <= i - 2 (Runway (Lee & Clark): the keys a runway can bypass).
__device__ __forceinline__ bool runway_edge(int i, int j) { return j >= 1 && j <= i - 2; }

/// log(1 + e^x) as cf::nn::softplus (x > 20: x) and the logistic sigmoid.
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

/// The per-block pointers of one (sequence b, head h).
struct HeadPtrs {
  const float *q, *k, *v;  // this head's [T, dh]
  const float* damp;       // this head's [T] or null
  const float* vl;         // the sequence's runway values [T, dh] or null
  const float* u;          // the sequence's runway u [T, dh] or null
  float slope;
};

__device__ __forceinline__ HeadPtrs head_ptrs(const HeadExtras& x, int T, int H, int dh, int b, int h,
                                              const float* slopes, const float* q, const float* k, const float* v) {
  const long long bh = static_cast<long long>(b) * H + h;
  const long long off = bh * T * dh;
  HeadPtrs p;
  p.q = q + off, p.k = k + off, p.v = v + off;
  p.damp = x.damp ? x.damp + bh * T : nullptr;
  p.vl = x.rw_v ? x.rw_v + static_cast<long long>(b) * x.rw_stride : nullptr;
  p.u = x.rw_v ? x.rw_u + static_cast<long long>(b) * T * dh : nullptr;
  p.slope = slopes ? slopes[h] : 0.0f;
  return p;
}

/// Logit s_ij from the plain term qk = q_i.k_j, adding S-D (kq = k_i.q_j), ALiBi and runway
/// (tau = u_i.vl_j, returned in *tau where the edge is a runway edge, else 0).
__device__ __forceinline__ float logit(const HeadPtrs& p, float scale, int i, int j, float qk, float kq, float tau_raw,
                                       float* tau) {
  float s = p.damp ? scale * (qk - kq) - (i == j ? p.damp[i] : 0.0f) : scale * qk;
  s -= p.slope * static_cast<float>(i - j);
  *tau = 0;
  if (p.vl && runway_edge(i, j)) {
    *tau = tau_raw;
    s -= softplus_f(tau_raw);
  }
  return s;
}

/// Runway u_i = c vl_{i-1} (dot) or B^T vl_{i-1} (bilinear) for every (b, i); row 0 zero.
/// Grid (ceil(T / BLOCK), B), BLOCK threads (a template: header-defined kernels, one per TU).
template <int BLOCK>
__global__ void runway_u_kernel(HeadExtras x, int T, int dh, float* u) {
  const int i = blockIdx.x * BLOCK + threadIdx.x, b = blockIdx.y;
  if (i >= T) return;
  float* ui = u + (static_cast<long long>(b) * T + i) * dh;
  if (i == 0) {
    for (int e = 0; e < dh; ++e) ui[e] = 0;
    return;
  }
  const float* vp = x.rw_v + static_cast<long long>(b) * x.rw_stride + static_cast<long long>(i - 1) * dh;
  for (int e = 0; e < dh; ++e) {
    if (!x.rw_B) {
      ui[e] = x.rw_c * vp[e];
      continue;
    }
    float s = 0;
    for (int d = 0; d < dh; ++d) s += vp[d] * x.rw_B[d * dh + e];
    ui[e] = s;
  }
}

/// Bilinear runway: dB[b, h] += sum_{i >= 1} vl_{i-1} g_i^T. Grid (ceil(dh dh / BLOCK), H, B), BLOCK
/// threads.
template <int BLOCK>
__global__ void runway_dB_kernel(HeadExtras x, int T, int H, int dh, const float* g, float* dB) {
  const int t = blockIdx.x * BLOCK + threadIdx.x, h = blockIdx.y, b = blockIdx.z;
  if (t >= dh * dh) return;
  const int d = t / dh, e = t % dh;
  const long long bh = static_cast<long long>(b) * H + h;
  const float* vl = x.rw_v + static_cast<long long>(b) * x.rw_stride;
  const float* gb = g + bh * T * dh;
  float s = 0;
  for (int i = 1; i < T; ++i) s += vl[static_cast<long long>(i - 1) * dh + d] * gb[static_cast<long long>(i) * dh + e];
  dB[bh * dh * dh + t] += s;
}

/// Forward. Grid (ntiles, H, B), TILE threads.
template <int TILE, int DH>
__global__ void attention_forward_kernel(MaskView m, int H, int dh, float scale, const float* slopes, HeadExtras x,
                                         const float* q, const float* k, const float* v, float* y, float* lse,
                                         float* obr) {
  __shared__ float Ks[TILE][DH];
  __shared__ float Vs[TILE][DH];
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int i = qt * TILE + threadIdx.x;
  const HeadPtrs p = head_ptrs(x, T, H, dh, b, h, slopes, q, k, v);
  float qi[DH], ki[DH], ui[DH], acc[DH], yi[DH];
  load_row(qi, p.q, i, T, dh);
  load_row(ki, p.damp ? p.k : nullptr, i, T, dh);
  load_row(ui, p.u, i, T, dh);
  for (int d = 0; d < dh; ++d) yi[d] = 0;
  for (int br = 0; br < m.nb; ++br) {
    const RowIntervals rows = row_intervals(m, br, i);
    float mx = -3.402823466e38f, l = 0;
    for (int d = 0; d < dh; ++d) acc[d] = 0;
    const int t0 = m.qt_ptr[br * (m.ntiles + 1) + qt], t1 = m.qt_ptr[br * (m.ntiles + 1) + qt + 1];
    for (int t = t0; t < t1; ++t) {
      const int kt = m.qt_list[t];
      __syncthreads();  // the previous tile is no longer read
      load_tile(Ks, p.k, kt * TILE, T, dh);
      load_tile(Vs, p.v, kt * TILE, T, dh);
      __syncthreads();
      if (i >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int j = kt * TILE + r;
        if (j >= T || !admits(rows, j)) continue;
        const long long jo = static_cast<long long>(j) * dh;
        float tau;
        const float s = logit(p, scale, i, j, dot_row(qi, Ks[r], dh), p.damp ? dot_row(ki, p.q + jo, dh) : 0.0f,
                              p.vl && runway_edge(i, j) ? dot_row(ui, p.vl + jo, dh) : 0.0f, &tau);
        if (s > mx) {  // rescale the running sum to the new maximum
          const float c = expf(mx - s);
          l *= c;
          for (int d = 0; d < dh; ++d) acc[d] *= c;
          mx = s;
        }
        const float pr = expf(s - mx);
        l += pr;
        for (int d = 0; d < dh; ++d) acc[d] += pr * Vs[r][d];
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
    for (int d = 0; d < dh; ++d)
      y[(static_cast<long long>(b) * H + h) * T * dh + static_cast<long long>(i) * dh + d] = yi[d];
}

/// Backward, query side: dq_i += scale sum_j dS_ij k_j, and dsum[br, i] = dy_i . o_br,i (the row
/// term of the softmax backward, saved for the key side). S-D: dk_i -= scale sum_j dS_ij q_j and
/// ddamp_i -= dS_ii; runway: dtau_ij = -dS_ij sigmoid(tau_ij), dvs_i += c sum_j dtau_ij vl_j (dot)
/// or B (sum_j dtau_ij vl_j) (bilinear, that sum also kept in g for dB). Grid (ntiles, H, B),
/// TILE threads; every write belongs to the thread's own row.
template <int TILE, int DH>
__global__ void attention_backward_q_kernel(MaskView m, int H, int dh, float scale, const float* slopes, HeadExtras x,
                                            const float* q, const float* k, const float* v, const float* dy,
                                            const float* lse, const float* obr, float* dsum, float* dq, float* dk,
                                            HeadExtraGrads xg) {
  __shared__ float Ks[TILE][DH];
  __shared__ float Vs[TILE][DH];
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int i = qt * TILE + threadIdx.x;
  const long long bh = static_cast<long long>(b) * H + h, io = (bh * T + i) * dh;
  const HeadPtrs p = head_ptrs(x, T, H, dh, b, h, slopes, q, k, v);
  float qi[DH], ki[DH], ui[DH], dyi[DH], dqi[DH], dki[DH], gi[DH], ddi = 0;
  load_row(qi, p.q, i, T, dh);
  load_row(ki, p.damp ? p.k : nullptr, i, T, dh);
  load_row(ui, p.u, i, T, dh);
  load_row(dyi, dy + bh * T * dh, i, T, dh);
  for (int d = 0; d < dh; ++d) dqi[d] = dki[d] = gi[d] = 0;
  for (int br = 0; br < m.nb; ++br) {
    const RowIntervals rows = row_intervals(m, br, i);
    const long long st = bh * m.nb + br;
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
      load_tile(Ks, p.k, kt * TILE, T, dh);
      load_tile(Vs, p.v, kt * TILE, T, dh);
      __syncthreads();
      if (i >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int j = kt * TILE + r;
        if (j >= T || !admits(rows, j)) continue;
        const long long jo = static_cast<long long>(j) * dh;
        float tau;
        const float s = logit(p, scale, i, j, dot_row(qi, Ks[r], dh), p.damp ? dot_row(ki, p.q + jo, dh) : 0.0f,
                              p.vl && runway_edge(i, j) ? dot_row(ui, p.vl + jo, dh) : 0.0f, &tau);
        const float ds = expf(s - L) * (dot_row(dyi, Vs[r], dh) - D);
        for (int d = 0; d < dh; ++d) dqi[d] += scale * ds * Ks[r][d];
        if (p.damp) {
          for (int d = 0; d < dh; ++d) dki[d] -= scale * ds * p.q[jo + d];
          if (i == j) ddi -= ds;
        }
        if (p.vl && runway_edge(i, j)) {
          const float dtau = -ds * sigmoid_f(tau);
          for (int d = 0; d < dh; ++d) gi[d] += dtau * p.vl[jo + d];
        }
      }
    }
  }
  if (i >= T) return;
  for (int d = 0; d < dh; ++d) dq[io + d] += dqi[d];
  if (p.damp) {
    for (int d = 0; d < dh; ++d) dk[io + d] += dki[d];
    xg.ddamp[bh * T + i] += ddi;
  }
  if (p.vl) {
    for (int d = 0; d < dh; ++d) {
      float s = 0;
      if (x.rw_B)
        for (int e = 0; e < dh; ++e) s += x.rw_B[d * dh + e] * gi[e];
      else
        s = x.rw_c * gi[d];
      xg.dvs[io + d] += s;
      if (xg.g) xg.g[io + d] = gi[d];
    }
  }
}

/// Backward, key side: dk_j += scale sum_i dS_ij q_i, dv_j += sum_i P_ij dy_i (needs dsum from the
/// query side); S-D: dq_j -= scale sum_i dS_ij k_i; runway: dvl_j += sum_i dtau_ij u_i. Grid
/// (ntiles, H, B), TILE threads (one per key row; every write belongs to the thread's own row).
template <int TILE, int DH>
__global__ void attention_backward_kv_kernel(MaskView m, int H, int dh, float scale, const float* slopes, HeadExtras x,
                                             const float* q, const float* k, const float* v, const float* dy,
                                             const float* lse, const float* dsum, float* dq, float* dk, float* dv,
                                             HeadExtraGrads xg) {
  __shared__ float Qs[TILE][DH];
  __shared__ float dYs[TILE][DH];
  __shared__ float Ls[TILE], Ds[TILE];
  __shared__ int Ln[TILE], Llo[TILE][kMaxIntervals], Lhi[TILE][kMaxIntervals];
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int j = kt * TILE + threadIdx.x;
  const long long bh = static_cast<long long>(b) * H + h, jo = (bh * T + j) * dh;
  const HeadPtrs p = head_ptrs(x, T, H, dh, b, h, slopes, q, k, v);
  const float* dyh = dy + bh * T * dh;
  float kj[DH], vj[DH], qj[DH], vlj[DH], dkj[DH], dvj[DH], dqj[DH], dvlj[DH];
  load_row(kj, p.k, j, T, dh);
  load_row(vj, p.v, j, T, dh);
  load_row(qj, p.damp ? p.q : nullptr, j, T, dh);
  load_row(vlj, p.vl, j, T, dh);
  for (int d = 0; d < dh; ++d) dkj[d] = dvj[d] = dqj[d] = dvlj[d] = 0;
  for (int br = 0; br < m.nb; ++br) {
    const long long st = bh * m.nb + br;
    const int t0 = m.kt_ptr[br * (m.ntiles + 1) + kt], t1 = m.kt_ptr[br * (m.ntiles + 1) + kt + 1];
    for (int t = t0; t < t1; ++t) {
      const int qt = m.kt_list[t];
      __syncthreads();
      load_tile(Qs, p.q, qt * TILE, T, dh);
      load_tile(dYs, dyh, qt * TILE, T, dh);
      {
        const int i = qt * TILE + threadIdx.x;
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
        const long long io = static_cast<long long>(i) * dh;
        float tau;
        const float s = logit(p, scale, i, j, dot_row(Qs[r], kj, dh), p.damp ? dot_row(p.k + io, qj, dh) : 0.0f,
                              p.vl && runway_edge(i, j) ? dot_row(p.u + io, vlj, dh) : 0.0f, &tau);
        const float pr = expf(s - Ls[r]);
        const float ds = pr * (dot_row(dYs[r], vj, dh) - Ds[r]);
        for (int d = 0; d < dh; ++d) {
          dvj[d] += pr * dYs[r][d];
          dkj[d] += scale * ds * Qs[r][d];
        }
        if (p.damp)
          for (int d = 0; d < dh; ++d) dqj[d] -= scale * ds * p.k[io + d];
        if (p.vl && runway_edge(i, j)) {
          const float dtau = -ds * sigmoid_f(tau);
          for (int d = 0; d < dh; ++d) dvlj[d] += dtau * p.u[io + d];
        }
      }
    }
  }
  if (j >= T) return;
  for (int d = 0; d < dh; ++d) {
    dk[jo + d] += dkj[d];
    dv[jo + d] += dvj[d];
  }
  if (p.damp)
    for (int d = 0; d < dh; ++d) dq[jo + d] += dqj[d];
  if (p.vl)
    for (int d = 0; d < dh; ++d) xg.dvl[jo + d] += dvlj[d];
}

// ---- Plain softmax heads (no S-D, no runway; ALiBi allowed): the trainer's fast path ----------
// The same tile loop and the same float operations in the same order as the kernels above (the
// dot products also add the zero products past dh, which leaves each sum unchanged), but every
// loop over a row runs to the compile-time capacity DH and is unrolled, so a thread's row arrays
// live in registers instead of local memory (the kernels above index them with the runtime dh).
// Measured on an H100 (docs/benchmarks.md "CUDA path on a device"): the attention kernels were 79%
// of a GPT-2-shape training step's GPU time before this path.

/// Row `row` of a [T, dh] head matrix into registers, zero past dh and past T.
template <int DH>
__device__ __forceinline__ void load_row_padded(float (&dst)[DH], const float* src, int row, int T, int dh) {
  CF_UNROLL
  for (int d = 0; d < DH; ++d) dst[d] = row < T && d < dh ? src[static_cast<long long>(row) * dh + d] : 0.0f;
}

/// Tile rows [row0, row0 + TILE) into shared memory, one row per thread, zero past dh and past T.
template <int TILE, int DH>
__device__ __forceinline__ void load_tile_padded(float (&dst)[TILE][DH], const float* src, int row0, int T, int dh) {
  const int j = row0 + static_cast<int>(threadIdx.x);
  CF_UNROLL
  for (int d = 0; d < DH; ++d) dst[threadIdx.x][d] = j < T && d < dh ? src[static_cast<long long>(j) * dh + d] : 0.0f;
}

template <int DH>
__device__ __forceinline__ float dot_padded(const float (&a)[DH], const float* b) {
  float s = 0;
  CF_UNROLL
  for (int d = 0; d < DH; ++d) s += a[d] * b[d];
  return s;
}

/// Forward, plain heads. Grid (ntiles, H, B), TILE threads. Same outputs as
/// attention_forward_kernel with no extras: y (sum of the branch outputs), lse, obr.
template <int TILE, int DH>
__global__ void attention_forward_plain_kernel(MaskView m, int H, int dh, float scale, const float* slopes,
                                               const float* q, const float* k, const float* v, float* y, float* lse,
                                               float* obr) {
  __shared__ float Ks[TILE][DH];
  __shared__ float Vs[TILE][DH];
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int i = qt * TILE + threadIdx.x;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  float qi[DH], acc[DH];
  load_row_padded(qi, q + off, i, T, dh);
  for (int br = 0; br < m.nb; ++br) {
    const RowIntervals rows = row_intervals(m, br, i);
    float mx = -3.402823466e38f, l = 0;
    CF_UNROLL
    for (int d = 0; d < DH; ++d) acc[d] = 0;
    const int t0 = m.qt_ptr[br * (m.ntiles + 1) + qt], t1 = m.qt_ptr[br * (m.ntiles + 1) + qt + 1];
    for (int t = t0; t < t1; ++t) {
      const int kt = m.qt_list[t];
      __syncthreads();  // the previous tile is no longer read
      load_tile_padded(Ks, k + off, kt * TILE, T, dh);
      load_tile_padded(Vs, v + off, kt * TILE, T, dh);
      __syncthreads();
      if (i >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int j = kt * TILE + r;
        if (j >= T || !admits(rows, j)) continue;
        float s = scale * dot_padded(qi, Ks[r]);
        s -= slope * static_cast<float>(i - j);
        if (s > mx) {  // rescale the running sum to the new maximum
          const float c = expf(mx - s);
          l *= c;
          CF_UNROLL
          for (int d = 0; d < DH; ++d) acc[d] *= c;
          mx = s;
        }
        const float pr = expf(s - mx);
        l += pr;
        CF_UNROLL
        for (int d = 0; d < DH; ++d) acc[d] += pr * Vs[r][d];
      }
    }
    if (i < T) {
      const long long st = bh * m.nb + br;
      lse[st * T + i] = l > 0 ? mx + logf(l) : -3.402823466e38f;  // no admitted key: branch adds 0
      const float inv = l > 0 ? 1.0f / l : 0.0f;
      float* yi = y + off + static_cast<long long>(i) * dh;
      CF_UNROLL
      for (int d = 0; d < DH; ++d)
        if (d < dh) {
          const float o = acc[d] * inv;
          obr[(st * T + i) * dh + d] = o;
          yi[d] = br == 0 ? o : yi[d] + o;  // the thread's own row: the sum over branches
        }
    }
  }
}

/// Backward, query side, plain heads: dq_i += scale sum_j dS_ij k_j and dsum (as
/// attention_backward_q_kernel with no extras). Grid (ntiles, H, B), TILE threads.
template <int TILE, int DH>
__global__ void attention_backward_q_plain_kernel(MaskView m, int H, int dh, float scale, const float* slopes,
                                                  const float* q, const float* k, const float* v, const float* dy,
                                                  const float* lse, const float* obr, float* dsum, float* dq) {
  __shared__ float Ks[TILE][DH];
  __shared__ float Vs[TILE][DH];
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int i = qt * TILE + threadIdx.x;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh, io = off + static_cast<long long>(i) * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  float qi[DH], dyi[DH], dqi[DH];
  load_row_padded(qi, q + off, i, T, dh);
  load_row_padded(dyi, dy + off, i, T, dh);
  CF_UNROLL
  for (int d = 0; d < DH; ++d) dqi[d] = 0;
  for (int br = 0; br < m.nb; ++br) {
    const RowIntervals rows = row_intervals(m, br, i);
    const long long st = bh * m.nb + br;
    float D = 0, L = 0;
    if (i < T) {
      CF_UNROLL
      for (int d = 0; d < DH; ++d)
        if (d < dh) D += dyi[d] * obr[(st * T + i) * dh + d];
      dsum[st * T + i] = D;
      L = lse[st * T + i];
    }
    const int t0 = m.qt_ptr[br * (m.ntiles + 1) + qt], t1 = m.qt_ptr[br * (m.ntiles + 1) + qt + 1];
    for (int t = t0; t < t1; ++t) {
      const int kt = m.qt_list[t];
      __syncthreads();
      load_tile_padded(Ks, k + off, kt * TILE, T, dh);
      load_tile_padded(Vs, v + off, kt * TILE, T, dh);
      __syncthreads();
      if (i >= T) continue;
      for (int r = 0; r < TILE; ++r) {
        const int j = kt * TILE + r;
        if (j >= T || !admits(rows, j)) continue;
        float s = scale * dot_padded(qi, Ks[r]);
        s -= slope * static_cast<float>(i - j);
        const float ds = expf(s - L) * (dot_padded(dyi, Vs[r]) - D);
        CF_UNROLL
        for (int d = 0; d < DH; ++d) dqi[d] += scale * ds * Ks[r][d];
      }
    }
  }
  if (i >= T) return;
  CF_UNROLL
  for (int d = 0; d < DH; ++d)
    if (d < dh) dq[io + d] += dqi[d];
}

/// Backward, key side, plain heads: dk_j += scale sum_i dS_ij q_i, dv_j += sum_i P_ij dy_i (as
/// attention_backward_kv_kernel with no extras). Grid (ntiles, H, B), TILE threads.
template <int TILE, int DH>
__global__ void attention_backward_kv_plain_kernel(MaskView m, int H, int dh, float scale, const float* slopes,
                                                   const float* q, const float* k, const float* v, const float* dy,
                                                   const float* lse, const float* dsum, float* dk, float* dv) {
  __shared__ float Qs[TILE][DH];
  __shared__ float dYs[TILE][DH];
  __shared__ float Ls[TILE], Ds[TILE];
  __shared__ int Ln[TILE], Llo[TILE][kMaxIntervals], Lhi[TILE][kMaxIntervals];
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T;
  const int j = kt * TILE + threadIdx.x;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh, jo = off + static_cast<long long>(j) * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  float kj[DH], vj[DH], dkj[DH], dvj[DH];
  load_row_padded(kj, k + off, j, T, dh);
  load_row_padded(vj, v + off, j, T, dh);
  CF_UNROLL
  for (int d = 0; d < DH; ++d) dkj[d] = dvj[d] = 0;
  for (int br = 0; br < m.nb; ++br) {
    const long long st = bh * m.nb + br;
    const int t0 = m.kt_ptr[br * (m.ntiles + 1) + kt], t1 = m.kt_ptr[br * (m.ntiles + 1) + kt + 1];
    for (int t = t0; t < t1; ++t) {
      const int qt = m.kt_list[t];
      __syncthreads();
      load_tile_padded(Qs, q + off, qt * TILE, T, dh);
      load_tile_padded(dYs, dy + off, qt * TILE, T, dh);
      {
        const int i = qt * TILE + threadIdx.x;
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
        float s = scale * dot_padded(kj, Qs[r]);
        s -= slope * static_cast<float>(i - j);
        const float pr = expf(s - Ls[r]);
        const float ds = pr * (dot_padded(vj, dYs[r]) - Ds[r]);
        CF_UNROLL
        for (int d = 0; d < DH; ++d) {
          dvj[d] += pr * dYs[r][d];
          dkj[d] += scale * ds * Qs[r][d];
        }
      }
    }
  }
  if (j >= T) return;
  CF_UNROLL
  for (int d = 0; d < DH; ++d)
    if (d < dh) {
      dk[jo + d] += dkj[d];
      dv[jo + d] += dvj[d];
    }
}

}  // namespace cf::gpu::kernels
