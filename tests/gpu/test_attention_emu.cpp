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
#include "extras_cases.hpp"

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

using cf_test::Extra;

// S-D and runway heads in the general kernels (CF_GPU_ATTENTION=generic) and in the flash kernels
// (the default path) against the dense head of lib/nn run in double (cf_test::extras_oracle).
void check_extras(cf::graph::PatternKind kind, bool branch, Extra extra, bool alibi, bool rope, int T, int dh,
                  int bb = 12, int w = 10, int e = 4) {
  const cf_test::ExtrasProblem p = cf_test::make_extras_problem(kind, branch, extra, alibi, rope, T, dh, bb, w, e);
  const cf_test::ExtrasOracle o = cf_test::extras_oracle(p);
  using cf_test::max_rel;
  static cf::gpu::Context generic(cf::gpu::ContextOptions{cf::gpu::AttentionPath::Generic});
  static cf::gpu::Context flash(cf::gpu::ContextOptions{cf::gpu::AttentionPath::Flash});
  for (cf::gpu::Context* ctx : {&generic, &flash})
    for (auto sched : {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse}) {
      cf::gpu::emu::set_schedule(sched);
      const cf_test::ExtrasResult r = cf_test::run_extras(*ctx, p);
      INFO(cf::gpu::kAttentionPaths.name(ctx->attention())
           << " " << cf::graph::pattern_name(kind) << (branch ? " branch" : " union") << " "
           << cf_test::extra_name(extra) << (alibi ? " alibi" : "") << (rope ? " rope" : "") << " T=" << T
           << " dh=" << dh << " b=" << bb << " w=" << w);
      // float32 kernels against a double oracle: 1e-4 relative to 1 + |oracle| (sums of <= T
      // float products; the runway gradients sum over T^2 edges)
      CHECK(max_rel(r.y, o.y) < 1e-4);
      CHECK(max_rel(r.dq, o.dq) < 1e-4);
      CHECK(max_rel(r.dk, o.dk) < 1e-4);
      CHECK(max_rel(r.dv, o.dv) < 1e-4);
      if (p.sd) CHECK(max_rel(r.dd, o.dd) < 1e-4);
      if (p.rw) {
        CHECK(max_rel(r.dvs, o.dvs) < 1e-4);
        CHECK(max_rel(r.dvl, o.dvl) < 1e-4);
      }
      if (p.bil) CHECK(max_rel(r.dB, o.dB) < 1e-4);
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
  REQUIRE_THROWS_WITH(
      cf::gpu::ContextOptions::from_environment(),
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
