#pragma once
// S-D (skew logits, diagonal damping) and runway rewiring (dot and bilinear log-beta bias) inputs
// of the attention kernel tests (test_attention_emu.cpp, test_flash_extras_emu.cpp), their dense
// oracle in double (cf::nn::detail::attention_head_forward / _backward with the runway bias
// -softplus(tau) built here from Runway (Lee & Clark) Eqs. 8-14 as lib/nn's runway_forward does,
// and the runway gradients from the oracle's logit gradient dS), and one emulated kernel run.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "attention_cases.hpp"
#include "cf/gpu/attention.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/ops.hpp"

namespace cf_test {

enum class Extra { Sd, RunwayDot, RunwayBilinear, SdRunway };

inline const char* extra_name(Extra e) {
  return e == Extra::Sd               ? "S-D"
         : e == Extra::RunwayDot      ? "runway dot"
         : e == Extra::RunwayBilinear ? "runway bilinear"
                                      : "S-D + runway";
}

struct ExtrasProblem {
  int B = 2, H = 3, T = 0, dh = 0;
  bool sd = false, rw = false, bil = false;
  Masks masks;
  std::vector<const std::uint8_t*> mp;
  cf::gpu::TiledMask tm;
  std::vector<float> q, k, v, dy, damp, Bm, slopes;
  float scale = 0;
  std::size_t n() const { return static_cast<std::size_t>(B) * H * T * dh; }
  std::size_t hs() const { return static_cast<std::size_t>(T) * dh; }
  std::size_t nl() const { return static_cast<std::size_t>(B) * H * tm.nb * T; }
  cf::gpu::AttentionShape shape() const { return {B, H, T, dh, scale}; }
  /// The kernels' extras: the runway reads the last head's values of each sequence.
  cf::gpu::AttentionExtras extras() const {
    cf::gpu::AttentionExtras x;
    if (sd) x.damp = damp.data();
    if (rw) {
      x.runway_v = v.data() + static_cast<std::size_t>(H - 1) * hs();
      x.runway_stride = static_cast<std::int64_t>(H) * hs();
      if (bil) x.runway_B = Bm.data();
    }
    return x;
  }
};

inline ExtrasProblem make_extras_problem(cf::graph::PatternKind kind, bool branch, Extra extra, bool alibi, bool rope,
                                         int T, int dh, int bb = 12, int w = 10, int e = 4) {
  ExtrasProblem p;
  p.T = T, p.dh = dh;
  p.sd = extra == Extra::Sd || extra == Extra::SdRunway;
  p.rw = extra != Extra::Sd, p.bil = extra == Extra::RunwayBilinear;
  p.masks = make_masks(kind, branch, T, bb, w, e);
  for (const auto& m : p.masks) p.mp.push_back(m.data());
  p.tm = cf::gpu::tiled_mask_from_dense(p.mp, T);
  const std::size_t n = p.n();
  p.q = randn(n, 11), p.k = randn(n, 12), p.v = randn(n, 13), p.dy = randn(n, 14);
  if (rope)  // RoPE is applied to q and k before the kernels (as the trainer does)
    for (int bh = 0; bh < p.B * p.H; ++bh) {
      cf::nn::rope_apply(p.q.data() + std::size_t(bh) * T * dh, T, dh, dh, false);
      cf::nn::rope_apply(p.k.data() + std::size_t(bh) * T * dh, T, dh, dh, false);
    }
  p.damp.resize(std::size_t(p.B) * p.H * T);
  p.Bm = randn(std::size_t(dh) * dh, 15, 0.3f);
  std::mt19937 g(16);
  std::uniform_real_distribution<float> u(0.0f, 2.0f);
  for (auto& x : p.damp) x = u(g);
  p.slopes.resize(p.H);
  for (int h = 0; h < p.H; ++h) p.slopes[h] = alibi ? float(cf::nn::alibi_slope(h, p.H)) : 0.0f;
  p.scale = (p.sd ? 0.5f : 1.0f) / std::sqrt(float(dh));
  return p;
}

struct ExtrasOracle {
  std::vector<double> y, dq, dk, dv, dd, dvs, dvl, dB;
};

inline ExtrasOracle extras_oracle(const ExtrasProblem& p) {
  const int B = p.B, H = p.H, T = p.T, dh = p.dh;
  const std::size_t n = p.n(), hs = p.hs(), TT = std::size_t(T) * T;
  const double c = 1.0 / std::sqrt(double(dh));
  const bool sd = p.sd, rw = p.rw, bil = p.bil;
  const auto& Bm = p.Bm;
  auto D = [](const float* x, std::size_t m) { return std::vector<double>(x, x + m); };
  ExtrasOracle o;
  o.y.assign(n, 0), o.dq.assign(n, 0), o.dk.assign(n, 0), o.dv.assign(n, 0), o.dd.assign(p.damp.size(), 0);
  o.dvs.assign(n, 0), o.dvl.assign(n, 0), o.dB.assign(std::size_t(B) * H * dh * dh, 0);
  std::vector<double> P(p.masks.size() * TT), dS(TT), tau(TT), bias(TT);
  for (int b = 0; b < B; ++b) {
    const float* vl = p.v.data() + (std::size_t(b) * H + H - 1) * hs;  // the last head's values
    std::fill(bias.begin(), bias.end(), 0.0), std::fill(tau.begin(), tau.end(), 0.0);
    std::vector<double> btv(rw ? hs : 0);  // u_i / c (dot) or B^T vl_{i-1} (bilinear), row i
    for (int i = 1; rw && i < T; ++i)
      for (int a = 0; a < dh; ++a) {
        double t = 0;
        for (int z = 0; z < dh; ++z)
          t += bil ? Bm[z * dh + a] * double(vl[(i - 1) * dh + z]) : (a == z ? c * vl[(i - 1) * dh + z] : 0.0);
        btv[i * dh + a] = t;
      }
    if (rw)
      for (int i = 3; i < T; ++i)
        for (int j = 1; j <= i - 2; ++j) {
          double t = 0;
          for (int a = 0; a < dh; ++a) t += btv[i * dh + a] * vl[j * dh + a];
          tau[i * T + j] = t;
          bias[i * T + j] = -cf::nn::softplus(t);
        }
    for (int h = 0; h < H; ++h) {
      const std::size_t bh = std::size_t(b) * H + h, off = bh * hs;
      cf::nn::detail::HeadSpec spec;
      spec.scale = p.scale;
      spec.sd = sd;
      spec.alibi_slope = p.slopes[h];
      spec.masks = p.mp;
      const auto qd = D(p.q.data() + off, hs), kd = D(p.k.data() + off, hs), vd = D(p.v.data() + off, hs),
                 dyd = D(p.dy.data() + off, hs), dmp = D(p.damp.data() + bh * T, T);
      std::vector<double> ddh(T, 0);
      cf::nn::detail::attention_head_forward<double>(spec, T, dh, qd.data(), kd.data(), vd.data(), dh, o.y.data() + off,
                                                     dh, sd ? dmp.data() : nullptr, rw ? bias.data() : nullptr,
                                                     P.data(), nullptr, nullptr);
      cf::nn::detail::attention_head_backward<double>(
          spec, T, dh, qd.data(), kd.data(), vd.data(), dh, o.dq.data() + off, o.dk.data() + off, o.dv.data() + off,
          dyd.data(), dh, P.data(), nullptr, dS.data(), sd ? ddh.data() : nullptr);
      for (int t = 0; t < T; ++t) o.dd[bh * T + t] = ddh[t];
      if (!rw) continue;
      std::vector<double> g(hs, 0);  // g_i = sum_j dtau_ij vl_j
      for (int i = 3; i < T; ++i)
        for (int j = 1; j <= i - 2; ++j) {
          const double dtau = -dS[i * T + j] * cf::nn::sigmoid(tau[i * T + j]);
          for (int a = 0; a < dh; ++a) {
            g[i * dh + a] += dtau * vl[j * dh + a];
            o.dvl[off + j * dh + a] += dtau * btv[i * dh + a];
          }
        }
      for (int i = 0; i < T; ++i)
        for (int a = 0; a < dh; ++a) {
          double s = 0;  // d/d vl_{i-1}: c g_i (dot) or B g_i (bilinear)
          for (int z = 0; z < dh; ++z) s += bil ? Bm[a * dh + z] * g[i * dh + z] : (a == z ? c * g[i * dh + z] : 0.0);
          o.dvs[off + i * dh + a] = s;
          if (bil && i >= 1)
            for (int z = 0; z < dh; ++z)
              o.dB[bh * dh * dh + a * dh + z] += double(vl[(i - 1) * dh + a]) * g[i * dh + z];
        }
    }
  }
  return o;
}

struct ExtrasResult {
  std::vector<float> y, lse, obr, dsum, dq, dk, dv, dd, dvs, dvl, dB;
};

/// Forward and backward of the kernels `ctx` selects (every gradient buffer zeroed first).
inline ExtrasResult run_extras(cf::gpu::Context& ctx, const ExtrasProblem& p) {
  const std::size_t n = p.n();
  ExtrasResult r;
  r.y.resize(n), r.lse.resize(p.nl()), r.obr.resize(p.nl() * p.dh), r.dsum.resize(p.nl());
  r.dq.assign(n, 0), r.dk.assign(n, 0), r.dv.assign(n, 0), r.dd.assign(p.damp.size(), 0);
  r.dvs.assign(n, 0), r.dvl.assign(n, 0), r.dB.assign(std::size_t(p.B) * p.H * p.dh * p.dh, 0);
  cf::gpu::AttentionExtraGrads g;
  if (p.sd) g.ddamp = r.dd.data();
  if (p.rw) g.dvs = r.dvs.data(), g.dvl = r.dvl.data(), g.dB = p.bil ? r.dB.data() : nullptr;
  const cf::gpu::AttentionExtras x = p.extras();
  cf::gpu::emu::attention_forward_ex(ctx, p.shape(), p.tm, p.slopes.data(), x, p.q.data(), p.k.data(), p.v.data(),
                                     r.y.data(), r.lse.data(), r.obr.data());
  cf::gpu::emu::attention_backward_ex(ctx, p.shape(), p.tm, p.slopes.data(), x, p.q.data(), p.k.data(), p.v.data(),
                                      p.dy.data(), r.lse.data(), r.obr.data(), r.dsum.data(), r.dq.data(), r.dk.data(),
                                      r.dv.data(), g);
  return r;
}

// max |a - b| / (1 + |b|) over float kernel output a and double oracle b
inline double max_rel(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]) / (1.0 + std::abs(b[i])));
  return m;
}

}  // namespace cf_test
