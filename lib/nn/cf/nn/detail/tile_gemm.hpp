#pragma once
// Register-blocked products for the tiled attention (issue 12): the small GEMMs of one rectangle
// (16 x 143 for SWA(128) row groups, 64 x 64 for whole tiles) without the packing a general GEMM
// does per call. Eigen's GEMM repacks both operands of every tile product; at these sizes packing
// was about 30% of the SWA(128) attention time (perf, docs/benchmarks.md), so short row groups cost
// far more per score than full 64 x 64 tiles. Here the only copy is one transpose of the keys (and
// values) a query tile or head visits, made once and read by every rectangle.
//
// Vectors are 64 bytes (GCC/Clang vector extensions: one AVX-512 register, two AVX2 ones), so the
// head size must be a multiple of W = 64 / sizeof(T) (16 floats, 8 doubles); tile_gemm_ok says
// when, and the callers keep the Eigen products otherwise. Plain C++, pure functions on raw
// row-major buffers; the Eigen products are their oracle (tests/nn/test_tile_gemm.cpp).
// Internal to lib/nn.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cf/nn/context.hpp"

namespace cf::nn::detail {

/// Whether the tiled attention uses these products (default) or the Eigen ones: the process's
/// context (cf/nn/context.hpp; bench_long_context CF_TILE_GEMM=eigen switches it for side-by-side
/// benchmarks); both give the same values up to float rounding.
inline bool tile_gemm_enabled() { return context().tile_products; }

template <class T>
struct TileVec {
  static constexpr int W = 64 / static_cast<int>(sizeof(T));
  typedef T V __attribute__((vector_size(64)));
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  // an initializer of W copies compiles to one broadcast (a loop of lane stores or 0 + x does not)
  template <std::size_t... I>
  static V splat_(T x, std::index_sequence<I...>) {
    return V{(static_cast<void>(I), x)...};
  }
  static V splat(T x) { return splat_(x, std::make_index_sequence<W>{}); }
};

/// The packing-free products apply: head size a multiple of the vector width, at most 256.
template <class T>
bool tile_gemm_ok(int dh) {
  return dh > 0 && dh % TileVec<T>::W == 0 && dh <= 256;
}

/// Columns a transposed key buffer must hold past the last key read: nt_product reads whole
/// vectors, so the last one may run up to W - 1 columns past nj (their results are discarded).
template <class T>
constexpr int kTransposePad = TileVec<T>::W;

namespace tile_gemm_impl {

// C[r][c0 + 0..CB W) for RB rows: sum over e < k of A[r][e] Bt[e][c0 + ..]; the last vector keeps
// only `last` columns (1..W) when partial.
template <class T, int RB, int CB>
inline void nt_block(int k, const T* A, std::int64_t lda, const T* Bt, std::int64_t ldb, T* C, std::int64_t ldc,
                     T alpha, int last) {
  using TV = TileVec<T>;
  using V = typename TV::V;
  V acc[RB][CB];
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CB; ++c) acc[r][c] = TV::splat(T(0));
  for (int e = 0; e < k; ++e) {
    V b[CB];
    for (int c = 0; c < CB; ++c) b[c] = TV::load(Bt + e * ldb + c * TV::W);
    for (int r = 0; r < RB; ++r) {
      const V a = TV::splat(A[r * lda + e]);
      for (int c = 0; c < CB; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CB; ++c) {
      const V v = acc[r][c] * TV::splat(alpha);
      if (c == CB - 1 && last < TV::W) {
        T tmp[TV::W];
        TV::store(tmp, v);
        std::memcpy(C + r * ldc + c * TV::W, tmp, sizeof(T) * static_cast<std::size_t>(last));
      } else {
        TV::store(C + r * ldc + c * TV::W, v);
      }
    }
}

template <class T, int RB>
inline void nt_rows(int n, int k, const T* A, std::int64_t lda, const T* Bt, std::int64_t ldb, T* C, std::int64_t ldc,
                    T alpha) {
  constexpr int W = TileVec<T>::W;
  // column blocks of 2 vectors (8 rows x 2 vectors: 16 accumulators, 2 loads and 8 broadcasts per
  // 16 FMAs), a last 1-vector block when the width is odd
  const int nv = (n + W - 1) / W;
  int v = 0;
  for (; v + 2 <= nv; v += 2)
    nt_block<T, RB, 2>(k, A, lda, Bt + v * W, ldb, C + v * W, ldc, alpha, std::min(W, n - (v + 1) * W));
  if (v < nv) nt_block<T, RB, 1>(k, A, lda, Bt + v * W, ldb, C + v * W, ldc, alpha, std::min(W, n - v * W));
}

// C[i][c0 + 0..CB W) += alpha sum over p < k of A(i, p) B[p][c0 + ..], A(i, p) = A[i sa_i + p sa_p].
template <class T, int RB, int CB>
inline void nn_block(int k, const T* A, std::int64_t sa_i, std::int64_t sa_p, const T* B, std::int64_t ldb, T* C,
                     std::int64_t ldc, T alpha) {
  using TV = TileVec<T>;
  using V = typename TV::V;
  V acc[RB][CB];
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CB; ++c) acc[r][c] = TV::splat(T(0));
  for (int p = 0; p < k; ++p) {
    V b[CB];
    for (int c = 0; c < CB; ++c) b[c] = TV::load(B + p * ldb + c * TV::W);
    for (int r = 0; r < RB; ++r) {
      const V a = TV::splat(A[r * sa_i + p * sa_p]);
      for (int c = 0; c < CB; ++c) acc[r][c] += a * b[c];
    }
  }
  const V al = TV::splat(alpha);
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CB; ++c) TV::store(C + r * ldc + c * TV::W, TV::load(C + r * ldc + c * TV::W) + acc[r][c] * al);
}

template <class T, int RB>
inline void nn_rows(int n, int k, const T* A, std::int64_t sa_i, std::int64_t sa_p, const T* B, std::int64_t ldb, T* C,
                    std::int64_t ldc, T alpha) {
  constexpr int W = TileVec<T>::W;
  int c0 = 0;
  for (; c0 + 2 * W <= n; c0 += 2 * W) nn_block<T, RB, 2>(k, A, sa_i, sa_p, B + c0, ldb, C + c0, ldc, alpha);
  for (; c0 < n; c0 += W) nn_block<T, RB, 1>(k, A, sa_i, sa_p, B + c0, ldb, C + c0, ldc, alpha);
}

}  // namespace tile_gemm_impl

/// C (m x n, row stride ldc) = alpha A Bt, A: m x k (row stride lda), Bt: k x n (row stride ldb),
/// i.e. A B^T for B stored transposed. Overwrites C. Reads Bt up to column n rounded up to a whole
/// vector (kTransposePad columns of slack); writes exactly n columns.
template <class T>
void nt_product(int m, int n, int k, const T* A, std::int64_t lda, const T* Bt, std::int64_t ldb, T* C,
                std::int64_t ldc, T alpha) {
  // blocks of 8 rows x 2 vectors. The 4 rows x 4 vectors blocks used before ran at 42 GMAC/s
  // here (a 64 x 64 x 64 product): GCC folds every B load into its FMA, so each of the 4 rows
  // reloads the 4 B vectors (20 loads per 16 FMAs); 8 x 2 needs 10 and ran at 107 GMAC/s
  // (docs/benchmarks.md)
  int r = 0;
  for (; r + 8 <= m; r += 8) tile_gemm_impl::nt_rows<T, 8>(n, k, A + r * lda, lda, Bt, ldb, C + r * ldc, ldc, alpha);
  for (; r + 4 <= m; r += 4) tile_gemm_impl::nt_rows<T, 4>(n, k, A + r * lda, lda, Bt, ldb, C + r * ldc, ldc, alpha);
  for (; r < m; ++r) tile_gemm_impl::nt_rows<T, 1>(n, k, A + r * lda, lda, Bt, ldb, C + r * ldc, ldc, alpha);
}

/// C (m x n, row stride ldc) += alpha A B, A(i, p) = A[i sa_i + p sa_p] (m x k: sa_i = row stride,
/// sa_p = 1 for A; sa_i = 1, sa_p = row stride for a stored A^T), B: k x n (row stride ldb).
/// n must be a multiple of the vector width (the head size: tile_gemm_ok).
template <class T>
void nn_product_acc(int m, int n, int k, const T* A, std::int64_t sa_i, std::int64_t sa_p, const T* B, std::int64_t ldb,
                    T* C, std::int64_t ldc, T alpha) {
  // 8 rows x 2 vectors, as nt_product (36 -> 83-90 GMAC/s against 4 x 4 here)
  int r = 0;
  for (; r + 8 <= m; r += 8)
    tile_gemm_impl::nn_rows<T, 8>(n, k, A + r * sa_i, sa_i, sa_p, B, ldb, C + r * ldc, ldc, alpha);
  for (; r + 4 <= m; r += 4)
    tile_gemm_impl::nn_rows<T, 4>(n, k, A + r * sa_i, sa_i, sa_p, B, ldb, C + r * ldc, ldc, alpha);
  for (; r < m; ++r) tile_gemm_impl::nn_rows<T, 1>(n, k, A + r * sa_i, sa_i, sa_p, B, ldb, C + r * ldc, ldc, alpha);
}

namespace tile_gemm_impl {

// One stage of the W x W register transpose: for every pair of rows (i, i + D) with bit D of i
// clear, the off-diagonal D x D blocks of each 2D x 2D block are swapped (exchanging bit D of the
// row and the column index). After the stages D = 1, 2, .., W/2 the block is transposed. Lane J of
// the first result: a[J] where bit D of J is clear, else b[J - D]; of the second: a[J + D] or b[J].
template <class T, int D, std::size_t... J>
inline void transpose_stage(typename TileVec<T>::V& a, typename TileVec<T>::V& b, std::index_sequence<J...>) {
  constexpr int W = TileVec<T>::W;
  const typename TileVec<T>::V lo = __builtin_shufflevector(a, b, ((J & D) ? W + J - D : J)...);
  const typename TileVec<T>::V hi = __builtin_shufflevector(a, b, ((J & D) ? W + J : J + D)...);
  a = lo;
  b = hi;
}

template <class T, int D>
inline void transpose_stages(typename TileVec<T>::V* r) {
  if constexpr (D < TileVec<T>::W) {
    for (int i = 0; i < TileVec<T>::W; ++i)
      if ((i & D) == 0) transpose_stage<T, D>(r[i], r[i + D], std::make_index_sequence<TileVec<T>::W>{});
    transpose_stages<T, 2 * D>(r);
  }
}

// out[e ldo + c] = X[c ldx + e] for c, e < W: one W x W block through registers (log2 W shuffle
// stages of W shuffles instead of W^2 scalar moves)
template <class T>
inline void transpose_block(const T* X, std::int64_t ldx, T* out, std::int64_t ldo) {
  using TV = TileVec<T>;
  typename TV::V r[TV::W];
  for (int i = 0; i < TV::W; ++i) r[i] = TV::load(X + i * ldx);
  transpose_stages<T, 1>(r);
  for (int i = 0; i < TV::W; ++i) TV::store(out + i * ldo, r[i]);
}

}  // namespace tile_gemm_impl

/// Keys [j0, j0 + n) of a head, transposed: out[e ldo + c] = X[(j0 + c) ldx + e] for e < dh; the
/// kTransposePad columns after n are zeroed (ldo >= n + kTransposePad).
template <class T>
void transpose_keys(const T* X, std::int64_t ldx, int j0, int n, int dh, T* out, std::int64_t ldo) {
  // whole W x W blocks through registers (0.11-0.26 ns per element here against 0.4-1.0 for the
  // scalar blocked loop, which was 9% of the SWA(128) attention time: docs/benchmarks.md); the
  // ragged edges element by element
  constexpr int W = TileVec<T>::W;
  const int nw = n / W * W, dw = dh / W * W;
  for (int c0 = 0; c0 < nw; c0 += W)
    for (int e0 = 0; e0 < dw; e0 += W)
      tile_gemm_impl::transpose_block(X + static_cast<std::int64_t>(j0 + c0) * ldx + e0, ldx, out + e0 * ldo + c0, ldo);
  for (int c = 0; c < n; ++c) {
    const T* x = X + static_cast<std::int64_t>(j0 + c) * ldx;
    for (int e = c < nw ? dw : 0; e < dh; ++e) out[e * ldo + c] = x[e];
  }
  for (int e = 0; e < dh; ++e) std::fill(out + e * ldo + n, out + e * ldo + n + kTransposePad<T>, T(0));
}

}  // namespace cf::nn::detail
