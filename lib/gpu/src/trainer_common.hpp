#pragma once
// Index functors of the device trainer (trainer_body.hpp): gathers between the [B, T, ...] row
// layout of the linear layers and the [B, H, T, dh] layout of the attention kernels, embeddings,
// bias broadcasts and reductions. Each writes one output element from inputs it only reads, so
// the Thrust calls are race-free and deterministic on both backends (no atomics).
#include <cstdint>

#include "cf/gpu/functors.hpp"

namespace cf::gpu::detail {

/// out[i] += b[i % n] (bias broadcast over rows).
struct AddBias {
  float* out;
  const float* b;
  long long n;
  CF_HD void operator()(long long i) const { out[i] += b[i % n]; }
};

/// Token (+ learned position) embedding, twin of cf::nn::encoder_forward: out [N, C].
struct Embed {
  const std::int32_t* tok;
  const float *wte, *wpe;
  int T, C;
  CF_HD float operator()(long long i) const {
    const long long n = i / C, c = i % C;
    return wte[static_cast<long long>(tok[n]) * C + c] + (wpe ? wpe[(n % T) * C + c] : 0.0f);
  }
};

/// Backward of Embed into wte: unique token u (id uniq[u]) gathers the rows pos[ptr[u] .. ptr[u+1])
/// of dout [N, C], in increasing row order. One element (u, c) per call.
struct EmbedBackwardTokens {
  float* dwte;
  const float* dout;
  const std::int32_t *uniq, *ptr, *pos;
  int C;
  CF_HD void operator()(long long i) const {
    const long long u = i / C, c = i % C;
    float s = 0;
    for (int p = ptr[u]; p < ptr[u + 1]; ++p) s += dout[static_cast<long long>(pos[p]) * C + c];
    dwte[static_cast<long long>(uniq[u]) * C + c] += s;
  }
};

/// Backward of Embed into wpe [T, C]: sum over the B sequences.
struct EmbedBackwardPositions {
  float* dwpe;
  const float* dout;
  int B, T, C;
  CF_HD void operator()(long long i) const {
    const long long t = i / C, c = i % C;
    float s = 0;
    for (int b = 0; b < B; ++b) s += dout[(static_cast<long long>(b) * T + t) * C + c];
    dwpe[i] += s;
  }
};

/// Head-major element i of [B, H, T, dh] read from a row-major [B T, ld] array at column
/// off + h dh + d (split of qkv into q, k, v; of datty into dy).
struct ToHeads {
  const float* src;
  int H, T, dh;
  long long ld, off;
  CF_HD float operator()(long long i) const {
    const long long d = i % dh, t = (i / dh) % T, h = (i / (static_cast<long long>(dh) * T)) % H,
                    b = i / (static_cast<long long>(dh) * T * H);
    return src[(b * T + t) * ld + off + h * dh + d];
  }
};

/// Row-major element i of [B T, nsrc H dh] gathered from nsrc head-major arrays [B, H, T, dh]
/// (atty from y; dqkv from dq, dk, dv).
struct FromHeads {
  const float *s0, *s1, *s2;
  int H, T, dh, nsrc;
  CF_HD float operator()(long long i) const {
    const long long HD = static_cast<long long>(H) * dh, ld = nsrc * HD;
    const long long n = i / ld, r = i % ld, which = r / HD, h = (r % HD) / dh, d = r % dh;
    const long long b = n / T, t = n % T;
    const float* s = which == 0 ? s0 : which == 1 ? s1 : s2;
    return s[((b * H + h) * T + t) * dh + d];
  }
};

/// Element i of [B, H, T, dh] for query head h read from the key or value columns of qkv rows
/// [B T, ld]: kv head h / group at column off + (h / group) dh (grouped-query attention,
/// cf::nn::detail::QkvLayout; group 1 = one kv head per query head).
struct ToHeadsKv {
  const float* src;
  int H, T, dh, group;
  long long ld, off;
  CF_HD float operator()(long long i) const {
    const long long d = i % dh, t = (i / dh) % T, h = (i / (static_cast<long long>(dh) * T)) % H,
                    b = i / (static_cast<long long>(dh) * T * H);
    return src[(b * T + t) * ld + off + (h / group) * dh + d];
  }
};

/// Row-major element i of dqkv [B T, (H + 2 KV) dh] from the per-query-head dq, dk, dv [B, H, T,
/// dh]: the query columns copied, each kv head's key and value columns the sum over the H / KV
/// query heads reading it, in head order (the backward of ToHeads / ToHeadsKv).
struct FromHeadsQkv {
  const float *dq, *dk, *dv;
  int H, KV, T, dh;
  CF_HD float operator()(long long i) const {
    const long long HD = static_cast<long long>(H) * dh, KD = static_cast<long long>(KV) * dh, ld = HD + 2 * KD;
    const long long n = i / ld, r = i % ld, d = r % dh, b = n / T, t = n % T;
    if (r < HD) return dq[((b * H + r / dh) * T + t) * dh + d];
    const float* s = r < HD + KD ? dk : dv;
    const long long g = ((r - HD) % KD) / dh, group = H / KV;
    float sum = 0;
    for (long long h = g * group; h < (g + 1) * group; ++h) sum += s[((b * H + h) * T + t) * dh + d];
    return sum;
  }
};

/// S-D damping per head, element i of [B, H, T]: softplus(z) + eps of z [B T, H] (the
/// pre-activation x W_d^T + b_d; cf::nn::detail::SdUnit::prepare).
struct SdDamp {
  const float* z;
  int H, T;
  float eps;
  CF_HD float operator()(long long i) const {
    const long long t = i % T, h = (i / T) % H, b = i / (static_cast<long long>(T) * H);
    const float x = z[(b * T + t) * H + h];
    return (x > 20.0f ? x : log1pf(expf(x))) + eps;
  }
};

/// Backward of SdDamp, element i of dz [B T, H]: d damp (from [B, H, T]) times softplus' = sigmoid(z).
struct SdDampBackward {
  const float *z, *ddamp;
  int H, T;
  CF_HD float operator()(long long i) const {
    const long long h = i % H, n = i / H, b = n / T, t = n % T;
    return ddamp[(b * H + h) * T + t] * (1.0f / (1.0f + expf(-z[i])));
  }
};

/// Runway gradients of the last head's values (cf::nn::detail::RunwayUnit::reduce_tiled), element
/// i of [B, T, dh]: dv of head H-1 += sum over heads h of dvl[b, h, m] + dvs[b, h, m + 1] (row
/// m + 1 used v_m as its v_{i-1}), heads in order.
struct RunwayReduceV {
  float* dv;
  const float *dvs, *dvl;
  int H, T, dh;
  CF_HD void operator()(long long i) const {
    const long long d = i % dh, m = (i / dh) % T, b = i / (static_cast<long long>(dh) * T);
    float s = 0;
    for (long long h = 0; h < H; ++h) {
      const long long row = ((b * H + h) * T + m) * dh + d;
      s += dvl[row];
      if (m + 1 < T) s += dvs[row + dh];
    }
    dv[((b * H + H - 1) * T + m) * dh + d] += s;
  }
};

/// dB [dh, dh] += the sum of the per-(sequence, head) bilinear runway gradients [n, dh, dh], in order.
struct SumBlocks {
  float* out;
  const float* parts;
  long long n, size;
  CF_HD void operator()(long long e) const {
    float s = 0;
    for (long long k = 0; k < n; ++k) s += parts[k * size + e];
    out[e] += s;
  }
};

/// ELU+1 linear attention (cf::nn::detail::LinearUnit; causal, masks and ALiBi ignored) on
/// head-major q, k, v [B, H, T, dh]: phi(x) = elu(x) + 1, P_ij = phi(q_i).phi(k_j) / den_i over
/// j <= i. A direct O(T^2 dh) form per (sequence, head, row), one row per call, no atomics.
CF_HD inline float elu1(float x) { return x > 0.0f ? x + 1.0f : expf(x); }
CF_HD inline float delu1(float x) { return x > 0.0f ? 1.0f : expf(x); }
CF_HD inline float phi_dot(const float* a, const float* b, int dh) {
  float s = 0;
  for (int d = 0; d < dh; ++d) s += elu1(a[d]) * elu1(b[d]);
  return s;
}

/// Row r = (b h) T + i: y_i = sum_{j <= i} A_ij v_j / den_i, den_i = sum_{j <= i} A_ij (saved).
struct LinearForward {
  const float *q, *k, *v;
  float *y, *den;
  int T, dh;
  CF_HD void operator()(long long r) const {
    const long long base = (r / T) * T * dh, i = r % T;
    float* yi = y + r * dh;
    for (int d = 0; d < dh; ++d) yi[d] = 0;
    float s = 0;
    for (long long j = 0; j <= i; ++j) {
      const float a = phi_dot(q + r * dh, k + base + j * dh, dh);
      s += a;
      for (int d = 0; d < dh; ++d) yi[d] += a * v[base + j * dh + d];
    }
    den[r] = s;
    for (int d = 0; d < dh; ++d) yi[d] /= s;
  }
};

/// Row term of the backward, rd_i = dy_i . y_i (= sum_j P_ij dP_ij, dP_ij = dy_i . v_j).
struct RowDot {
  const float *a, *b;
  int dh;
  CF_HD float operator()(long long r) const {
    float s = 0;
    for (int d = 0; d < dh; ++d) s += a[r * dh + d] * b[r * dh + d];
    return s;
  }
};

/// Query side, row i: dA_ij = (dy_i . v_j - rd_i) / den_i, dq_i += phi'(q_i) sum_{j <= i} dA_ij phi(k_j).
struct LinearBackwardQ {
  const float *q, *k, *v, *dy, *den, *rd;
  float* dq;
  int T, dh;
  CF_HD void operator()(long long r) const {
    const long long base = (r / T) * T * dh, i = r % T;
    float acc[128];
    for (int d = 0; d < dh; ++d) acc[d] = 0;
    for (long long j = 0; j <= i; ++j) {
      float dp = 0;
      for (int d = 0; d < dh; ++d) dp += dy[r * dh + d] * v[base + j * dh + d];
      const float da = (dp - rd[r]) / den[r];
      for (int d = 0; d < dh; ++d) acc[d] += da * elu1(k[base + j * dh + d]);
    }
    for (int d = 0; d < dh; ++d) dq[r * dh + d] += acc[d] * delu1(q[r * dh + d]);
  }
};

/// Key side, row j: dv_j += sum_{i >= j} P_ij dy_i, dk_j += phi'(k_j) sum_{i >= j} dA_ij phi(q_i).
struct LinearBackwardKV {
  const float *q, *k, *v, *dy, *den, *rd;
  float *dk, *dv;
  int T, dh;
  CF_HD void operator()(long long r) const {
    const long long base = (r / T) * T * dh, j = r % T;
    float ak[128];
    for (int d = 0; d < dh; ++d) ak[d] = 0;
    for (long long i = j; i < T; ++i) {
      const long long ri = base / dh + i;
      const float p = phi_dot(q + ri * dh, k + r * dh, dh) / den[ri];
      float dp = 0;
      for (int d = 0; d < dh; ++d) dp += dy[ri * dh + d] * v[r * dh + d];
      const float da = (dp - rd[ri]) / den[ri];
      for (int d = 0; d < dh; ++d) {
        dv[r * dh + d] += p * dy[ri * dh + d];
        ak[d] += da * elu1(q[ri * dh + d]);
      }
    }
    for (int d = 0; d < dh; ++d) dk[r * dh + d] += ak[d] * delu1(k[r * dh + d]);
  }
};

struct Square {
  CF_HD double operator()(float x) const { return static_cast<double>(x) * x; }
};
struct Scale {
  float s;
  CF_HD float operator()(float x) const { return x * s; }
};
struct Divide {
  float s;
  CF_HD float operator()(float x) const { return x / s; }
};
struct NotFinite {
  CF_HD bool operator()(float x) const { return !(x - x == 0.0f); }  // NaN and +-inf
};
/// Element i of the concatenation a | b | c of three arrays of n is not finite.
struct NotFiniteIn3 {
  const float *a, *b, *c;
  long long n;
  CF_HD bool operator()(long long i) const {
    const float* s = i < n ? a : i < 2 * n ? b : c;
    return NotFinite()(s[i % n]);
  }
};
struct ToDouble {
  CF_HD double operator()(float x) const { return x; }
};
/// a b in double (the residual seed's objective, an inner product).
struct ProductDouble {
  CF_HD double operator()(float a, float b) const { return static_cast<double>(a) * b; }
};

}  // namespace cf::gpu::detail
