#pragma once
// FlashAttention-2 style float32 attention (issue 31), forward and backward, on the tile plans of
// cf/gpu/attention.hpp: plain softmax heads, S-D heads (skew logits and diagonal damping) and
// runway heads (Runway (Lee & Clark), dot and bilinear forms), each with ALiBi, learned or no
// positions (RoPE applied to q and k before the call). The same logits, outputs and gradient
// buffers as the kernels of attention.cuh (y, lse, obr forward; dq, dk, dv and the extras'
// gradients ddamp, dvs, dvl, g accumulated, dsum backward), which stay as the reference
// (CF_GPU_ATTENTION=plain / generic). The head's features are a template parameter F (kFlashSd,
// kFlashRunway): every extra term sits under `if constexpr`, so plain heads (F = 0) compile to the
// code they had before the features existed.
//
// Tiles: 64 queries x 64 keys (kFlashTile). A block owns one 64-row tile; its NW warps each own
// 64 / NW rows, and a thread a register micro-tile of RT = 16 / NW rows x 8 columns of the 64 x 64
// score tile (rows r0 + 4 r, columns cg + 8 c) and of RT rows x dh / 8 columns of its output
// (columns cg + 8 e of every 32-column chunk). The head dimension is staged in shared memory in
// chunks of 32 columns (kFlashChunk) so that 48 KB of static shared memory hold every dh <= 128:
// each chunk load reads whole 128-byte row segments (a warp one row: coalesced) and stores into
// rows padded to 33 floats; the probability tile's rows are padded to 72 floats. With those pads
// every shared-memory access of the micro-tile loops is conflict-free: a warp's 4 row groups rg
// read 4 rows (banks 1 or 8 apart) and its 8 column groups cg 8 consecutive rows or columns.
// Row maxima and sums, shared by the 8 threads of a row, are reduced through shared memory (the
// emulation header has no warp shuffles), in a fixed order.
//
// The tile plan (MaskView::fq_* / fk_*) lists per branch and tile only the non-empty tiles,
// flagged full (every pair of the 64 x 64 tile admitted, all positions < T: no per-element test)
// or partial (the rows' key intervals, staged in shared memory, are tested per element). The
// extras change the logits of admitted pairs only (a runway edge 1 <= j <= i - 2 outside the mask
// stays refused, as in the reference kernels), so the plan is the same for every head.
//
// The extras' products are staged like q_i.k_j, through the same two chunk buffers, one more
// pass over the head dimension each: S-D's k_i.q_j (the block's k rows against the visited q
// rows), the runway's tau_ij = u_i.vl_j (u rows against the last head's value rows), the latter
// only on tiles that hold a runway edge.
//
// Backward, FlashAttention-2's five products over a (query tile, key tile) pair: S = Q K^T,
// P = exp(S - L), dV += P^T dO, dP = dO V^T, dS = P (dP - D), dK += dS^T Q, dQ += dS K, with
// D_i = dO_i . O_i per branch precomputed (flash_dsum_kernel). dK and dV: one block per key tile
// looping over the query tiles of the plan (flash_backward_kv_kernel); dQ: one block per query
// tile looping over the key tiles (flash_backward_q_kernel), which recomputes S and dP (seven
// products executed per pair, not five) instead of adding dQ with atomics: every output element
// is summed by one thread in one fixed order, so results are bit-reproducible run to run (the
// trainer's checkpoints are compared bit for bit). The extras' gradients follow the same split:
// S-D's dq_j -= scale sum_i dS_ij k_i and the runway's dvl_j += sum_i dtau_ij u_i on the key side,
// S-D's dk_i -= scale sum_j dS_ij q_j, ddamp_i -= dS_ii and the runway's g_i = sum_j dtau_ij vl_j
// (then dvs_i) on the query side, dtau_ij = -dS_ij sigmoid(tau_ij) on runway edges.
//
// Round (cf/gpu/precision.hpp: RoundFp32, the default, RoundTf32, RoundBf16) rounds every operand
// of the products as it is staged (Q, K, V, dO, and P / dS as they are stored into the tile), the
// softmax statistics and the accumulators staying float32: the emulated reference of the tensor-core
// kernels (kernels/flash_attention_mma.cuh), whose products of rounded operands are exact in float32.
// Plain heads only: S-D and runway heads (F != 0) run with RoundFp32 (float32 under every policy).
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/kernels/attention.cuh"
#include "cf/gpu/precision.hpp"

namespace cf::gpu::kernels {

inline constexpr int kFlashChunk = 32;         // head-dimension columns staged at a time
inline constexpr int kFlashForwardWarps = 8;   // 256 threads, 2 rows x 8 columns each
inline constexpr int kFlashBackwardWarps = 8;  // 256 threads, 2 rows x 8 columns each
/// Head features (the kernels' template parameter F, or-ed): S-D, runway (dot or bilinear).
inline constexpr int kFlashSd = 1;
inline constexpr int kFlashRunway = 2;
// Blocks per SM the register budget aims at (CF_LAUNCH_BOUNDS): two (at most 128 registers a
// thread) up to dh 64; one at dh 128, where the forward's and the key side's accumulators need
// more than 128 registers (ptxas spilled them under that bound). Runway heads also take one at
// dh 64 (tau, its softplus and the key side's dvl accumulator spilled 132 to 352 bytes under
// 128 registers). The query side keeps two for plain heads at every dh; with extras it carries a
// second accumulator (S-D's dk, the runway's g) and follows the others.
template <int DH, int F = 0>
inline constexpr int kFlashMinBlocks = DH > 64 || (DH > 32 && (F & kFlashRunway) != 0) ? 1 : 2;
template <int DH, int F>
inline constexpr int kFlashQMinBlocks = F == 0 ? 2 : kFlashMinBlocks<DH, F>;
inline constexpr int kFlashChunkStride = kFlashChunk + 1;  // rows of a staged chunk 1 bank apart
inline constexpr int kFlashPStride = kFlashTile + 8;       // rows of the P / dS tile 8 banks apart

namespace flash {

constexpr int kTile = kFlashTile;
constexpr float kNoMax = -3.402823466e38f;  // the running maximum before any admitted key

using Chunk = float[kTile][kFlashChunkStride];
using PTile = float[kTile][kFlashPStride];

/// The key intervals of the 64 rows of a query tile for one branch (staged for partial tiles).
struct TileRows {
  int n[kTile];
  int lo[kTile][kMaxIntervals];
  int hi[kTile][kMaxIntervals];
};

/// Rows [row0, row0 + 64) of branch br into `s` (threads 0..63, one row each). The caller
/// brackets it with barriers.
__device__ __forceinline__ void stage_rows(TileRows& s, const MaskView& m, int br, int row0) {
  const int t = static_cast<int>(threadIdx.x);
  if (t >= kTile) return;
  const RowIntervals r = row_intervals(m, br, row0 + t);
  s.n[t] = r.n;
  for (int c = 0; c < r.n; ++c) s.lo[t][c] = r.lo[c], s.hi[t][c] = r.hi[c];
}

__device__ __forceinline__ bool staged_admits(const TileRows& s, int r, int j) {
  for (int c = 0; c < s.n[r]; ++c)
    if (j >= s.lo[r][c] && j <= s.hi[r][c]) return true;
  return false;
}

/// Columns [col0, col0 + 32) of rows [row0, row0 + 64) of a [T, dh] head matrix into `dst`, zero
/// past T and past dh. Warp w loads rows w, w + NW, ...: 32 consecutive floats of one row per
/// load (coalesced), stored into one padded row (conflict-free).
template <int NT, class Round = RoundFp32>
__device__ __forceinline__ void load_chunk(Chunk& dst, const float* src, int row0, int T, int dh, int col0) {
  const int lane = static_cast<int>(threadIdx.x) % 32, c = col0 + lane;
  for (int r = static_cast<int>(threadIdx.x) / 32; r < kTile; r += NT / 32) {
    const int row = row0 + r;
    dst[r][lane] = Round()(row < T && c < dh ? src[static_cast<long long>(row) * dh + c] : 0.0f);
  }
}

/// acc[r][c] += A[r0 + 4 r] . B[cg + 8 c] over one staged chunk (the 32 columns in order, so a
/// logit sums its products in the same order as the reference kernels' dot products).
template <int RT>
__device__ __forceinline__ void dot_chunk(float (&acc)[RT][8], const Chunk& A, const Chunk& B, int r0, int cg) {
  CF_UNROLL_N(8)
  for (int d = 0; d < kFlashChunk; ++d) {
    float a[RT], b[8];
    CF_UNROLL
    for (int r = 0; r < RT; ++r) a[r] = A[r0 + 4 * r][d];
    CF_UNROLL
    for (int c = 0; c < 8; ++c) b[c] = B[cg + 8 * c][d];
    CF_UNROLL
    for (int r = 0; r < RT; ++r) {
      CF_UNROLL
      for (int c = 0; c < 8; ++c) acc[r][c] += a[r] * b[c];
    }
  }
}

/// out[r][e0 + e] += sum_x P[r0 + 4 r][x] V[x][cg + 8 e] over the 64 columns x of P (one chunk of
/// the output's columns: P V, P^T dO, dS^T Q, dS K).
template <int RT, int NO>
__device__ __forceinline__ void mul_chunk(float (&out)[RT][NO], int e0, const PTile& P, const Chunk& V, int r0,
                                          int cg) {
  CF_UNROLL_N(8)
  for (int x = 0; x < kTile; ++x) {
    float p[RT], v[4];
    CF_UNROLL
    for (int r = 0; r < RT; ++r) p[r] = P[r0 + 4 * r][x];
    CF_UNROLL
    for (int e = 0; e < 4; ++e) v[e] = V[x][cg + 8 * e];
    CF_UNROLL
    for (int r = 0; r < RT; ++r) {
      CF_UNROLL
      for (int e = 0; e < 4; ++e) out[r][e0 + e] += p[r] * v[e];
    }
  }
}

/// The thread's place in the micro-tile layout of NW warps: first row r0 (rows r0 + 4 r) and
/// column group cg (columns cg + 8 c).
template <int NW>
struct Place {
  static constexpr int RT = kTile / (4 * NW);
  int r0, cg;
};

template <int NW>
__device__ __forceinline__ Place<NW> place() {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  return {t / 32 * 4 * Place<NW>::RT + lane / 8, lane % 8};
}

/// acc += A B^T for the block's rows a0.. of `a` against rows b0.. of `b` (both [T, dh]), chunk by
/// chunk through the staging buffers As, Bs (a score-shaped product: S, dP, S-D's k_i.q_j, tau).
template <int NW, int NC, class Round>
__device__ __forceinline__ void dot_rows(float (&acc)[Place<NW>::RT][8], Chunk& As, Chunk& Bs, const float* a, int a0,
                                         const float* b, int b0, int T, int dh, const Place<NW>& at) {
  CF_UNROLL
  for (int ch = 0; ch < NC; ++ch) {
    if (ch * kFlashChunk >= dh) continue;  // uniform over the block
    __syncthreads();                       // the previous reads of As / Bs (and of P by the caller) are done
    load_chunk<32 * NW, Round>(As, a, a0, T, dh, ch * kFlashChunk);
    load_chunk<32 * NW, Round>(Bs, b, b0, T, dh, ch * kFlashChunk);
    __syncthreads();
    dot_chunk<Place<NW>::RT>(acc, As, Bs, at.r0, at.cg);
  }
}

/// out += P V for the staged tile P (written by the caller before the call) and rows v0.. of the
/// [T, dh] matrix `v`, staged chunk by chunk through Vs (an output-shaped product: P V, dS^T Q,
/// dS K and the extras' dS^T K, dtau^T u, dS Q, dtau vl).
template <int NW, int NC, int NO, class Round>
__device__ __forceinline__ void mul_rows(float (&out)[Place<NW>::RT][NO], Chunk& Vs, const PTile& P, const float* v,
                                         int v0, int T, int dh, const Place<NW>& at) {
  CF_UNROLL
  for (int ch = 0; ch < NC; ++ch) {
    if (ch * kFlashChunk >= dh) continue;
    __syncthreads();  // P is written; the previous chunk's reads of Vs are done
    load_chunk<32 * NW, Round>(Vs, v, v0, T, dh, ch * kFlashChunk);
    __syncthreads();
    mul_chunk<Place<NW>::RT, NO>(out, 4 * ch, P, Vs, at.r0, at.cg);
  }
}

/// A block's visits of one tile, counted where the caller asks (tests: skipped tiles stay unseen).
__device__ __forceinline__ void count_visit(int* visits) {
  if (visits && threadIdx.x == 0) atomicAdd(visits, 1);
}

/// The per-(sequence, head) operands of the extras: damp [T] of this head, the runway's u and vl
/// ([T, dh] rows of sequence b; null where off).
struct Operands {
  const float* damp;
  const float* u;
  const float* vl;
};

template <int F>
__device__ __forceinline__ Operands operands(const HeadExtras& x, int T, int dh, int b, long long bh) {
  Operands o{nullptr, nullptr, nullptr};
  if constexpr ((F & kFlashSd) != 0) o.damp = x.damp + bh * T;
  if constexpr ((F & kFlashRunway) != 0) {
    o.u = x.rw_u + static_cast<long long>(b) * T * dh;
    o.vl = x.rw_v + static_cast<long long>(b) * x.rw_stride;
  }
  return o;
}

/// Whether the tile of queries i0.. and keys j0.. holds a runway edge 1 <= j <= i - 2.
__device__ __forceinline__ bool tile_has_runway(int i0, int j0) { return j0 <= i0 + kTile - 3; }

/// The logit of pair (i, j) from qk = q_i.k_j, as the reference's logit(): S-D's
/// scale (qk - kq) - [i = j] damp_i (kq = k_i.q_j), ALiBi, the runway's -softplus(tau) on edges.
template <int F>
__device__ __forceinline__ float logit(float scale, float slope, int i, int j, float qk, float kq, float damp_i,
                                       float tau) {
  float lg;
  if constexpr ((F & kFlashSd) != 0)
    lg = scale * (qk - kq) - (i == j ? damp_i : 0.0f);
  else
    lg = scale * qk;
  lg -= slope * static_cast<float>(i - j);
  if constexpr ((F & kFlashRunway) != 0)
    if (runway_edge(i, j)) lg -= softplus_f(tau);
  return lg;
}

/// dtau_ij = -dS_ij sigmoid(tau_ij) on runway edges, 0 elsewhere.
__device__ __forceinline__ float dtau(int i, int j, float ds, float tau) {
  return runway_edge(i, j) ? -ds * sigmoid_f(tau) : 0.0f;
}

}  // namespace flash

/// Forward. Grid (ftiles, H, B), 32 kFlashForwardWarps threads. Outputs as
/// attention_forward_kernel: y (sum of the branch outputs), lse [B, H, nb, T], obr.
/// visits: null, or a counter of the (query tile, key tile, branch) visits.
template <int DH, int F = 0, class Round = RoundFp32>
__global__ void CF_LAUNCH_BOUNDS(32 * kFlashForwardWarps, (kFlashMinBlocks<DH, F>))
    flash_forward_kernel(MaskView m, int H, int dh, float scale, const float* slopes, HeadExtras x, const float* q,
                         const float* k, const float* v, float* y, float* lse, float* obr, int* visits) {
  using namespace flash;
  constexpr bool SD = (F & kFlashSd) != 0, RW = (F & kFlashRunway) != 0;
  constexpr int NW = kFlashForwardWarps, RT = Place<NW>::RT, NC = DH / kFlashChunk, NO = DH / 8;
  __shared__ Chunk Qs;
  __shared__ Chunk KVs;  // K, then V, chunk by chunk
  __shared__ PTile Ps;
  __shared__ float red[kTile][8];  // the 8 partials of each row (max, then sum)
  __shared__ TileRows rows;
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T, i0 = qt * kTile;
  const Place<NW> at = place<NW>();
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  const Operands xo = operands<F>(x, T, dh, b, bh);
  float dmp[RT];  // S-D: the damping of the thread's rows
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    const int i = i0 + at.r0 + 4 * r;
    dmp[r] = SD && i < T ? xo.damp[i] : 0.0f;
  }
  for (int br = 0; br < m.nb; ++br) {
    __syncthreads();  // the previous branch's reads of rows and red are done
    stage_rows(rows, m, br, i0);
    float mx[RT], l[RT], o[RT][NO];
    CF_UNROLL
    for (int r = 0; r < RT; ++r) {
      mx[r] = kNoMax, l[r] = 0;
      CF_UNROLL
      for (int e = 0; e < NO; ++e) o[r][e] = 0;
    }
    const int* plan = m.fq_ptr + br * (m.ftiles + 1) + qt;
    for (int t = plan[0]; t < plan[1]; ++t) {
      const int kt = m.fq_list[t] >> 1, j0 = kt * kTile;
      const bool full = m.fq_list[t] & 1;
      count_visit(visits);
      float s[RT][8] = {}, kq[RT][8] = {}, tau[RT][8] = {};
      dot_rows<NW, NC, Round>(s, Qs, KVs, q + off, i0, k + off, j0, T, dh, at);
      if constexpr (SD) dot_rows<NW, NC, Round>(kq, Qs, KVs, k + off, i0, q + off, j0, T, dh, at);
      if constexpr (RW)
        if (tile_has_runway(i0, j0)) dot_rows<NW, NC, Round>(tau, Qs, KVs, xo.u, i0, xo.vl, j0, T, dh, at);
      // logits (the reference's expression), the mask, each thread's share of the row maxima
      unsigned live = 0;
      CF_UNROLL
      for (int r = 0; r < RT; ++r) {
        const int il = at.r0 + 4 * r, i = i0 + il;
        float pm = kNoMax;
        CF_UNROLL
        for (int c = 0; c < 8; ++c) {
          const int j = j0 + at.cg + 8 * c;
          const float lg = logit<F>(scale, slope, i, j, s[r][c], kq[r][c], dmp[r], tau[r][c]);
          s[r][c] = lg;
          if (full || staged_admits(rows, il, j)) {
            live |= 1u << (8 * r + c);
            pm = fmaxf(pm, lg);
          }
        }
        red[il][at.cg] = pm;
      }
      __syncthreads();
      // online softmax: the new running maximum rescales the sums and the output so far
      CF_UNROLL
      for (int r = 0; r < RT; ++r) {
        const int il = at.r0 + 4 * r;
        float tmax = red[il][0];
        for (int x = 1; x < 8; ++x) tmax = fmaxf(tmax, red[il][x]);
        const float mn = fmaxf(mx[r], tmax), alpha = expf(mx[r] - mn);
        mx[r] = mn;
        l[r] *= alpha;
        CF_UNROLL
        for (int e = 0; e < NO; ++e) o[r][e] *= alpha;
        CF_UNROLL
        for (int c = 0; c < 8; ++c) {
          const float p = (live >> (8 * r + c)) & 1u ? expf(s[r][c] - mn) : 0.0f;
          l[r] += p;
          Ps[il][at.cg + 8 * c] = Round()(p);
        }
      }
      mul_rows<NW, NC, NO, Round>(o, KVs, Ps, v + off, j0, T, dh, at);
    }
    __syncthreads();  // the last tile's reads of red are done
    CF_UNROLL
    for (int r = 0; r < RT; ++r) red[at.r0 + 4 * r][at.cg] = l[r];
    __syncthreads();
    const long long st = bh * m.nb + br;
    CF_UNROLL
    for (int r = 0; r < RT; ++r) {
      const int il = at.r0 + 4 * r, i = i0 + il;
      if (i >= T) continue;
      float sum = 0;
      for (int x = 0; x < 8; ++x) sum += red[il][x];
      if (at.cg == 0) lse[st * T + i] = sum > 0 ? mx[r] + logf(sum) : kNoMax;  // no admitted key: the branch adds 0
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      float* yi = y + off + static_cast<long long>(i) * dh;
      float* oi = obr + (st * T + i) * dh;
      CF_UNROLL
      for (int ch = 0; ch < NC; ++ch) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int d = ch * kFlashChunk + at.cg + 8 * e;
          if (d >= dh) continue;
          const float val = o[r][4 * ch + e] * inv;
          oi[d] = val;
          yi[d] = br == 0 ? val : yi[d] + val;  // the thread's own elements: the sum over branches
        }
      }
    }
  }
}

/// D = dy_i . o_br,i for every (branch, row): dsum [B, H, nb, T]. Grid (ftiles, H, B), 32 NW
/// threads (a template: header-defined kernels, one per TU); warp w sums rows w, w + NW, ... (lanes over the columns,
/// coalesced), the 32 lane partials added by one thread per row in lane order.
template <int NW>
__global__ void flash_dsum_kernel(int nb, int T, int H, int dh, const float* dy, const float* obr, float* dsum) {
  using namespace flash;
  __shared__ float part[kTile][33];
  const int i0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z;
  const int lane = static_cast<int>(threadIdx.x) % 32, w = static_cast<int>(threadIdx.x) / 32;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  for (int br = 0; br < nb; ++br) {
    const long long st = bh * nb + br;
    for (int r = w; r < kTile; r += NW) {
      const int i = i0 + r;
      float acc = 0;
      if (i < T)
        for (int d = lane; d < dh; d += 32)
          acc += dy[off + static_cast<long long>(i) * dh + d] * obr[(st * T + i) * dh + d];
      part[r][lane] = acc;
    }
    __syncthreads();
    const int t = static_cast<int>(threadIdx.x);
    if (t < kTile && i0 + t < T) {
      float D = 0;
      for (int x = 0; x < 32; ++x) D += part[t][x];
      dsum[st * T + i0 + t] = D;
    }
    __syncthreads();  // part is read before the next branch writes it
  }
}

/// Backward, key side: dk_j += scale sum_i dS_ij q_i, dv_j += sum_i P_ij dy_i over the query
/// tiles of the plan (needs dsum); S-D: dq_j -= scale sum_i dS_ij k_i; runway: dvl_j += sum_i
/// dtau_ij u_i. Grid (ftiles, H, B), 32 kFlashBackwardWarps threads; the micro-tiles are
/// transposed (rows = the block's keys, columns = the visited tile's queries).
template <int DH, int F = 0, class Round = RoundFp32>
__global__ void CF_LAUNCH_BOUNDS(32 * kFlashBackwardWarps, (kFlashMinBlocks<DH, F>))
    flash_backward_kv_kernel(MaskView m, int H, int dh, float scale, const float* slopes, HeadExtras x, const float* q,
                             const float* k, const float* v, const float* dy, const float* lse, const float* dsum,
                             float* dq, float* dk, float* dv, HeadExtraGrads xg, int* visits) {
  using namespace flash;
  constexpr bool SD = (F & kFlashSd) != 0, RW = (F & kFlashRunway) != 0;
  constexpr int NW = kFlashBackwardWarps, NT = 32 * NW, RT = Place<NW>::RT, NC = DH / kFlashChunk, NO = DH / 8;
  __shared__ Chunk As;  // K, V, (S-D) Q or (runway) vl chunk (the block's keys)
  __shared__ Chunk Bs;  // Q, dO, (S-D) K or (runway) u chunk (the visited queries)
  __shared__ PTile Ps;  // P^T, then dS^T, then (runway) dtau^T: [key][query]
  __shared__ float Ls[kTile], Ds[kTile];
  __shared__ TileRows rows;
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T, j0 = kt * kTile;
  const Place<NW> at = place<NW>();
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  const Operands xo = operands<F>(x, T, dh, b, bh);
  float dmp[RT];  // S-D: the damping of the thread's rows (the diagonal pair's query is the key)
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    const int j = j0 + at.r0 + 4 * r;
    dmp[r] = SD && j < T ? xo.damp[j] : 0.0f;
  }
  float dka[RT][NO], dva[RT][NO], dqa[RT][NO], dvla[RT][NO];
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    CF_UNROLL
    for (int e = 0; e < NO; ++e) dka[r][e] = dva[r][e] = dqa[r][e] = dvla[r][e] = 0;
  }
  for (int br = 0; br < m.nb; ++br) {
    const long long st = bh * m.nb + br;
    const int* plan = m.fk_ptr + br * (m.ftiles + 1) + kt;
    for (int t = plan[0]; t < plan[1]; ++t) {
      const int i0 = (m.fk_list[t] >> 1) * kTile;
      const bool full = m.fk_list[t] & 1, edges = RW && tile_has_runway(i0, j0);
      count_visit(visits);
      __syncthreads();  // the previous tile's reads of rows, Ls, Ds, Ps are done
      if (!full) stage_rows(rows, m, br, i0);
      const int tt = static_cast<int>(threadIdx.x);
      if (tt < kTile) {
        const int i = i0 + tt;
        Ls[tt] = i < T ? lse[st * T + i] : 0.0f;
        Ds[tt] = i < T ? dsum[st * T + i] : 0.0f;
      }
      float s[RT][8] = {}, dp[RT][8] = {}, kq[RT][8] = {}, tau[RT][8] = {};
      dot_rows<NW, NC, Round>(s, As, Bs, k + off, j0, q + off, i0, T, dh, at);
      if constexpr (SD) dot_rows<NW, NC, Round>(kq, As, Bs, q + off, j0, k + off, i0, T, dh, at);  // k_i.q_j
      if (edges) dot_rows<NW, NC, Round>(tau, As, Bs, xo.vl, j0, xo.u, i0, T, dh, at);             // u_i.vl_j
      // P^T (0 where the mask refuses), kept in s and staged for dV
      CF_UNROLL
      for (int r = 0; r < RT; ++r) {
        const int jl = at.r0 + 4 * r, j = j0 + jl;
        CF_UNROLL
        for (int c = 0; c < 8; ++c) {
          const int il = at.cg + 8 * c, i = i0 + il;
          const float lg = logit<F>(scale, slope, i, j, s[r][c], kq[r][c], dmp[r], tau[r][c]);
          s[r][c] = full || staged_admits(rows, il, j) ? expf(lg - Ls[il]) : 0.0f;
          Ps[jl][il] = Round()(s[r][c]);
        }
      }
      CF_UNROLL
      for (int ch = 0; ch < NC; ++ch) {
        if (ch * kFlashChunk >= dh) continue;
        __syncthreads();  // Ps is written; the previous chunk's reads are done
        load_chunk<NT, Round>(As, v + off, j0, T, dh, ch * kFlashChunk);
        load_chunk<NT, Round>(Bs, dy + off, i0, T, dh, ch * kFlashChunk);
        __syncthreads();
        dot_chunk<RT>(dp, As, Bs, at.r0, at.cg);               // dP^T = V dO^T
        mul_chunk<RT, NO>(dva, 4 * ch, Ps, Bs, at.r0, at.cg);  // dV += P^T dO
      }
      __syncthreads();  // every read of P^T is done
      CF_UNROLL
      for (int r = 0; r < RT; ++r) {
        CF_UNROLL
        for (int c = 0; c < 8; ++c) {
          const float ds = s[r][c] * (dp[r][c] - Ds[at.cg + 8 * c]);
          Ps[at.r0 + 4 * r][at.cg + 8 * c] = Round()(ds);
          if constexpr (RW) dp[r][c] = ds;  // kept for dtau
        }
      }
      mul_rows<NW, NC, NO, Round>(dka, Bs, Ps, q + off, i0, T, dh, at);  // dK += dS^T Q (scaled below)
      if constexpr (SD) mul_rows<NW, NC, NO, Round>(dqa, Bs, Ps, k + off, i0, T, dh, at);  // S-D: dQ -= dS^T K
      if (edges) {
        __syncthreads();  // every read of dS^T is done
        CF_UNROLL
        for (int r = 0; r < RT; ++r) {
          CF_UNROLL
          for (int c = 0; c < 8; ++c)
            Ps[at.r0 + 4 * r][at.cg + 8 * c] = dtau(i0 + at.cg + 8 * c, j0 + at.r0 + 4 * r, dp[r][c], tau[r][c]);
        }
        mul_rows<NW, NC, NO, Round>(dvla, Bs, Ps, xo.u, i0, T, dh, at);  // dvl += dtau^T u
      }
    }
  }
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    const int j = j0 + at.r0 + 4 * r;
    if (j >= T) continue;
    CF_UNROLL
    for (int ch = 0; ch < NC; ++ch) {
      CF_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int d = ch * kFlashChunk + at.cg + 8 * e;
        if (d >= dh) continue;
        const long long o = off + static_cast<long long>(j) * dh + d;
        dk[o] += scale * dka[r][4 * ch + e];
        dv[o] += dva[r][4 * ch + e];
        if constexpr (SD) dq[o] -= scale * dqa[r][4 * ch + e];
        if constexpr (RW) xg.dvl[o] += dvla[r][4 * ch + e];
      }
    }
  }
}

namespace flash {

/// The runway's query-side epilogue for rows i0 + r0 + 4 r of (b, h): g_i = ga (into xg.g when
/// the bilinear form's dB is wanted), dvs_i += c g_i (dot) or B g_i (bilinear; g staged chunk by
/// chunk through `Gs` so that each thread sums its own columns over all of g_i, in the order
/// e = 0, 1, ... of the reference's B g_i).
template <int NW, int NC, int NO>
__device__ __forceinline__ void runway_query_epilogue(const float (&ga)[Place<NW>::RT][NO], Chunk& Gs,
                                                      const HeadExtras& x, const HeadExtraGrads& xg, long long off,
                                                      int i0, int T, int dh, const Place<NW>& at) {
  constexpr int RT = Place<NW>::RT;
  float dvs[RT][NO];
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    CF_UNROLL
    for (int e = 0; e < NO; ++e) dvs[r][e] = x.rw_B ? 0.0f : x.rw_c * ga[r][e];
  }
  if (x.rw_B) {  // uniform over the block
    CF_UNROLL
    for (int ch = 0; ch < NC; ++ch) {
      if (ch * kFlashChunk >= dh) continue;
      __syncthreads();  // the previous chunk's (or the main loop's) reads of Gs are done
      CF_UNROLL
      for (int r = 0; r < RT; ++r) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) Gs[at.r0 + 4 * r][at.cg + 8 * e] = ga[r][4 * ch + e];
      }
      __syncthreads();
      const int e0 = ch * kFlashChunk, ne = dh - e0 < kFlashChunk ? dh - e0 : kFlashChunk;
      CF_UNROLL
      for (int c2 = 0; c2 < NC; ++c2) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int d = c2 * kFlashChunk + at.cg + 8 * e;
          if (d >= dh) continue;
          const float* Bd = x.rw_B + static_cast<long long>(d) * dh + e0;
          CF_UNROLL
          for (int r = 0; r < RT; ++r) {
            float acc = dvs[r][4 * c2 + e];
            for (int z = 0; z < ne; ++z) acc += Bd[z] * Gs[at.r0 + 4 * r][z];
            dvs[r][4 * c2 + e] = acc;
          }
        }
      }
    }
  }
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    const int i = i0 + at.r0 + 4 * r;
    if (i >= T) continue;
    CF_UNROLL
    for (int ch = 0; ch < NC; ++ch) {
      CF_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int d = ch * kFlashChunk + at.cg + 8 * e;
        if (d >= dh) continue;
        const long long o = off + static_cast<long long>(i) * dh + d;
        xg.dvs[o] += dvs[r][4 * ch + e];
        if (xg.g) xg.g[o] = ga[r][4 * ch + e];
      }
    }
  }
}

}  // namespace flash

/// Backward, query side: dq_i += scale sum_j dS_ij k_j over the key tiles of the plan (needs
/// dsum; recomputes S and dP rather than adding dQ atomically from the key side: deterministic);
/// S-D: dk_i -= scale sum_j dS_ij q_j, ddamp_i -= dS_ii; runway: g_i = sum_j dtau_ij vl_j,
/// dvs_i += c g_i (dot) or B g_i (bilinear, g_i also into xg.g where non-null, for dB).
/// Grid (ftiles, H, B), 32 kFlashBackwardWarps threads.
template <int DH, int F = 0, class Round = RoundFp32>
__global__ void CF_LAUNCH_BOUNDS(32 * kFlashBackwardWarps, (kFlashQMinBlocks<DH, F>))
    flash_backward_q_kernel(MaskView m, int H, int dh, float scale, const float* slopes, HeadExtras x, const float* q,
                            const float* k, const float* v, const float* dy, const float* lse, const float* dsum,
                            float* dq, float* dk, HeadExtraGrads xg, int* visits) {
  using namespace flash;
  constexpr bool SD = (F & kFlashSd) != 0, RW = (F & kFlashRunway) != 0;
  constexpr int NW = kFlashBackwardWarps, RT = Place<NW>::RT, NC = DH / kFlashChunk, NO = DH / 8;
  __shared__ Chunk As;  // Q, dO, (S-D) K or (runway) u chunk (the block's queries)
  __shared__ Chunk Bs;  // K, V, (S-D) Q or (runway) vl chunk (the visited keys)
  __shared__ PTile Ps;  // dS, then (runway) dtau: [query][key]
  __shared__ TileRows rows;
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T, i0 = qt * kTile;
  const Place<NW> at = place<NW>();
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  const Operands xo = operands<F>(x, T, dh, b, bh);
  float dmp[RT], dd[RT];  // S-D: the damping of the thread's rows and its gradient
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    const int i = i0 + at.r0 + 4 * r;
    dmp[r] = SD && i < T ? xo.damp[i] : 0.0f;
    dd[r] = 0;
  }
  float dqa[RT][NO], dka[RT][NO], ga[RT][NO];
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    CF_UNROLL
    for (int e = 0; e < NO; ++e) dqa[r][e] = dka[r][e] = ga[r][e] = 0;
  }
  for (int br = 0; br < m.nb; ++br) {
    const long long st = bh * m.nb + br;
    __syncthreads();  // the previous branch's reads of rows are done
    stage_rows(rows, m, br, i0);
    float L[RT], D[RT];
    CF_UNROLL
    for (int r = 0; r < RT; ++r) {
      const int i = i0 + at.r0 + 4 * r;
      L[r] = i < T ? lse[st * T + i] : 0.0f;
      D[r] = i < T ? dsum[st * T + i] : 0.0f;
    }
    const int* plan = m.fq_ptr + br * (m.ftiles + 1) + qt;
    for (int t = plan[0]; t < plan[1]; ++t) {
      const int j0 = (m.fq_list[t] >> 1) * kTile;
      const bool full = m.fq_list[t] & 1, edges = RW && tile_has_runway(i0, j0);
      count_visit(visits);
      float s[RT][8] = {}, dp[RT][8] = {}, kq[RT][8] = {}, tau[RT][8] = {};
      dot_rows<NW, NC, Round>(s, As, Bs, q + off, i0, k + off, j0, T, dh, at);
      if constexpr (SD) dot_rows<NW, NC, Round>(kq, As, Bs, k + off, i0, q + off, j0, T, dh, at);  // k_i.q_j
      if (edges) dot_rows<NW, NC, Round>(tau, As, Bs, xo.u, i0, xo.vl, j0, T, dh, at);             // u_i.vl_j
      dot_rows<NW, NC, Round>(dp, As, Bs, dy + off, i0, v + off, j0, T, dh, at);                   // dP = dO V^T
      CF_UNROLL
      for (int r = 0; r < RT; ++r) {
        const int il = at.r0 + 4 * r, i = i0 + il;
        CF_UNROLL
        for (int c = 0; c < 8; ++c) {
          const int jl = at.cg + 8 * c, j = j0 + jl;
          const float lg = logit<F>(scale, slope, i, j, s[r][c], kq[r][c], dmp[r], tau[r][c]);
          const float p = full || staged_admits(rows, il, j) ? expf(lg - L[r]) : 0.0f;
          const float ds = p * (dp[r][c] - D[r]);
          Ps[il][jl] = Round()(ds);
          if constexpr (SD)
            if (i == j) dd[r] -= ds;
          if constexpr (RW) dp[r][c] = ds;  // kept for dtau
        }
      }
      mul_rows<NW, NC, NO, Round>(dqa, Bs, Ps, k + off, j0, T, dh, at);                    // dQ += dS K (scaled below)
      if constexpr (SD) mul_rows<NW, NC, NO, Round>(dka, Bs, Ps, q + off, j0, T, dh, at);  // S-D: dK -= dS Q
      if (edges) {
        __syncthreads();  // every read of dS is done
        CF_UNROLL
        for (int r = 0; r < RT; ++r) {
          CF_UNROLL
          for (int c = 0; c < 8; ++c)
            Ps[at.r0 + 4 * r][at.cg + 8 * c] = dtau(i0 + at.r0 + 4 * r, j0 + at.cg + 8 * c, dp[r][c], tau[r][c]);
        }
        mul_rows<NW, NC, NO, Round>(ga, Bs, Ps, xo.vl, j0, T, dh, at);  // g += dtau vl
      }
    }
  }
  CF_UNROLL
  for (int r = 0; r < RT; ++r) {
    const int il = at.r0 + 4 * r, i = i0 + il;
    if (i >= T) continue;
    CF_UNROLL
    for (int ch = 0; ch < NC; ++ch) {
      CF_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int d = ch * kFlashChunk + at.cg + 8 * e;
        if (d >= dh) continue;
        const long long o = off + static_cast<long long>(i) * dh + d;
        dq[o] += scale * dqa[r][4 * ch + e];
        if constexpr (SD) dk[o] -= scale * dka[r][4 * ch + e];
      }
    }
    // the diagonal pair (i, i) sits in column il of the diagonal tile: the thread of column group il % 8
    if constexpr (SD)
      if (at.cg == il % 8) xg.ddamp[bh * T + i] += dd[r];
  }
  if constexpr (RW) runway_query_epilogue<NW, NC, NO>(ga, As, x, xg, off, i0, T, dh, at);
}

}  // namespace cf::gpu::kernels
