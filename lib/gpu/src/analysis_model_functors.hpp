#pragma once
// Index functors of the device analysis model (analysis_model_body.hpp), each the twin of a lib/nn
// operation named in its doc. Each writes the output elements of its index from inputs it only
// reads (no atomics), so the Thrust calls are race-free and deterministic on both back ends.
#include <cstdint>
#include <cstring>

#include "cf/gpu/analysis_plan.hpp"
#include "cf/gpu/functors.hpp"

namespace cf::gpu::detail {

/// Row n of x [N, C] normalised into out: LayerNorm (mean removed, then w, b) or RMSNorm (weight
/// only), twins of cf::nn::layernorm_forward / rmsnorm_forward (float sums, as the CPU's). The
/// block-per-row kernels of Ops (the trainer's, which also save mean and rstd) run each CUDA thread
/// as a fiber on the emulated build; a forward-only model takes this plain functor on both.
struct NormRows {
  float* out;
  const float *x, *w, *b;
  int C;
  float eps;
  bool rms;
  CF_HD void operator()(long long n) const {
    const float* r = x + n * C;
    float* o = out + n * C;
    float m = 0;
    if (!rms) {
      for (int c = 0; c < C; ++c) m += r[c];
      m /= static_cast<float>(C);
    }
    float v = 0;
    for (int c = 0; c < C; ++c) v += (r[c] - m) * (r[c] - m);
    const float s = 1.0f / sqrtf(v / static_cast<float>(C) + eps);
    for (int c = 0; c < C; ++c) o[c] = (r[c] - m) * s * w[c] + (b ? b[c] : 0.0f);
  }
};

/// Per-row Euclidean norm of x [N, C], accumulated in double (cf::nn's capture report).
struct RowNorm {
  const float* x;
  int C;
  CF_HD float operator()(long long n) const {
    double s = 0;
    for (int c = 0; c < C; ++c) s += static_cast<double>(x[n * C + c]) * x[n * C + c];
    return static_cast<float>(sqrt(s));
  }
};

/// Head-major element i of [B, H, T, dh] read from the qkv rows [B T, ld] at column col[h] + d
/// (query, key or value head h; grouped-query heads share their kv head's columns).
struct GatherHeads {
  const float* src;
  const std::int64_t* col;
  int H, T, dh;
  long long ld;
  CF_HD float operator()(long long i) const {
    const long long d = i % dh, t = (i / dh) % T, h = (i / (static_cast<long long>(dh) * T)) % H,
                    b = i / (static_cast<long long>(dh) * T * H);
    return src[(b * T + t) * ld + col[h] + d];
  }
};

/// Row r = (b, h, i) of the scores S [B, H, T, T]: ALiBi (minus slope (i - j)), the branch mask
/// [T, T], one softmax over the admitted keys, ADDED to P (branch fusion sums the branches' softmaxes;
/// a row without admitted keys gets nothing). Twin of lib/nn's dense attention path.
struct MaskedSoftmaxAdd {
  float* P;
  const float* S;
  const std::uint8_t* mask;
  const float* slopes;
  int H, T;
  CF_HD float logit(const float* s, long long i, long long j, float a) const {
    return s[j] - a * static_cast<float>(i - j);
  }
  CF_HD void operator()(long long r) const {
    const long long i = r % T, h = (r / T) % H;
    const float* s = S + r * T;
    const std::uint8_t* m = mask + i * T;
    const float a = slopes ? slopes[h] : 0.0f;
    float mx = -3.402823466e38f;
    bool any = false;
    for (long long j = 0; j <= i; ++j)
      if (m[j]) {
        const float z = logit(s, i, j, a);
        mx = z > mx ? z : mx;
        any = true;
      }
    if (!any) return;
    float sum = 0;
    for (long long j = 0; j <= i; ++j)
      if (m[j]) sum += expf(logit(s, i, j, a) - mx);
    const float inv = 1.0f / sum;
    float* p = P + r * T;
    for (long long j = 0; j <= i; ++j)
      if (m[j]) p[j] += expf(logit(s, i, j, a) - mx) * inv;
  }
};

/// -log softmax(z_n)[target] of logits row n (0 where target < 0), from the shifted logit like
/// cf::nn::crossentropy_forward; one row per call. (The trainer's block-per-row kernel is faster on a
/// device, but its emulated twin runs every CUDA thread as a fiber: a forward-only model that only
/// needs the losses takes this plain functor on both back ends.)
struct TargetLoss {
  const float* z;
  const std::int32_t* targets;
  int V;
  CF_HD float operator()(long long n) const {
    const int t = targets[n];
    if (t < 0) return 0.0f;
    const float* r = z + n * V;
    float mx = -3.402823466e38f;
    for (int v = 0; v < V; ++v) mx = r[v] > mx ? r[v] : mx;
    float sum = 0;
    for (int v = 0; v < V; ++v) sum += expf(r[v] - mx);
    return logf(sum) - (r[t] - mx);
  }
};

/// bfloat16 bits to float: the upper half of a float32 (exact).
CF_HD inline float bf16_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/// IEEE half bits to float (exact: every half is a float), the twin of cf::hf::half_to_float.
CF_HD inline float half_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man 2^-24, exact in float
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  const std::uint32_t u = exp == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((exp + 112u) << 23) | (man << 13);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/// Element i of an array of `type` as a float (exact for every WeightType).
CF_HD inline float weight_at(const void* base, WeightType type, long long i) {
  if (type == WeightType::F32) return static_cast<const float*>(base)[i];
  const std::uint16_t b = static_cast<const std::uint16_t*>(base)[i];
  return type == WeightType::BF16 ? bf16_float(b) : half_float(b);
}

/// A matrix of the stored dtype widened to float32 for a GEMM (exact).
struct Widen {
  const void* base;
  WeightType type;
  CF_HD float operator()(long long i) const { return weight_at(base, type, i); }
};

/// Element i of the embedding [N, C] (token row of wte, in its stored dtype, + learned position):
/// the twin of Embed (trainer_common.hpp) reading the matrix array.
struct EmbedStored {
  const std::int32_t* tok;
  const void* wte;
  WeightType type;
  const float* wpe;
  int T, C;
  CF_HD float operator()(long long i) const {
    const long long n = i / C, c = i % C;
    return weight_at(wte, type, static_cast<long long>(tok[n]) * C + c) + (wpe ? wpe[(n % T) * C + c] : 0.0f);
  }
};

/// Chunk element i of a staged tensor (WeightChunk) written to its place: the same dtype copied
/// bit for bit, else converted to float32 (exact from bf16 / f16) or, for the bf16 policy's
/// matrices, rounded to bfloat16 (nearest even, the trainer's ToBf16).
struct PlaceWeights {
  const void* src;
  WeightType st;
  void* dst;
  WeightType dt;
  long long first, at, rows, cols;
  PlaceOp op;
  const long long* inverse;
  CF_HD void operator()(long long i) const {
    const long long e = first + i;
    const long long d = op == PlaceOp::Copy        ? at + e
                        : op == PlaceOp::Transpose ? at + (e % cols) * rows + e / cols
                                                   : at + inverse[e / cols] * cols + e % cols;
    if (dt == st && dt != WeightType::F32)
      static_cast<std::uint16_t*>(dst)[d] = static_cast<const std::uint16_t*>(src)[i];
    else if (dt == WeightType::BF16)
      static_cast<std::uint16_t*>(dst)[d] = ToBf16()(weight_at(src, st, i));
    else
      static_cast<float*>(dst)[d] = weight_at(src, st, i);
  }
};

/// Whether a target counts (>= 0).
struct Counted {
  CF_HD bool operator()(std::int32_t t) const { return t >= 0; }
};

}  // namespace cf::gpu::detail
