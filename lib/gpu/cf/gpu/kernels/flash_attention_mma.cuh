#pragma once
// FlashAttention-2 style attention on tensor cores for plain softmax heads (issue 31): the same
// inputs, outputs, tile plans, mask handling and buffers as the float32 flash kernels
// (flash_attention.cuh), with the products on mma.sync:
//   TF32: m16n8k8 .tf32 operands (float32 bits rounded to TF32 by RoundTf32, nearest even),
//   bf16: m16n8k16 .bf16 operands (ToBf16, nearest even),
// float32 accumulation in both; the softmax statistics (running maximum, row sums, lse, D) stay
// float32. The operands are rounded as they are staged into shared memory (Q, K, V, dO) or stored
// into the warp's probability tile (P, dS), with the functors of cf/gpu/precision.hpp rather than
// cvt: cvt.rna.tf32.f32 rounds ties away from zero, the trainer's GEMMs and the reference round
// ties to even, and the kernels must round as the reference does. The reference is
// flash_attention.cuh with Round = RoundTf32 / RoundBf16 (its products of rounded operands are
// exact in float32, as the tensor cores' are), so the two differ only in the summation order.
//
// On the device the products are inline PTX mma.sync and the row reductions warp shuffles. The
// emulation header has neither, so for CI this header also defines them in software on the block
// barrier (every lane posts its fragments, the block meets, each lane forms its accumulator block
// from its warp's posts by the PTX ISA's fragment tables, the block meets again): the kernels'
// tiling, masking, fragment indexing and softmax run on the CPU against the rounded reference
// (tests/gpu/test_flash_attention_rounded_emu.cpp). That needs every mma, shuffle and __syncwarp
// to be reached by the whole block together, which holds here (all are in block-uniform control
// flow). The emulated build's trainer runs the rounded reference, not these (one barrier pair per
// mma is slow on fibers); the device build launches them (mma::forward / backward below).
//
// Layout: 4 warps (128 threads) per block; a block owns one 64-row tile (queries for the forward
// and dQ, keys for dK / dV) and each warp 16 of its rows, the rows of its m16 fragments. Tiles of
// the head matrices live in dynamic shared memory, [64][DH + pad] in the operand format (pad 4
// floats or 8 bf16: a fragment's 32 loads fall in 32 distinct banks); each warp has its own
// [16][64 + pad] tile for P or dS, read back as an A fragment after __syncwarp (the C fragment's
// layout is not the A fragment's for TF32). Fragments are read element by element (no ldmatrix):
// simple first. Row maxima and sums are reduced over the 4 threads of a row with two xor shuffles,
// in a fixed order; every output element is summed by one thread: no atomics, bit-reproducible.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cf/gpu/kernels/flash_attention.cuh"
#include "cf/gpu/precision.hpp"

namespace cf::gpu::kernels {

inline constexpr int kMmaWarps = 4;  // 128 threads: 4 x 16 rows of a 64-row tile

namespace mma {

constexpr int kTile = kFlashTile;
constexpr int kThreads = 32 * kMmaWarps;
constexpr float kNoMax = flash::kNoMax;

#if CF_EMULATED
inline std::uint32_t as_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float bits_as(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
/// One lane's operands of an emulated mma (per block: `__shared__`, i.e. per fiber scheduler).
struct Post {
  std::uint32_t a[4], b[2];
};
inline Post* posts() {
  __shared__ Post p[kThreads];
  return p;
}
inline void warp_sync() { __syncthreads(); }
/// x of lane (lane ^ m) of the same warp.
inline float warp_xor(float x, int m) {
  __shared__ float v[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  v[t] = x;
  __syncthreads();
  const float r = v[(t & ~31) | ((t & 31) ^ m)];
  __syncthreads();
  return r;
}
#else
__device__ __forceinline__ std::uint32_t as_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ void warp_sync() { __syncwarp(); }
__device__ __forceinline__ float warp_xor(float x, int m) { return __shfl_xor_sync(0xffffffffu, x, m); }
#endif

/// TF32 operands: float32 words holding TF32 values; m16n8k8.
struct Tf32 {
  using Elem = float;
  static constexpr int K = 8, kPad = 4;
  __device__ static Elem round(float x) { return RoundTf32()(x); }
  /// A (16 x 8, row m, column k) from at(m, k): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4).
  template <class At>
  __device__ static void load_a(std::uint32_t (&a)[4], At at, int k0, int g, int t) {
    a[0] = as_bits(at(g, k0 + t));
    a[1] = as_bits(at(g + 8, k0 + t));
    a[2] = as_bits(at(g, k0 + t + 4));
    a[3] = as_bits(at(g + 8, k0 + t + 4));
  }
  /// B (8 x 8, row k, column n) from bt(k, n): b0 (t, g), b1 (t + 4, g).
  template <class Bt>
  __device__ static void load_b(std::uint32_t (&b)[2], Bt bt, int k0, int g, int t) {
    b[0] = as_bits(bt(k0 + t, g));
    b[1] = as_bits(bt(k0 + t + 4, g));
  }
#if CF_EMULATED
  // The PTX ISA's m16n8k8 .tf32 tables read backwards: which lane and register hold A(row, k), B(k, n).
  static float a_at(const Post* w, int row, int k) { return bits_as(w[row % 8 * 4 + k % 4].a[row / 8 + 2 * (k / 4)]); }
  static float b_at(const Post* w, int k, int n) { return bits_as(w[n * 4 + k % 4].b[k / 4]); }
#else
  __device__ static void mma(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
};

/// bf16 operands: bfloat16 bits; m16n8k16, two elements per register (the lower k in the low half).
struct Bf16 {
  using Elem = std::uint16_t;
  static constexpr int K = 16, kPad = 8;
  __device__ static Elem round(float x) { return ToBf16()(x); }
  __device__ static std::uint32_t pack(Elem lo, Elem hi) {
    return static_cast<std::uint32_t>(lo) | static_cast<std::uint32_t>(hi) << 16;
  }
  /// A (16 x 16): a0 (g, 2t..2t+1), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..).
  template <class At>
  __device__ static void load_a(std::uint32_t (&a)[4], At at, int k0, int g, int t) {
    const int k = k0 + 2 * t;
    a[0] = pack(at(g, k), at(g, k + 1));
    a[1] = pack(at(g + 8, k), at(g + 8, k + 1));
    a[2] = pack(at(g, k + 8), at(g, k + 9));
    a[3] = pack(at(g + 8, k + 8), at(g + 8, k + 9));
  }
  /// B (16 x 8): b0 (2t..2t+1, g), b1 (2t + 8.., g).
  template <class Bt>
  __device__ static void load_b(std::uint32_t (&b)[2], Bt bt, int k0, int g, int t) {
    const int k = k0 + 2 * t;
    b[0] = pack(bt(k, g), bt(k + 1, g));
    b[1] = pack(bt(k + 8, g), bt(k + 9, g));
  }
#if CF_EMULATED
  // The m16n8k16 .bf16 tables read backwards: k pair kp = k / 2, its lower k in the low half.
  static float bf16_at(std::uint32_t r, int k) { return FromBf16()(static_cast<Elem>(r >> (16 * (k % 2)))); }
  static float a_at(const Post* w, int row, int k) {
    return bf16_at(w[row % 8 * 4 + k / 2 % 4].a[row / 8 + 2 * (k / 8)], k);
  }
  static float b_at(const Post* w, int k, int n) { return bf16_at(w[n * 4 + k / 2 % 4].b[k / 8], k); }
#else
  __device__ static void mma(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
};

/// c += A B for the warp's fragments: mma.sync on the device; emulated, the block meets, each lane
/// adds its 4 accumulator elements (row g + 8 (e / 2), column 2t + e % 2) in k order, the block
/// meets again before the posts are reused.
template <class F>
__device__ __forceinline__ void mma_sync(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
#if CF_EMULATED
  const int x = static_cast<int>(threadIdx.x), lane = x % 32;
  Post* p = posts();
  for (int r = 0; r < 4; ++r) p[x].a[r] = a[r];
  p[x].b[0] = b[0], p[x].b[1] = b[1];
  __syncthreads();
  const Post* w = p + (x - lane);
  for (int e = 0; e < 4; ++e) {
    const int row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + e % 2;
    for (int k = 0; k < F::K; ++k) c[e] += F::a_at(w, row, k) * F::b_at(w, k, col);
  }
  __syncthreads();
#else
  F::mma(c, a, b);
#endif
}

/// Row stride of a staged head tile and of a warp's P tile, in elements.
template <class F, int DH>
constexpr int kStride = DH + F::kPad;
template <class F>
constexpr int kPStride = kTile + F::kPad;

/// Dynamic shared memory of a kernel staging `tiles` head tiles, plus the warps' P tiles.
template <class F, int DH>
constexpr std::size_t smem_bytes(int tiles) {
  return (static_cast<std::size_t>(tiles) * kTile * kStride<F, DH> +
          static_cast<std::size_t>(kMmaWarps) * 16 * kPStride<F>)*sizeof(typename F::Elem);
}

/// Rows [row0, row0 + 64) of a [T, dh] head matrix into `dst` (rounded), zero past T and dh.
/// Consecutive threads read consecutive columns (coalesced where dh == DH).
template <class F, int DH>
__device__ __forceinline__ void load_tile(typename F::Elem* dst, const float* src, int row0, int T, int dh) {
  for (int x = static_cast<int>(threadIdx.x); x < kTile * DH; x += kThreads) {
    const int r = x / DH, c = x % DH, row = row0 + r;
    dst[r * kStride<F, DH> + c] = F::round(row < T && c < dh ? src[static_cast<long long>(row) * dh + c] : 0.0f);
  }
}

/// acc[nt] += A_w B^T over the DH columns: A_w the warp's 16 rows of tile `A` (row-major [64][DH]),
/// B the 64 rows of tile `B` (acc[nt]: the 16 x 8 block of B's rows nt*8..nt*8+7). S = Q K^T,
/// dP = dO V^T, and their transposes.
template <class F, int DH>
__device__ __forceinline__ void rows_times_rows(float (&acc)[8][4], const typename F::Elem* A,
                                                const typename F::Elem* B, int g, int t) {
  constexpr int S = kStride<F, DH>;
  CF_UNROLL_N(1)  // the k steps index no register array: fewer fragments in flight
  for (int k0 = 0; k0 < DH; k0 += F::K) {
    std::uint32_t a[4];
    F::load_a(
        a, [&](int m, int k) { return A[m * S + k]; }, k0, g, t);
    CF_UNROLL
    for (int nt = 0; nt < 8; ++nt) {
      std::uint32_t b[2];
      F::load_b(
          b, [&](int k, int n) { return B[(nt * 8 + n) * S + k]; }, k0, g, t);
      mma_sync<F>(acc[nt], a, b);
    }
  }
}

/// acc[nt] += P_w V over the 64 columns of the warp's P tile: V a staged tile (row-major [64][DH],
/// acc[nt]: its columns nt*8..nt*8+7). O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K.
template <class F, int DH>
__device__ __forceinline__ void p_times_tile(float (&acc)[DH / 8][4], const typename F::Elem* P,
                                             const typename F::Elem* V, int g, int t) {
  constexpr int S = kStride<F, DH>, PS = kPStride<F>;
  CF_UNROLL_N(1)
  for (int k0 = 0; k0 < kTile; k0 += F::K) {
    std::uint32_t a[4];
    F::load_a(
        a, [&](int m, int k) { return P[m * PS + k]; }, k0, g, t);
    CF_UNROLL
    for (int nt = 0; nt < DH / 8; ++nt) {
      std::uint32_t b[2];
      F::load_b(
          b, [&](int k, int n) { return V[k * S + nt * 8 + n]; }, k0, g, t);
      mma_sync<F>(acc[nt], a, b);
    }
  }
}

/// x reduced over the 4 threads of a fragment row (lanes 4g..4g+3), the same order in each.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, warp_xor(x, 1));
  return fmaxf(x, warp_xor(x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += warp_xor(x, 1);
  return x + warp_xor(x, 2);
}

/// The thread's place: warp w, fragment row group g = lane / 4, t = lane % 4. Element e of an
/// accumulator block nt sits at row g + 8 (e / 2), column nt*8 + 2t + e % 2.
struct Lane {
  int w, g, t;
};
__device__ __forceinline__ Lane lane_place() {
  const int x = static_cast<int>(threadIdx.x);
  return {x / 32, (x % 32) / 4, x % 4};
}

// A kernel's tiles: dynamic shared memory on the device (sized at launch), a fixed block-local
// array under the emulation header (which has no dynamic shared memory).
#if CF_EMULATED
#define CF_MMA_SMEM(name, bytes) alignas(16) __shared__ unsigned char name[bytes]
#else
#define CF_MMA_SMEM(name, bytes) extern __shared__ __align__(16) unsigned char name[]
#endif

/// The shared memory of a kernel: `n` head tiles, then the warps' P tiles.
template <class F, int DH>
struct Tiles {
  using E = typename F::Elem;
  E* base;
  __device__ E* tile(int i) const { return base + i * kTile * kStride<F, DH>; }
  __device__ E* p(int n, int w) const { return tile(n) + w * 16 * kPStride<F>; }
};

}  // namespace mma

/// Forward. Grid (ftiles, H, B), 128 threads, mma::smem_bytes<F, DH>(3) dynamic shared memory.
/// Outputs as flash_forward_kernel: y (sum of the branch outputs), lse [B, H, nb, T], obr.
template <class F, int DH>
__global__ void CF_LAUNCH_BOUNDS(mma::kThreads, 1)
    mma_forward_kernel(MaskView m, int H, int dh, float scale, const float* slopes, const float* q, const float* k,
                       const float* v, float* y, float* lse, float* obr) {
  using namespace mma;
  using E = typename F::Elem;
  constexpr int NO = DH / 8, PS = kPStride<F>;
  CF_MMA_SMEM(mma_smem, (smem_bytes<F, DH>(3)));
  const Tiles<F, DH> sm{reinterpret_cast<E*>(mma_smem)};
  E *Qs = sm.tile(0), *Ks = sm.tile(1), *Vs = sm.tile(2);
  __shared__ flash::TileRows rows;
  const Lane ln = lane_place();
  E* Pw = sm.p(3, ln.w);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T, i0 = qt * kTile, wr = 16 * ln.w;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  load_tile<F, DH>(Qs, q + off, i0, T, dh);
  const E* Qw = Qs + wr * kStride<F, DH>;
  for (int br = 0; br < m.nb; ++br) {
    __syncthreads();  // Qs is staged; the previous branch's reads of rows are done
    flash::stage_rows(rows, m, br, i0);
    float mx[2] = {kNoMax, kNoMax}, l[2] = {0, 0}, o[NO][4];
    CF_UNROLL
    for (int e = 0; e < NO; ++e) o[e][0] = o[e][1] = o[e][2] = o[e][3] = 0;
    const int* plan = m.fq_ptr + br * (m.ftiles + 1) + qt;
    for (int tt = plan[0]; tt < plan[1]; ++tt) {
      const int j0 = (m.fq_list[tt] >> 1) * kTile;
      const bool full = m.fq_list[tt] & 1;
      __syncthreads();  // rows is staged; the previous tile's reads of Ks, Vs are done
      load_tile<F, DH>(Ks, k + off, j0, T, dh);
      load_tile<F, DH>(Vs, v + off, j0, T, dh);
      __syncthreads();
      float s[8][4] = {};
      rows_times_rows<F, DH>(s, Qw, Ks, ln.g, ln.t);
      // logits (the reference's expression), the mask, the row maxima over the tile
      float pm[2] = {kNoMax, kNoMax};
      unsigned live = 0;
      CF_UNROLL
      for (int nt = 0; nt < 8; ++nt) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int il = wr + ln.g + 8 * (e / 2), i = i0 + il, j = j0 + nt * 8 + 2 * ln.t + e % 2;
          float lg = scale * s[nt][e];
          lg -= slope * static_cast<float>(i - j);
          s[nt][e] = lg;
          if (full || flash::staged_admits(rows, il, j)) {
            live |= 1u << (4 * nt + e);
            pm[e / 2] = fmaxf(pm[e / 2], lg);
          }
        }
      }
      // online softmax: the new running maximum rescales the sums and the output so far
      float mn[2];
      CF_UNROLL
      for (int r = 0; r < 2; ++r) {
        mn[r] = fmaxf(mx[r], quad_max(pm[r]));
        const float alpha = expf(mx[r] - mn[r]);
        mx[r] = mn[r];
        l[r] *= alpha;
        CF_UNROLL
        for (int e = 0; e < NO; ++e) o[e][2 * r] *= alpha, o[e][2 * r + 1] *= alpha;
      }
      CF_UNROLL
      for (int nt = 0; nt < 8; ++nt) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const float p = (live >> (4 * nt + e)) & 1u ? expf(s[nt][e] - mn[e / 2]) : 0.0f;
          l[e / 2] += p;
          Pw[(ln.g + 8 * (e / 2)) * PS + nt * 8 + 2 * ln.t + e % 2] = F::round(p);
        }
      }
      warp_sync();
      p_times_tile<F, DH>(o, Pw, Vs, ln.g, ln.t);
      warp_sync();  // the warp's reads of Pw are done before the next tile writes it
    }
    const long long st = bh * m.nb + br;
    CF_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(l[r]);
      const int i = i0 + wr + ln.g + 8 * r;
      if (i >= T) continue;
      if (ln.t == 0) lse[st * T + i] = sum > 0 ? mx[r] + logf(sum) : kNoMax;  // no admitted key: the branch adds 0
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      float* oi = obr + (st * T + i) * dh;
      CF_UNROLL
      for (int nt = 0; nt < NO; ++nt) {
        CF_UNROLL
        for (int c = 0; c < 2; ++c) {
          const int d = nt * 8 + 2 * ln.t + c;
          if (d < dh) oi[d] = o[nt][2 * r + c] * inv;
        }
      }
    }
  }
  // y: the branch outputs summed in branch order, as the reference does, read back from the
  // thread's own obr elements once the accumulators are dead (adding into y per branch held 64
  // loaded values beside them and spilled at DH 128)
  CF_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + wr + ln.g + 8 * r;
    if (i >= T) continue;
    const long long yo = off + static_cast<long long>(i) * dh, so = bh * m.nb * T + i;
    CF_UNROLL
    for (int nt = 0; nt < NO; ++nt) {
      CF_UNROLL
      for (int c = 0; c < 2; ++c) {
        const int d = nt * 8 + 2 * ln.t + c;
        if (d >= dh || m.nb == 0) continue;
        float sum = obr[so * dh + d];
        for (int br = 1; br < m.nb; ++br) sum += obr[(so + static_cast<long long>(br) * T) * dh + d];
        y[yo + d] = sum;
      }
    }
  }
}

/// Backward, key side: dk_j += scale sum_i dS_ij q_i, dv_j += sum_i P_ij dy_i over the query tiles
/// of the plan (needs dsum, flash_dsum_kernel). Grid (ftiles, H, B), 128 threads,
/// mma::smem_bytes<F, DH>(4); the warps' rows are the block's keys (P^T, dS^T).
template <class F, int DH>
__global__ void CF_LAUNCH_BOUNDS(mma::kThreads, 1)
    mma_backward_kv_kernel(MaskView m, int H, int dh, float scale, const float* slopes, const float* q, const float* k,
                           const float* v, const float* dy, const float* lse, const float* dsum, float* dk, float* dv) {
  using namespace mma;
  using E = typename F::Elem;
  constexpr int NO = DH / 8, PS = kPStride<F>;
  CF_MMA_SMEM(mma_smem, (smem_bytes<F, DH>(4)));
  const Tiles<F, DH> sm{reinterpret_cast<E*>(mma_smem)};
  E *Ks = sm.tile(0), *Vs = sm.tile(1), *Qs = sm.tile(2), *dOs = sm.tile(3);
  __shared__ flash::TileRows rows;
  __shared__ float Ls[kTile], Ds[kTile];
  const Lane ln = lane_place();
  E* Pw = sm.p(4, ln.w);
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T, j0 = kt * kTile, wr = 16 * ln.w;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  load_tile<F, DH>(Ks, k + off, j0, T, dh);
  load_tile<F, DH>(Vs, v + off, j0, T, dh);
  const E *Kw = Ks + wr * kStride<F, DH>, *Vw = Vs + wr * kStride<F, DH>;
  float dka[NO][4], dva[NO][4];
  CF_UNROLL
  for (int e = 0; e < NO; ++e) {
    CF_UNROLL
    for (int c = 0; c < 4; ++c) dka[e][c] = dva[e][c] = 0;
  }
  for (int br = 0; br < m.nb; ++br) {
    const long long st = bh * m.nb + br;
    const int* plan = m.fk_ptr + br * (m.ftiles + 1) + kt;
    for (int tt = plan[0]; tt < plan[1]; ++tt) {
      const int i0 = (m.fk_list[tt] >> 1) * kTile;
      const bool full = m.fk_list[tt] & 1;
      __syncthreads();  // the previous tile's reads of rows, Ls, Ds, Qs, dOs are done
      if (!full) flash::stage_rows(rows, m, br, i0);
      const int x = static_cast<int>(threadIdx.x);
      if (x < kTile) {
        const int i = i0 + x;
        Ls[x] = i < T ? lse[st * T + i] : 0.0f;
        Ds[x] = i < T ? dsum[st * T + i] : 0.0f;
      }
      load_tile<F, DH>(Qs, q + off, i0, T, dh);
      load_tile<F, DH>(dOs, dy + off, i0, T, dh);
      __syncthreads();
      float s[8][4] = {};
      rows_times_rows<F, DH>(s, Kw, Qs, ln.g, ln.t);  // S^T = K Q^T
      // P^T (0 where the mask refuses), kept in s and staged for dV
      CF_UNROLL
      for (int nt = 0; nt < 8; ++nt) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int jr = ln.g + 8 * (e / 2), j = j0 + wr + jr, il = nt * 8 + 2 * ln.t + e % 2, i = i0 + il;
          float lg = scale * s[nt][e];
          lg -= slope * static_cast<float>(i - j);
          s[nt][e] = full || flash::staged_admits(rows, il, j) ? expf(lg - Ls[il]) : 0.0f;
          Pw[jr * PS + il] = F::round(s[nt][e]);
        }
      }
      warp_sync();
      p_times_tile<F, DH>(dva, Pw, dOs, ln.g, ln.t);  // dV += P^T dO
      float dp[8][4] = {};
      rows_times_rows<F, DH>(dp, Vw, dOs, ln.g, ln.t);  // dP^T = V dO^T
      warp_sync();                                      // every read of P^T is done
      CF_UNROLL
      for (int nt = 0; nt < 8; ++nt) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int il = nt * 8 + 2 * ln.t + e % 2;
          Pw[(ln.g + 8 * (e / 2)) * PS + il] = F::round(s[nt][e] * (dp[nt][e] - Ds[il]));
        }
      }
      warp_sync();
      p_times_tile<F, DH>(dka, Pw, Qs, ln.g, ln.t);  // dK += dS^T Q (scaled below)
    }
  }
  CF_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int j = j0 + wr + ln.g + 8 * r;
    if (j >= T) continue;
    CF_UNROLL
    for (int nt = 0; nt < NO; ++nt) {
      CF_UNROLL
      for (int c = 0; c < 2; ++c) {
        const int d = nt * 8 + 2 * ln.t + c;
        if (d >= dh) continue;
        const long long o = off + static_cast<long long>(j) * dh + d;
        dk[o] += scale * dka[nt][2 * r + c];
        dv[o] += dva[nt][2 * r + c];
      }
    }
  }
}

/// Backward, query side: dq_i += scale sum_j dS_ij k_j over the key tiles of the plan (needs
/// dsum; recomputes S and dP rather than adding dQ atomically from the key side). Grid
/// (ftiles, H, B), 128 threads, mma::smem_bytes<F, DH>(4).
template <class F, int DH>
__global__ void CF_LAUNCH_BOUNDS(mma::kThreads, 1)
    mma_backward_q_kernel(MaskView m, int H, int dh, float scale, const float* slopes, const float* q, const float* k,
                          const float* v, const float* dy, const float* lse, const float* dsum, float* dq) {
  using namespace mma;
  using E = typename F::Elem;
  constexpr int NO = DH / 8, PS = kPStride<F>;
  CF_MMA_SMEM(mma_smem, (smem_bytes<F, DH>(4)));
  const Tiles<F, DH> sm{reinterpret_cast<E*>(mma_smem)};
  E *Qs = sm.tile(0), *dOs = sm.tile(1), *Ks = sm.tile(2), *Vs = sm.tile(3);
  __shared__ flash::TileRows rows;
  const Lane ln = lane_place();
  E* Pw = sm.p(4, ln.w);
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, T = m.T, i0 = qt * kTile, wr = 16 * ln.w;
  const long long bh = static_cast<long long>(b) * H + h, off = bh * T * dh;
  const float slope = slopes ? slopes[h] : 0.0f;
  load_tile<F, DH>(Qs, q + off, i0, T, dh);
  load_tile<F, DH>(dOs, dy + off, i0, T, dh);
  const E *Qw = Qs + wr * kStride<F, DH>, *dOw = dOs + wr * kStride<F, DH>;
  float dqa[NO][4];
  CF_UNROLL
  for (int e = 0; e < NO; ++e) dqa[e][0] = dqa[e][1] = dqa[e][2] = dqa[e][3] = 0;
  for (int br = 0; br < m.nb; ++br) {
    const long long st = bh * m.nb + br;
    __syncthreads();  // the previous branch's reads of rows are done
    flash::stage_rows(rows, m, br, i0);
    float L[2], D[2];
    CF_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int i = i0 + wr + ln.g + 8 * r;
      L[r] = i < T ? lse[st * T + i] : 0.0f;
      D[r] = i < T ? dsum[st * T + i] : 0.0f;
    }
    const int* plan = m.fq_ptr + br * (m.ftiles + 1) + qt;
    for (int tt = plan[0]; tt < plan[1]; ++tt) {
      const int j0 = (m.fq_list[tt] >> 1) * kTile;
      const bool full = m.fq_list[tt] & 1;
      __syncthreads();  // rows and Qs, dOs are staged; the previous tile's reads of Ks, Vs are done
      load_tile<F, DH>(Ks, k + off, j0, T, dh);
      load_tile<F, DH>(Vs, v + off, j0, T, dh);
      __syncthreads();
      float s[8][4] = {}, dp[8][4] = {};
      rows_times_rows<F, DH>(s, Qw, Ks, ln.g, ln.t);    // S = Q K^T
      rows_times_rows<F, DH>(dp, dOw, Vs, ln.g, ln.t);  // dP = dO V^T
      CF_UNROLL
      for (int nt = 0; nt < 8; ++nt) {
        CF_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int ir = ln.g + 8 * (e / 2), il = wr + ir, i = i0 + il, jl = nt * 8 + 2 * ln.t + e % 2, j = j0 + jl;
          float lg = scale * s[nt][e];
          lg -= slope * static_cast<float>(i - j);
          const float p = full || flash::staged_admits(rows, il, j) ? expf(lg - L[e / 2]) : 0.0f;
          Pw[ir * PS + jl] = F::round(p * (dp[nt][e] - D[e / 2]));
        }
      }
      warp_sync();
      p_times_tile<F, DH>(dqa, Pw, Ks, ln.g, ln.t);  // dQ += dS K (scaled below)
      warp_sync();                                   // the warp's reads of Pw are done before the next tile writes it
    }
  }
  CF_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + wr + ln.g + 8 * r;
    if (i >= T) continue;
    CF_UNROLL
    for (int nt = 0; nt < NO; ++nt) {
      CF_UNROLL
      for (int c = 0; c < 2; ++c) {
        const int d = nt * 8 + 2 * ln.t + c;
        if (d < dh) dq[off + static_cast<long long>(i) * dh + d] += scale * dqa[nt][2 * r + c];
      }
    }
  }
}

#if !CF_EMULATED
/// Launches (host): the kernels above with their dynamic shared memory (the limit raised once per
/// kernel past the 48 KB default). Errors are left to the caller's launch check.
namespace mma {

template <class Kernel>
void allow_smem(Kernel* kern, std::size_t bytes) {
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

template <class F, int DH>
void forward(const MaskView& mv, int B, int H, int dh, float scale, const float* slopes, const float* q, const float* k,
             const float* v, float* y, float* lse, float* obr) {
  constexpr std::size_t bytes = smem_bytes<F, DH>(3);
  static const bool once = (allow_smem(mma_forward_kernel<F, DH>, bytes), true);
  (void)once;
  mma_forward_kernel<F, DH>
      <<<dim3(mv.ftiles, H, B), dim3(kThreads), bytes>>>(mv, H, dh, scale, slopes, q, k, v, y, lse, obr);
}

/// The key side then the query side (dsum computed by the caller).
template <class F, int DH>
void backward(const MaskView& mv, int B, int H, int dh, float scale, const float* slopes, const float* q,
              const float* k, const float* v, const float* dy, const float* lse, const float* dsum, float* dq,
              float* dk, float* dv) {
  constexpr std::size_t bytes = smem_bytes<F, DH>(4);
  static const bool once =
      (allow_smem(mma_backward_kv_kernel<F, DH>, bytes), allow_smem(mma_backward_q_kernel<F, DH>, bytes), true);
  (void)once;
  const dim3 grid(mv.ftiles, H, B), block(kThreads);
  mma_backward_kv_kernel<F, DH><<<grid, block, bytes>>>(mv, H, dh, scale, slopes, q, k, v, dy, lse, dsum, dk, dv);
  mma_backward_q_kernel<F, DH><<<grid, block, bytes>>>(mv, H, dh, scale, slopes, q, k, v, dy, lse, dsum, dq);
}

}  // namespace mma
#endif

}  // namespace cf::gpu::kernels
