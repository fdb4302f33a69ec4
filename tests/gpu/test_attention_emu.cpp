// Tiled attention kernels (cf/gpu/kernels/attention.cuh) executed on the CPU against the
// trainer's dense attention (cf::nn::detail::attention_head_forward / _backward, the oracle), for
// every mask family, both bridge fusions, with and without ALiBi, at ragged T (not a multiple of
// the tile or the block), under both intra-block schedules; S-D and runway rewiring (dot and
// bilinear) with ALiBi and RoPE against the same dense head run in double.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention_cases.hpp"
#include "cf/gpu/attention.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/graph/mask.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/ops.hpp"

namespace {

using cf_test::make_masks;
using cf_test::Masks;
using cf_test::max_abs_diff;
using cf_test::randn;

void check_case(cf::gpu::Context& ctx, cf::graph::PatternKind kind, bool branch, bool alibi, int T, int dh, int bb = 12,
                int w = 10, int e = 4) {
  const int B = 2, H = 3;
  const Masks masks = make_masks(kind, branch, T, bb, w, e);
  std::vector<const std::uint8_t*> mp;
  for (const auto& m : masks) mp.push_back(m.data());
  const cf::gpu::TiledMask tm = cf::gpu::tiled_mask_from_dense(mp, T);
  const std::size_t n = static_cast<std::size_t>(B) * H * T * dh;
  const auto q = randn(n, 1), k = randn(n, 2), v = randn(n, 3), dy = randn(n, 4);
  std::vector<float> slopes(H);
  for (int h = 0; h < H; ++h) slopes[h] = alibi ? float(cf::nn::alibi_slope(h, H)) : 0.0f;
  const float scale = 1.0f / std::sqrt(float(dh));

  // oracle: the dense head of lib/nn, per (b, h)
  std::vector<float> y0(n), dq0(n, 0), dk0(n, 0), dv0(n, 0);
  std::vector<float> P(masks.size() * size_t(T) * T);
  for (int bh = 0; bh < B * H; ++bh) {
    cf::nn::detail::HeadSpec spec;
    spec.scale = scale;
    spec.alibi_slope = slopes[bh % H];
    spec.masks = mp;
    const std::size_t o = static_cast<std::size_t>(bh) * T * dh;
    cf::nn::detail::attention_head_forward<float>(spec, T, dh, q.data() + o, k.data() + o, v.data() + o, dh,
                                                  y0.data() + o, dh, nullptr, nullptr, P.data(), nullptr, nullptr);
    cf::nn::detail::attention_head_backward<float>(spec, T, dh, q.data() + o, k.data() + o, v.data() + o, dh,
                                                   dq0.data() + o, dk0.data() + o, dv0.data() + o, dy.data() + o, dh,
                                                   P.data(), nullptr, nullptr, nullptr);
  }
  const cf::gpu::AttentionShape s{B, H, T, dh, scale};
  for (auto sched : {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse}) {
    cf::gpu::emu::set_schedule(sched);
    std::vector<float> y1(n), lse(size_t(B) * H * tm.nb * T), obr(lse.size() * dh), dsum(lse.size());
    std::vector<float> dq1(n, 0), dk1(n, 0), dv1(n, 0);
    cf::gpu::emu::attention_forward(ctx, s, tm, slopes.data(), q.data(), k.data(), v.data(), y1.data(), lse.data(),
                                    obr.data());
    cf::gpu::emu::attention_backward(ctx, s, tm, slopes.data(), q.data(), k.data(), v.data(), dy.data(), lse.data(),
                                     obr.data(), dsum.data(), dq1.data(), dk1.data(), dv1.data());
    INFO(cf::graph::pattern_name(kind) << (branch ? " branch" : " union") << (alibi ? " alibi" : "") << " T=" << T
                                       << " dh=" << dh);
    // 2e-5 absolute on O(1) values: online softmax rescales and sums in tile order, the oracle in
    // row order (float32 round-off of sums of <= T terms)
    CHECK(max_abs_diff(y1, y0) < 2e-5);
    CHECK(max_abs_diff(dq1, dq0) < 5e-5);
    CHECK(max_abs_diff(dk1, dk0) < 5e-5);
    CHECK(max_abs_diff(dv1, dv0) < 5e-5);
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

}  // namespace

TEST_CASE("gpu tiled attention = dense attention for every mask family, fusion, ALiBi, ragged T", "[gpu][emu]") {
  using K = cf::graph::PatternKind;
  // the three kernel sets of plain heads: the FlashAttention-2 style ones (default), the
  // register-resident ones and the general ones, each in its own context
  // (CF_GPU_ATTENTION=flash|plain|generic sets the default context's choice)
  for (const auto path :
       {cf::gpu::AttentionPath::Flash, cf::gpu::AttentionPath::Plain, cf::gpu::AttentionPath::Generic}) {
    INFO("CF_GPU_ATTENTION=" << cf::gpu::kAttentionPaths.name(path));
    cf::gpu::ContextOptions o;
    o.attention = path;
    cf::gpu::Context ctx(o);
    for (K kind : {K::Full, K::Block, K::Swa, K::Bridge, K::Pbb, K::SeBridge})
      for (bool branch : {false, true})
        for (bool alibi : {false, true}) {
          if (branch && (kind == K::Full || kind == K::Block || kind == K::Swa)) continue;
          check_case(ctx, kind, branch, alibi, /*T=*/45, /*dh=*/8);
        }
    check_case(ctx, K::Full, false, true, 77, 40);      // dh between the 32 and 64 capacities
    check_case(ctx, K::SeBridge, true, false, 70, 72);  // dh in the 128 capacity
    check_case(ctx, K::Full, false, false, 1, 4);       // a single position
    // centered bridges with b < w <= 2b: overlapping write-back sets, two bridge branches (Eq. 35)
    check_case(ctx, K::Bridge, true, true, 45, 8, /*b=*/8, /*w=*/12);
    check_case(ctx, K::Pbb, true, false, 45, 8, /*b=*/8, /*w=*/12);
  }
}

TEST_CASE("gpu tiled mask: visited tiles follow the mask's score count", "[gpu]") {
  const int T = 256;
  const Masks full = make_masks(cf::graph::PatternKind::Full, false, T, 12, 10, 4);
  const Masks swa = make_masks(cf::graph::PatternKind::Swa, false, T, 12, 10, 4);
  const auto tf = cf::gpu::tiled_mask_from_dense({full[0].data()}, T);
  const auto ts = cf::gpu::tiled_mask_from_dense({swa[0].data()}, T);
  CHECK(tf.scores == std::int64_t(T) * (T + 1) / 2);
  const int nt = T / cf::gpu::kAttentionTile;
  CHECK(tf.tiles_visited == std::int64_t(nt) * (nt + 1) / 2);
  CHECK(ts.tiles_visited <= 2 * nt);    // a window of 10 < tile touches at most two tiles per row tile
  std::vector<std::uint8_t> bad(4, 1);  // 2 x 2 all ones: admits key 1 for query 0
  REQUIRE_THROWS_WITH(cf::gpu::tiled_mask_from_dense({bad.data()}, 2), Catch::Contains("not causal"));
}

namespace {

enum class Extra { Sd, RunwayDot, RunwayBilinear, SdRunway };

const char* extra_name(Extra e) {
  return e == Extra::Sd               ? "S-D"
         : e == Extra::RunwayDot      ? "runway dot"
         : e == Extra::RunwayBilinear ? "runway bilinear"
                                      : "S-D + runway";
}

// max |a - b| / (1 + |b|) over float kernel output a and double oracle b
double max_rel(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]) / (1.0 + std::abs(b[i])));
  return m;
}

// S-D (skew logits, diagonal damping) and runway rewiring (dot and bilinear log-beta bias) in the
// tiled kernels against the dense head of lib/nn run in double (cf::nn::detail::attention_head_*,
// with the runway bias -softplus(tau) built here from Runway (Lee & Clark) Eqs. 8-14 as lib/nn's
// runway_forward does, and the runway gradients from the oracle's logit gradient dS).
void check_extras(cf::graph::PatternKind kind, bool branch, Extra extra, bool alibi, bool rope, int T, int dh,
                  int bb = 12, int w = 10, int e = 4) {
  const int B = 2, H = 3;
  const bool sd = extra == Extra::Sd || extra == Extra::SdRunway;
  const bool rw = extra != Extra::Sd, bil = extra == Extra::RunwayBilinear;
  const Masks masks = make_masks(kind, branch, T, bb, w, e);
  std::vector<const std::uint8_t*> mp;
  for (const auto& m : masks) mp.push_back(m.data());
  const cf::gpu::TiledMask tm = cf::gpu::tiled_mask_from_dense(mp, T);
  const std::size_t n = static_cast<std::size_t>(B) * H * T * dh;
  auto q = randn(n, 11), k = randn(n, 12), v = randn(n, 13), dy = randn(n, 14);
  if (rope)  // RoPE is applied to q and k before the kernels (as the trainer does)
    for (int bh = 0; bh < B * H; ++bh) {
      cf::nn::rope_apply(q.data() + std::size_t(bh) * T * dh, T, dh, dh, false);
      cf::nn::rope_apply(k.data() + std::size_t(bh) * T * dh, T, dh, dh, false);
    }
  std::vector<float> damp(std::size_t(B) * H * T), Bm = randn(std::size_t(dh) * dh, 15, 0.3f);
  {
    std::mt19937 g(16);
    std::uniform_real_distribution<float> u(0.0f, 2.0f);
    for (auto& x : damp) x = u(g);
  }
  std::vector<float> slopes(H);
  for (int h = 0; h < H; ++h) slopes[h] = alibi ? float(cf::nn::alibi_slope(h, H)) : 0.0f;
  const float scale = (sd ? 0.5f : 1.0f) / std::sqrt(float(dh));
  const double c = 1.0 / std::sqrt(double(dh));
  auto D = [](const float* p, std::size_t m) { return std::vector<double>(p, p + m); };
  const std::size_t hs = std::size_t(T) * dh, TT = std::size_t(T) * T;

  // oracle, in double
  std::vector<double> y0(n), dq0(n, 0), dk0(n, 0), dv0(n, 0), dd0(damp.size(), 0), dvs0(n, 0), dvl0(n, 0),
      dB0(std::size_t(B) * H * dh * dh, 0);
  std::vector<double> P(masks.size() * TT), dS(TT), tau(TT), bias(TT);
  for (int b = 0; b < B; ++b) {
    const float* vl = v.data() + (std::size_t(b) * H + H - 1) * hs;  // the last head's values
    std::fill(bias.begin(), bias.end(), 0.0), std::fill(tau.begin(), tau.end(), 0.0);
    if (rw)
      for (int i = 3; i < T; ++i)
        for (int j = 1; j <= i - 2; ++j) {
          double t = 0;
          for (int a = 0; a < dh; ++a)
            for (int z = 0; z < dh; ++z)
              t += bil ? double(vl[(i - 1) * dh + a]) * Bm[a * dh + z] * vl[j * dh + z]
                       : (a == z ? c * vl[(i - 1) * dh + a] * vl[j * dh + z] : 0.0);
          tau[i * T + j] = t;
          bias[i * T + j] = -cf::nn::softplus(t);
        }
    for (int h = 0; h < H; ++h) {
      const std::size_t bh = std::size_t(b) * H + h, o = bh * hs;
      cf::nn::detail::HeadSpec spec;
      spec.scale = scale;
      spec.sd = sd;
      spec.alibi_slope = slopes[h];
      spec.masks = mp;
      const auto qd = D(q.data() + o, hs), kd = D(k.data() + o, hs), vd = D(v.data() + o, hs),
                 dyd = D(dy.data() + o, hs), dmp = D(damp.data() + bh * T, T);
      std::vector<double> ddh(T, 0);
      cf::nn::detail::attention_head_forward<double>(spec, T, dh, qd.data(), kd.data(), vd.data(), dh, y0.data() + o,
                                                     dh, sd ? dmp.data() : nullptr, rw ? bias.data() : nullptr,
                                                     P.data(), nullptr, nullptr);
      cf::nn::detail::attention_head_backward<double>(spec, T, dh, qd.data(), kd.data(), vd.data(), dh, dq0.data() + o,
                                                      dk0.data() + o, dv0.data() + o, dyd.data(), dh, P.data(), nullptr,
                                                      dS.data(), sd ? ddh.data() : nullptr);
      for (int t = 0; t < T; ++t) dd0[bh * T + t] = ddh[t];
      if (!rw) continue;
      for (int i = 3; i < T; ++i)
        for (int j = 1; j <= i - 2; ++j) {
          const double dtau = -dS[i * T + j] * cf::nn::sigmoid(tau[i * T + j]);
          for (int a = 0; a < dh; ++a) {
            double bvj = 0, btv = 0;  // (B vl_j)_a and (B^T vl_{i-1})_a
            for (int z = 0; z < dh; ++z) {
              bvj += bil ? Bm[a * dh + z] * vl[j * dh + z] : 0.0;
              btv += bil ? Bm[z * dh + a] * vl[(i - 1) * dh + z] : 0.0;
            }
            dvs0[o + i * dh + a] += dtau * (bil ? bvj : c * vl[j * dh + a]);
            dvl0[o + j * dh + a] += dtau * (bil ? btv : c * vl[(i - 1) * dh + a]);
            if (bil)
              for (int z = 0; z < dh; ++z)
                dB0[bh * dh * dh + a * dh + z] += dtau * double(vl[(i - 1) * dh + a]) * vl[j * dh + z];
          }
        }
    }
  }

  const cf::gpu::AttentionShape s{B, H, T, dh, scale};
  cf::gpu::AttentionExtras x;
  if (sd) x.damp = damp.data();
  if (rw) {
    x.runway_v = v.data() + std::size_t(H - 1) * hs;
    x.runway_stride = std::int64_t(H) * hs;
    if (bil) x.runway_B = Bm.data();
  }
  for (auto sched : {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse}) {
    cf::gpu::emu::set_schedule(sched);
    std::vector<float> y1(n), lse(size_t(B) * H * tm.nb * T), obr(lse.size() * dh), dsum(lse.size());
    std::vector<float> dq1(n, 0), dk1(n, 0), dv1(n, 0), dd1(damp.size(), 0), dvs1(n, 0), dvl1(n, 0), dB1(dB0.size(), 0);
    cf::gpu::AttentionExtraGrads g;
    if (sd) g.ddamp = dd1.data();
    if (rw) g.dvs = dvs1.data(), g.dvl = dvl1.data(), g.dB = bil ? dB1.data() : nullptr;
    cf::gpu::emu::attention_forward_ex(s, tm, slopes.data(), x, q.data(), k.data(), v.data(), y1.data(), lse.data(),
                                       obr.data());
    cf::gpu::emu::attention_backward_ex(s, tm, slopes.data(), x, q.data(), k.data(), v.data(), dy.data(), lse.data(),
                                        obr.data(), dsum.data(), dq1.data(), dk1.data(), dv1.data(), g);
    INFO(cf::graph::pattern_name(kind) << (branch ? " branch" : " union") << " " << extra_name(extra)
                                       << (alibi ? " alibi" : "") << (rope ? " rope" : "") << " T=" << T << " dh=" << dh
                                       << " b=" << bb << " w=" << w);
    // float32 kernels against a double oracle: 1e-4 relative to 1 + |oracle| (sums of <= T
    // float products; the runway gradients sum over T^2 edges)
    CHECK(max_rel(y1, y0) < 1e-4);
    CHECK(max_rel(dq1, dq0) < 1e-4);
    CHECK(max_rel(dk1, dk0) < 1e-4);
    CHECK(max_rel(dv1, dv0) < 1e-4);
    if (sd) CHECK(max_rel(dd1, dd0) < 1e-4);
    if (rw) {
      CHECK(max_rel(dvs1, dvs0) < 1e-4);
      CHECK(max_rel(dvl1, dvl0) < 1e-4);
    }
    if (bil) CHECK(max_rel(dB1, dB0) < 1e-4);
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

}  // namespace

TEST_CASE("gpu tiled attention with S-D and runway (dot, bilinear) = dense attention, every mask family, ragged T",
          "[gpu][emu]") {
  using K = cf::graph::PatternKind;
  int variant = 0;
  for (K kind : {K::Full, K::Block, K::Swa, K::Bridge, K::Pbb, K::SeBridge})
    for (bool branch : {false, true}) {
      if (branch && (kind == K::Full || kind == K::Block || kind == K::Swa)) continue;
      for (Extra ex : {Extra::Sd, Extra::RunwayDot, Extra::RunwayBilinear}) {
        ++variant;  // ALiBi and RoPE alternate over the cases (every extra meets each)
        check_extras(kind, branch, ex, variant % 2 == 0, variant % 3 == 0, /*T=*/45, /*dh=*/8);
      }
    }
  // centered bridges with b < w <= 2b (overlapping write-back sets), both fusions
  for (K kind : {K::Bridge, K::Pbb, K::SeBridge})
    for (bool branch : {false, true})
      for (Extra ex : {Extra::Sd, Extra::RunwayDot, Extra::RunwayBilinear})
        check_extras(kind, branch, ex, ex != Extra::Sd, ex == Extra::RunwayDot, 45, 8, /*b=*/8, /*w=*/12);
  check_extras(K::Full, false, Extra::SdRunway, true, true, 50, 8);         // both at once
  check_extras(K::Swa, false, Extra::RunwayBilinear, true, false, 70, 40);  // dh in the 64 capacity
  check_extras(K::SeBridge, true, Extra::Sd, false, true, 37, 72);          // dh in the 128 capacity
  check_extras(K::Full, false, Extra::RunwayDot, false, false, 3, 4);       // no runway edge at all
  check_extras(K::Full, false, Extra::Sd, true, false, 1, 4);               // a single position
}

TEST_CASE("gpu tiled attention: a runway or S-D input without its gradient is refused", "[gpu]") {
  const int T = 8, dh = 4;
  const Masks m = make_masks(cf::graph::PatternKind::Full, false, T, 12, 10, 4);
  const auto tm = cf::gpu::tiled_mask_from_dense({m[0].data()}, T);
  std::vector<float> a(T * dh, 0.1f), l(T), o(T * dh), d(T);
  cf::gpu::AttentionExtras x;
  x.damp = d.data();
  REQUIRE_THROWS_WITH(cf::gpu::emu::attention_backward_ex({1, 1, T, dh, 0.5f}, tm, nullptr, x, a.data(), a.data(),
                                                          a.data(), a.data(), l.data(), o.data(), d.data(), o.data(),
                                                          o.data(), o.data(), cf::gpu::AttentionExtraGrads{}),
                      Catch::Contains("ddamp"));
}

TEST_CASE("gpu tiled attention: CF_GPU_ATTENTION other than its documented values is refused, naming it", "[gpu]") {
  const int T = 8, dh = 4;
  const Masks m = make_masks(cf::graph::PatternKind::Full, false, T, 12, 10, 4);
  const auto tm = cf::gpu::tiled_mask_from_dense({m[0].data()}, T);
  std::vector<float> a(T * dh, 0.1f), y(T * dh), l(T), o(T * dh);
  // the environment is read where a context is made from it (ContextOptions::from_environment)
  ::setenv("CF_GPU_ATTENTION", "fast", 1);
  REQUIRE_THROWS_WITH(cf::gpu::ContextOptions::from_environment(),
                      Catch::Contains("CF_GPU_ATTENTION must be one of flash, flash32, rounded, plain, generic, got 'fast'"));
  for (const auto path : {cf::gpu::AttentionPath::Flash32, cf::gpu::AttentionPath::Rounded}) {
    ::setenv("CF_GPU_ATTENTION", std::string(cf::gpu::kAttentionPaths.name(path)).c_str(), 1);
    CHECK(cf::gpu::ContextOptions::from_environment().attention == path);
  }
  ::unsetenv("CF_GPU_ATTENTION");
  cf::gpu::Context ctx(cf::gpu::ContextOptions::from_environment());
  cf::gpu::emu::attention_forward(ctx, {1, 1, T, dh, 0.5f}, tm, nullptr, a.data(), a.data(), a.data(), y.data(),
                                  l.data(), o.data());
  CHECK(std::abs(y[0] - 0.1f) < 1e-6f);  // row 0 attends to itself only: y_0 = v_0
}

TEST_CASE("gpu context: the default context is made once and the environment read once", "[gpu]") {
  ::setenv("CF_GPU_EMULATE", "2", 1);
  REQUIRE_THROWS_WITH(cf::gpu::ContextOptions::from_environment(), Catch::Contains("CF_GPU_EMULATE = '2'"));
  ::setenv("CF_GPU_EMULATE", "1", 1);
  ::setenv("CF_GPU_ATTENTION", "generic", 1);
  const cf::gpu::ContextOptions o = cf::gpu::ContextOptions::from_environment();
  CHECK(o.emulate);
  CHECK(o.attention == cf::gpu::AttentionPath::Generic);
  ::unsetenv("CF_GPU_EMULATE");
  ::unsetenv("CF_GPU_ATTENTION");
  cf::gpu::Context& d = cf::gpu::default_context();
  const cf::gpu::AttentionPath before = d.attention();
  CHECK(&cf::gpu::default_context() == &d);  // one object for the whole process
  ::setenv("CF_GPU_ATTENTION", before == cf::gpu::AttentionPath::Plain ? "generic" : "plain", 1);
  CHECK(cf::gpu::default_context().attention() == before);  // not read again
  ::unsetenv("CF_GPU_ATTENTION");
  CHECK_THROWS_WITH(cf::gpu::init_default_context(cf::gpu::ContextOptions{}), Catch::Contains("exists already"));
}
