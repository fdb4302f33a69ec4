#pragma once
// Elementary ops of the trainer, llm.c style: <op>_forward / <op>_backward on raw row-major
// buffers, every function opening with its argument shapes; gradients are prefixed `d` and
// backward functions ACCUMULATE (+=) into parameter and input gradients. Templated on the scalar
// so the finite-difference tests run the same code in double. Rows are parallelised with OpenMP
// (static schedules: the result does not depend on timing, only on the thread count through
// Eigen's GEMM blocking or sgemm_omp's blocks, and on the GEMM back end, cf/nn/gemm_backend.hpp).
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cf/core/alibi.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/gemm_backend.hpp"

namespace cf::nn {

/// Row-major dynamic matrix and maps (PyTorch layout).
template <class T>
using MatR = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapR = Eigen::Map<MatR<T>>;
template <class T>
using CMapR = Eigen::Map<const MatR<T>>;

/// Token + position embedding. out [N=B*T, C]; tokens [N]; wte [V, C]; wpe [block_size, C] or
/// null (non-learned positions); position of row n is n % T.
template <class T>
void encoder_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int n = 0; n < B * Tn; ++n) {
    const T* e = wte + static_cast<std::int64_t>(tokens[n]) * C;
    const T* p = wpe ? wpe + static_cast<std::int64_t>(n % Tn) * C : nullptr;
    T* o = out + static_cast<std::int64_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] + (p ? p[c] : T(0));
  }
}
/// Backward of encoder_forward: dwte [V, C] += scatter of dout [N, C]; dwpe [block_size, C] +=
/// (if not null). Sequential over rows so repeated tokens accumulate in a fixed order.
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn, int C) {
  for (int n = 0; n < B * Tn; ++n) {
    const T* d = dout + static_cast<std::int64_t>(n) * C;
    T* e = dwte + static_cast<std::int64_t>(tokens[n]) * C;
    for (int c = 0; c < C; ++c) e[c] += d[c];
    if (dwpe) {
      T* p = dwpe + static_cast<std::int64_t>(n % Tn) * C;
      for (int c = 0; c < C; ++c) p[c] += d[c];
    }
  }
}

/// Sum of f(c) for c in [0, n) in eight interleaved partial sums added up in a fixed order. Why:
/// a plain `s += f(c)` is one chain of n dependent additions (4 cycles each) that the compiler may
/// not reorder; eight lanes let it use one vector register, and the fixed order keeps the result
/// the same for every thread count and vector width.
template <class T, class F>
inline T lane_sum(int n, F&& f) {
  T acc[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int k = 0; k < 8; ++k) acc[k] += f(c + k);
  for (int k = 0; c < n; ++c, ++k) acc[k] += f(c);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Sums of one row in 2 W lanes (W = 64 bytes / sizeof(T): one AVX-512 register, two AVX2 ones),
/// the lanes added up pairwise and the tail past the last 2 W block last: a fixed order for every
/// thread count, buffer alignment and instruction set (exact resume), in explicit vectors because
/// GCC left lane_sum's scalar lanes unvectorised here (0.78 -> 0.26 ns per element for the
/// LayerNorm forward at C = 256, docs/benchmarks/train.md).
namespace detail {
template <class T>
T lanes_total(const typename TileVec<T>::V& v) {
  constexpr int W = TileVec<T>::W;
  T a[W];
  std::memcpy(a, &v, sizeof a);
  for (int s = W / 2; s > 0; s /= 2)
    for (int k = 0; k < s; ++k) a[k] += a[k + s];
  return a[0];
}
}  // namespace detail

/// LayerNorm over the last dimension, eps 1e-5 (GPT-2) unless given. out, inp [N, C]; mean, rstd [N]
/// saved for backward; w, b [C].
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N, int C,
                       double eps = 1e-5) {
  using TV = detail::TileVec<T>;
  using V = typename TV::V;
  constexpr int W = TV::W;
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* __restrict x = inp + static_cast<std::int64_t>(n) * C;
    T* __restrict o = out + static_cast<std::int64_t>(n) * C;
    V a0 = TV::splat(T(0)), a1 = a0;
    int c = 0;
    for (; c + 2 * W <= C; c += 2 * W) {
      a0 += TV::load(x + c);
      a1 += TV::load(x + c + W);
    }
    T tail = 0;
    for (int k = c; k < C; ++k) tail += x[k];
    const T m = (detail::lanes_total<T>(a0 + a1) + tail) / T(C);
    const V mv = TV::splat(m);
    a0 = a1 = TV::splat(T(0));
    for (c = 0; c + 2 * W <= C; c += 2 * W) {
      const V d0 = TV::load(x + c) - mv, d1 = TV::load(x + c + W) - mv;
      a0 += d0 * d0;
      a1 += d1 * d1;
    }
    tail = 0;
    for (int k = c; k < C; ++k) tail += (x[k] - m) * (x[k] - m);
    const T v = (detail::lanes_total<T>(a0 + a1) + tail) / T(C);
    const T s = T(1) / std::sqrt(v + T(eps));
    const V sv = TV::splat(s);
    for (c = 0; c + W <= C; c += W) TV::store(o + c, (TV::load(x + c) - mv) * sv * TV::load(w + c) + TV::load(b + c));
    for (; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}
/// Backward of layernorm_forward: dinp [N, C] +=, dw, db [C] +=.
template <class T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean, const T* rstd,
                        int N, int C) {
  using TV = detail::TileVec<T>;
  using V = typename TV::V;
  constexpr int W = TV::W;
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* __restrict x = inp + static_cast<std::int64_t>(n) * C;
    const T* __restrict d = dout + static_cast<std::int64_t>(n) * C;
    T* __restrict dx = dinp + static_cast<std::int64_t>(n) * C;
    const T mu = mean[n], r = rstd[n];
    const V muv = TV::splat(mu), rv = TV::splat(r);
    // sums of w d and of w d (x - mu) r, as layernorm_forward's (fixed lanes, then the tail)
    V a0 = TV::splat(T(0)), a1 = a0, b0 = a0, b1 = a0;
    int c = 0;
    for (; c + 2 * W <= C; c += 2 * W) {
      const V g0 = TV::load(w + c) * TV::load(d + c), g1 = TV::load(w + c + W) * TV::load(d + c + W);
      a0 += g0;
      a1 += g1;
      b0 += g0 * ((TV::load(x + c) - muv) * rv);
      b1 += g1 * ((TV::load(x + c + W) - muv) * rv);
    }
    T t1 = 0, t2 = 0;
    for (int k = c; k < C; ++k) {
      const T g = w[k] * d[k];
      t1 += g;
      t2 += g * ((x[k] - mu) * r);
    }
    const T dnorm_mean = (detail::lanes_total<T>(a0 + a1) + t1) / T(C);
    const T dnorm_norm_mean = (detail::lanes_total<T>(b0 + b1) + t2) / T(C);
    const V m1 = TV::splat(dnorm_mean), m2 = TV::splat(dnorm_norm_mean);
    for (c = 0; c + W <= C; c += W) {
      const V norm = (TV::load(x + c) - muv) * rv, dnorm = TV::load(w + c) * TV::load(d + c);
      TV::store(dx + c, TV::load(dx + c) + (dnorm - m1 - norm * m2) * rv);
    }
    for (; c < C; ++c) {
      const T norm = (x[c] - mu) * r;
      const T dnorm = w[c] * d[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
    }
  }
  // dw, db: every column sums its rows in row order (the same for every thread count); column
  // blocks are split over the threads and accumulate in local arrays (no aliasing with the inputs).
  constexpr int cb = 64;
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += cb) {
    const int w_ = std::min(cb, C - c0);
    T aw[cb], ab[cb];
    for (int k = 0; k < w_; ++k) {
      aw[k] = dw[c0 + k];
      ab[k] = db[c0 + k];
    }
    for (int n = 0; n < N; ++n) {
      const T* __restrict x = inp + static_cast<std::int64_t>(n) * C + c0;
      const T* __restrict d = dout + static_cast<std::int64_t>(n) * C + c0;
      const T mu = mean[n], r = rstd[n];
      for (int k = 0; k < w_; ++k) {
        aw[k] += (x[k] - mu) * r * d[k];
        ab[k] += d[k];
      }
    }
    for (int k = 0; k < w_; ++k) {
      dw[c0 + k] = aw[k];
      db[c0 + k] = ab[k];
    }
  }
}

/// Row range [lo, hi) of part `id` of `parts` for n rows (static split, no synchronisation).
inline void split_range(std::int64_t n, int id, int parts, std::int64_t& lo, std::int64_t& hi) {
  lo = n * id / parts;
  hi = n * (id + 1) / parts;
}

/// Linear layer y = x W^T + b (PyTorch nn.Linear). out [N, OC]; inp [N, C]; W [OC, C]; b [OC] or null.
/// float: OpenBLAS sgemm (its own threads) where OpenBLAS has AVX2/AVX-512 kernels for this CPU,
/// else Eigen (cf/nn/gemm_backend.hpp, docs/benchmarks/train.md). double (gradient tests) and the
/// Eigen back end: rows split across OpenMP threads.
template <class T>
void linear_forward(T* out, const T* inp, const T* W, const T* b, int N, int C, int OC) {
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_backend() == GemmBackend::openblas) {
      if (b) {
        // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; ++n) std::copy(b, b + OC, out + static_cast<std::int64_t>(n) * OC);
      }
      sgemm_omp(false, true, N, OC, C, 1.f, inp, C, W, C, b ? 1.f : 0.f, out, OC);
      return;
    }
  }
  {
    MapR<T> Y(out, N, OC);
    CMapR<T> X(inp, N, C), Wm(W, OC, C);
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel
    omp_errors.run([&] {
      std::int64_t lo, hi;
      split_range(N, omp_get_thread_num(), omp_get_num_threads(), lo, hi);
      if (hi > lo) {
        Y.middleRows(lo, hi - lo).noalias() = X.middleRows(lo, hi - lo) * Wm.transpose();
        if (b) Y.middleRows(lo, hi - lo).rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(b, OC);
      }
    });
    omp_errors.rethrow();
  }
}
/// Backward of linear_forward: dinp [N, C] += dout W (if not null); dW [OC, C] += dout^T inp;
/// db [OC] += column sums of dout (if not null).
template <class T>
void linear_backward(T* dinp, T* dW, T* db, const T* dout, const T* inp, const T* W, int N, int C, int OC) {
  if (db) {
    // explicit loop in a fixed order: Eigen's vectorised reductions group terms by the buffer's
    // address alignment, which would make results differ between runs (and break exact resume)
    // column blocks per thread, rows streamed in order (cache-friendly, order fixed per column)
    constexpr int kCols = 64;
    // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
    for (int o0 = 0; o0 < OC; o0 += kCols) {
      const int o1 = std::min(OC, o0 + kCols);
      T acc[kCols] = {};
      for (int n = 0; n < N; ++n) {
        const T* r = dout + static_cast<std::int64_t>(n) * OC;
        for (int o = o0; o < o1; ++o) acc[o - o0] += r[o];
      }
      for (int o = o0; o < o1; ++o) db[o] += acc[o - o0];
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_backend() == GemmBackend::openblas) {
      if (dinp) sgemm_omp(false, false, N, C, OC, 1.f, dout, OC, W, C, 1.f, dinp, C);
      sgemm_omp(true, false, OC, C, N, 1.f, dout, OC, inp, C, 1.f, dW, C);
      return;
    }
  }
  {
    CMapR<T> dY(dout, N, OC), X(inp, N, C), Wm(W, OC, C);
    MapR<T> dWm(dW, OC, C);
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel
    omp_errors.run([&] {
      const int id = omp_get_thread_num(), nt = omp_get_num_threads();
      std::int64_t lo, hi;
      if (dinp) {
        split_range(N, id, nt, lo, hi);
        if (hi > lo) MapR<T>(dinp, N, C).middleRows(lo, hi - lo).noalias() += dY.middleRows(lo, hi - lo) * Wm;
      }
      split_range(OC, id, nt, lo, hi);
      if (hi > lo) dWm.middleRows(lo, hi - lo).noalias() += dY.middleCols(lo, hi - lo).transpose() * X;
    });
    omp_errors.rethrow();
  }
}

/// GELU, tanh approximation (GPT-2). out, inp [n]. The tanh runs through Eigen's vectorised
/// array tanh (float: a rational approximation accurate to a few ulp; double: std::tanh).
template <class T>
void gelu_forward(T* out, const T* inp, std::int64_t n) {
  const T s = std::sqrt(T(2) / T(M_PI));
  constexpr std::int64_t kChunk = 4096;
  // omp-nothrow: a lazy Eigen array expression on mapped memory (no temporary, no allocation)
#pragma omp parallel for schedule(static)
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::int64_t m = std::min(kChunk, n - c0);
    Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> x(inp + c0, m);
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> y(out + c0, m);
    y = T(0.5) * x * (T(1) + (s * (x + T(0.044715) * x * x * x)).tanh());
  }
}
/// Backward of gelu_forward: dinp [n] += gelu'(inp) * dout, or dinp = gelu'(inp) * dout with
/// accumulate = false (the MLP's backward: its buffer then needs no zero fill and is not read).
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::int64_t n, bool accumulate = true) {
  const T s = std::sqrt(T(2) / T(M_PI));
  constexpr std::int64_t kChunk = 4096;
  // omp-nothrow: lazy Eigen array expressions on mapped memory and a stack buffer (no allocation)
#pragma omp parallel for schedule(static)
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::int64_t m = std::min(kChunk, n - c0);
    Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> x(inp + c0, m), d(dout + c0, m);
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> dx(dinp + c0, m);
    alignas(64) T buf[kChunk];
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> th(buf, m);
    th = (s * (x + T(0.044715) * x * x * x)).tanh();
    const auto g = (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * s * (T(1) + T(3 * 0.044715) * x * x)) * d;
    if (accumulate)
      dx += g;
    else
      dx = g;
  }
}

namespace detail {

/// Row kernels of a softmax on Eigen's packets (one vector register of T), used by the tiled
/// attention's online softmax and the cross-entropy: the 16- to 64-wide rows of the attention's
/// diagonal pieces spent most of their non-product time in the alignment peeling of Eigen's
/// per-row expressions (perf, docs/benchmarks.md), and the cross-entropy's 50,257-wide rows in
/// scalar expf. Scalar tails past the last whole packet.
template <class T>
T row_max(const T* s, int n) {
  using namespace Eigen::internal;
  using Pk = typename packet_traits<T>::type;
  constexpr int L = packet_traits<T>::size;
  T m = -std::numeric_limits<T>::infinity();
  int c = 0;
  if (n >= L) {
    Pk acc = ploadu<Pk>(s);
    for (c = L; c + L <= n; c += L) acc = pmax(acc, ploadu<Pk>(s + c));
    m = predux_max(acc);
  }
  for (; c < n; ++c) m = std::max(m, s[c]);
  return m;
}

/// p[c] = exp(s[c] - m), exactly 0 where s[c] = -inf (a masked score; the vectorised exp would
/// clamp it to a tiny positive value); returns the sum of p. m finite.
template <class T>
T exp_shift_row(const T* s, T m, int n, T* p) {
  using namespace Eigen::internal;
  using Pk = typename packet_traits<T>::type;
  constexpr int L = packet_traits<T>::size;
  const T ninf = -std::numeric_limits<T>::infinity();
  const Pk pm = pset1<Pk>(m), pninf = pset1<Pk>(ninf);
  Pk acc = pset1<Pk>(T(0));
  int c = 0;
  for (; c + L <= n; c += L) {
    const Pk x = ploadu<Pk>(s + c);
    const Pk e = pandnot(pexp(psub(x, pm)), pcmp_eq(x, pninf));
    pstoreu(p + c, e);
    acc = padd(acc, e);
  }
  T sum = predux(acc);
  for (; c < n; ++c) {
    p[c] = s[c] == ninf ? T(0) : std::exp(s[c] - m);
    sum += p[c];
  }
  return sum;
}

}  // namespace detail

/// Softmax cross-entropy. logits [N, V] are replaced by probabilities; losses [N] = -log p(target)
/// (0 where target < 0). Returns the number of counted rows.
template <class T>
std::int64_t crossentropy_forward(T* logits, T* losses, const std::int32_t* targets, int N, int V) {
  std::int64_t count = 0;
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static) reduction(+ : count)
  for (int n = 0; n < N; ++n) {
    T* z = logits + static_cast<std::int64_t>(n) * V;
    const T mx = detail::row_max(z, V);
    const T zt = targets[n] >= 0 ? z[targets[n]] - mx : T(0);
    // in place: each packet of z is read before its exponentials are written back
    const T sum = detail::exp_shift_row(z, mx, V, z);
    const T inv = T(1) / sum;
    for (int v = 0; v < V; ++v) z[v] *= inv;
    if (targets[n] >= 0) {
      // -log p from the shifted logit, so tiny probabilities do not underflow to -inf
      losses[n] = std::log(sum) - zt;
      ++count;
    } else {
      losses[n] = 0;
    }
  }
  return count;
}
/// Backward of crossentropy_forward for loss = scale * sum of counted losses: probs [N, V] are
/// turned into dlogits in place (scale * (p - onehot); rows with target < 0 become 0).
template <class T>
void crossentropy_backward(T* probs, const std::int32_t* targets, int N, int V, T scale) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    T* p = probs + static_cast<std::int64_t>(n) * V;
    if (targets[n] < 0) {
      for (int v = 0; v < V; ++v) p[v] = 0;
      continue;
    }
    for (int v = 0; v < V; ++v) p[v] *= scale;
    p[targets[n]] -= scale;
  }
}

/// Rotary position embedding in place on one head's rows: x [T rows, d_head] with row stride ld;
/// pair (2i, 2i+1) at position t rotates by angle t * base^(-2i/r) for 2i < r, where r = rot
/// (0 = d_head; partial rotary leaves dims >= r alone) and base = 10000 unless given (rope_theta).
/// inverse = true applies the transpose rotation (the backward pass of a rotation is its inverse).
template <class T>
void rope_apply(T* x, int Tn, int dh, std::int64_t ld, bool inverse, int rot = 0, double base = 10000.0) {
  const int r = rot > 0 ? rot : dh;
  for (int t = 0; t < Tn; ++t) {
    T* row = x + static_cast<std::int64_t>(t) * ld;
    for (int i = 0; i < r / 2; ++i) {
      const double theta = static_cast<double>(t) * std::pow(base, -2.0 * i / r);
      const T c = static_cast<T>(std::cos(theta)), s = static_cast<T>(inverse ? -std::sin(theta) : std::sin(theta));
      const T a = row[2 * i], b = row[2 * i + 1];
      row[2 * i] = a * c - b * s;
      row[2 * i + 1] = a * s + b * c;
    }
  }
}

/// ALiBi slope of head h of H in the "simple" recipe, 2^(-8 (h+1) / H) (docs/spec.md §7.3;
/// cf::alibi_slopes_simple). A model's own slopes (its recipe may be BLOOM's) are
/// cf::nn::alibi_slopes(config).
inline double alibi_slope(int h, int H) { return cf::alibi_slopes_simple(H)[static_cast<std::size_t>(h)]; }

/// Numerically stable softplus log(1 + e^x) and logistic sigmoid.
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}
template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace cf::nn
