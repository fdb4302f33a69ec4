#pragma once
// Functors used only by ops_body.hpp (Thrust zip adaptors of the public functors).
#include <thrust/tuple.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cf/gpu/functors.hpp"

namespace cf::gpu::detail {

struct NonNegative {
  CF_HD bool operator()(std::int32_t x) const { return x >= 0; }
};

struct GeluBackwardAccumulate {
  template <class Tuple>
  CF_HD float operator()(const Tuple& t) const {
    return thrust::get<2>(t) + GeluBackward()(thrust::get<0>(t), thrust::get<1>(t));
  }
};

struct GeluErfBackwardAccumulate {
  template <class Tuple>
  CF_HD float operator()(const Tuple& t) const {
    return thrust::get<2>(t) + GeluErfBackward()(thrust::get<0>(t), thrust::get<1>(t));
  }
};

/// SwiGLU element i = (n, f) of out [N, F] from h [N, 2F] = (gate | up): silu(gate) up, twin of
/// cf::nn::swiglu_forward.
struct SwigluForward {
  const float* h;
  long long F;
  CF_HD float operator()(long long i) const {
    const long long n = i / F, f = i % F;
    const float g = h[n * 2 * F + f], u = h[n * 2 * F + F + f];
    return g / (1.0f + expf(-g)) * u;
  }
};
/// Backward of SwigluForward at element i = (n, f): dh[n, f] and dh[n, F + f] += (d gate, d up),
/// twin of cf::nn::swiglu_backward (each i writes its own two entries: race-free).
struct SwigluBackward {
  float* dh;
  const float *h, *dout;
  long long F;
  CF_HD void operator()(long long i) const {
    const long long n = i / F, f = i % F;
    const float g = h[n * 2 * F + f], u = h[n * 2 * F + F + f], d = dout[i];
    const float sg = 1.0f / (1.0f + expf(-g));
    dh[n * 2 * F + f] += d * u * sg * (1.0f + g * (1.0f - sg));
    dh[n * 2 * F + F + f] += d * g * sg;
  }
};

struct AdamWApply {
  AdamWUpdate u;
  template <class Tuple>
  CF_HD void operator()(Tuple t) const {
    float m = thrust::get<2>(t), v = thrust::get<3>(t);
    thrust::get<0>(t) = u(thrust::get<0>(t), thrust::get<1>(t), m, v);
    thrust::get<2>(t) = m;
    thrust::get<3>(t) = v;
  }
};

}  // namespace cf::gpu::detail

namespace cf::gpu::detail {

/// Row coefficients of head h on row i of a causal ALiBi kernel with diagonal content delta:
/// A[i,j] = a r^(i-j) for j < i and A[i,i] = d (see lib/rollout/src/rollout_structured.cpp):
/// s = max(delta, -m) is the largest logit, Z = e^-s r G(i) + e^(delta-s), G(k) = sum_{d<k} r^d,
/// a = e^-s / Z, d = e^(delta-s) / Z. d is formed directly, never as a + (d - a): with strongly
/// negative content a reaches e^-delta and the sum cancels (row 0 lost 4 digits at delta = -31, a
/// BLOOM layer's measured content).
struct AlibiRow {
  double a, d;
};
CF_HD inline AlibiRow alibi_row(double m, double delta, long long i) {
  const double s = delta > -m ? delta : -m;
  const double G = m == 0.0 ? static_cast<double>(i) : expm1(-m * static_cast<double>(i)) / expm1(-m);
  const double off = exp(-s), diag = exp(delta - s);
  const double Z = off * exp(-m) * G + diag;
  return AlibiRow{off / Z, diag / Z};
}

/// Scan input of head h = idx / n at reversed position j = n - 1 - idx % n: the map x -> r x + v_j a_j.
struct AlibiScanInput {
  const double *slopes, *deltas, *v;
  long long n;
  CF_HD Affine operator()(long long idx) const {
    const long long h = idx / n, j = n - 1 - idx % n;
    const double m = slopes[h];
    return Affine{exp(-m), v[j] * alibi_row(m, deltas[h], j).a};
  }
};
struct SegmentOf {
  long long n;
  CF_HD long long operator()(long long idx) const { return idx / n; }
};
/// Element idx of a batch of n x n matrices transposed: reads src[b, c, r] for (b, r, c).
struct TransposeGather {
  const float* src;
  int n;
  CF_HD float operator()(long long idx) const {
    const long long nn = static_cast<long long>(n) * n, b = idx / nn, r = (idx % nn) / n, c = idx % n;
    return src[b * nn + c * n + r];
  }
};

/// out_j = sum_h w_h (r S_{h,j+1} + v_j d_{h,j}) from the scanned suffix sums.
struct AlibiGather {
  const double *slopes, *deltas, *weights, *v;
  const Affine* S;
  int H;
  long long n;
  CF_HD double operator()(long long j) const {
    double acc = 0;
    // the keys i > j from the suffix sum S_{j+1} (non-negative terms), the diagonal as v_j d:
    // S_j + v_j (d - a) would cancel
    for (int h = 0; h < H; ++h) {
      const double r = exp(-slopes[h]);
      const double tail = j + 1 < n ? r * S[h * n + (n - 2 - j)].c : 0.0;
      acc += weights[h] * (tail + v[j] * alibi_row(slopes[h], deltas[h], j).d);
    }
    return acc;
  }
};

// ---- sliding window of w >= 2 keys (twin of lib/rollout's sweep_window_blocked, docs/spec.md §2): row i
// admits k_i = min(i+1, w) keys, so its coefficients are alibi_row(m, delta, min(i, w-1)).
// Positions are cut into blocks of B = w-1; the window (j, j+B] covers the tail of j's block
// (a within-block suffix sum Suf_{j+1}) and a head of the next block starting at s (a within-block
// prefix sum Pre, times r^(s-j)): T_j = r Suf_{j+1} + r^(s-j) Pre_{min(j+B, n-1)}. Both are
// segmented affine scans (keys = (head, block)) of non-negative terms: no cancellation.
struct WindowRows {
  long long n, B;
  CF_HD long long nblocks() const { return (n + B - 1) / B; }
};
/// Suffix scan input at reversed index idx (head h = idx / n, position j = n-1 - idx % n): x -> r x + v_j a_j.
struct WindowSufInput {
  const double *slopes, *deltas, *v;
  WindowRows w;
  CF_HD Affine operator()(long long idx) const {
    const long long h = idx / w.n, j = w.n - 1 - idx % w.n;
    const double m = slopes[h];
    return Affine{exp(-m), v[j] * alibi_row(m, deltas[h], j < w.B ? j : w.B).a};
  }
};
struct WindowSufKey {
  WindowRows w;
  CF_HD long long operator()(long long idx) const { return (idx / w.n) * w.nblocks() + (w.n - 1 - idx % w.n) / w.B; }
};
/// Prefix scan input at idx (head h = idx / n, position i = idx % n in the block starting at s):
/// x -> x + r^(i-s) v_i a_i.
struct WindowPreInput {
  const double *slopes, *deltas, *v;
  WindowRows w;
  CF_HD Affine operator()(long long idx) const {
    const long long h = idx / w.n, i = idx % w.n, s = i / w.B * w.B;
    const double m = slopes[h];
    return Affine{1.0, exp(-m * static_cast<double>(i - s)) * (v[i] * alibi_row(m, deltas[h], i < w.B ? i : w.B).a)};
  }
};
struct WindowPreKey {
  WindowRows w;
  CF_HD long long operator()(long long idx) const { return (idx / w.n) * w.nblocks() + (idx % w.n) / w.B; }
};
/// out_j = sum_h w_h (T_{h,j} + v_j d_{h,j}) from the scanned Suf (reversed order) and Pre.
struct WindowGather {
  const double *slopes, *deltas, *weights, *v;
  const Affine *Suf, *Pre;
  int H;
  WindowRows w;
  CF_HD double operator()(long long j) const {
    double acc = 0;
    if (w.B == 0) {  // window of one key: every row reads only itself (d = 1)
      for (int h = 0; h < H; ++h) {
        const AlibiRow c = alibi_row(slopes[h], deltas[h], 0);
        acc += weights[h] * v[j] * c.d;
      }
      return acc;
    }
    const long long n = w.n, s = (j / w.B + 1) * w.B, end = s < n ? s : n;
    for (int h = 0; h < H; ++h) {
      const double m = slopes[h], r = exp(-m);
      const AlibiRow c = alibi_row(m, deltas[h], j < w.B ? j : w.B);
      double t = j + 1 < end ? r * Suf[h * n + (n - 1 - (j + 1))].c : 0.0;
      if (s < n) {
        const long long last = j + w.B < n - 1 ? j + w.B : n - 1;
        t += exp(-m * static_cast<double>(s - j)) * Pre[h * n + last].c;
      }
      acc += weights[h] * (t + v[j] * c.d);
    }
    return acc;
  }
};

/// Rotary position embedding of one (sequence, position, pair) at idx (twin of cf::nn::rope_apply:
/// angle t base^(-2i/r) in double, rotation in float).
struct RopeRotate {
  float* x;
  int Tn, pairs, r;
  long long ld, seq_stride;
  bool inverse;
  double base;
  CF_HD void operator()(long long idx) const {
    const long long s = idx / (static_cast<long long>(Tn) * pairs), t = (idx / pairs) % Tn;
    const int i = static_cast<int>(idx % pairs);
    const double theta = static_cast<double>(t) * pow(base, -2.0 * i / r);
    const float c = static_cast<float>(cos(theta)), sn = static_cast<float>(inverse ? -sin(theta) : sin(theta));
    float* row = x + s * seq_stride + t * ld;
    const float a = row[2 * i], b = row[2 * i + 1];
    row[2 * i] = a * c - b * sn;
    row[2 * i + 1] = a * sn + b * c;
  }
};

}  // namespace cf::gpu::detail
