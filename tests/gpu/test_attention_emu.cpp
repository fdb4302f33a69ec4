// Tiled attention kernels (cf/gpu/kernels/attention.cuh) executed on the CPU against the
// trainer's dense attention (cf::nn::detail::attention_head_forward / _backward, the oracle), for
// every mask family, both bridge fusions, with and without ALiBi, at ragged T (not a multiple of
// the tile or the block), under both intra-block schedules.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cf/gpu/attention.hpp"
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/graph/mask.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/ops.hpp"

namespace {

using Masks = std::vector<std::vector<std::uint8_t>>;

// Dense branch masks exactly as the trainer builds them (cf::nn::detail::layer_branches: union =
// one branch over all sources; branch fusion = the block branch plus the bridge branches of seed
// 002 Eq. 35, one softmax per bridge).
Masks make_masks(cf::graph::PatternKind kind, bool branch, int T, int b, int w, int e) {
  using K = cf::graph::PatternKind;
  cf::nn::LayerConfig lc;
  lc.attn = kind == K::Full     ? cf::nn::AttnKind::Full
            : kind == K::Block  ? cf::nn::AttnKind::Block
            : kind == K::Swa    ? cf::nn::AttnKind::Swa
            : kind == K::Bridge ? cf::nn::AttnKind::Bridge
            : kind == K::Pbb    ? cf::nn::AttnKind::Pbb
                                : cf::nn::AttnKind::SeBridge;
  lc.b = b, lc.w = w, lc.e = e;
  lc.fusion = branch ? cf::graph::Fusion::Branch : cf::graph::Fusion::Union;
  Masks out;
  for (const auto& br : cf::nn::detail::layer_branches(lc, T)) out.push_back(cf::nn::detail::dense_mask(br, T));
  return out;
}

std::vector<float> randn(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

void check_case(cf::graph::PatternKind kind, bool branch, bool alibi, int T, int dh, int bb = 12, int w = 10,
                int e = 4) {
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
    cf::gpu::emu::attention_forward(s, tm, slopes.data(), q.data(), k.data(), v.data(), y1.data(), lse.data(),
                                    obr.data());
    cf::gpu::emu::attention_backward(s, tm, slopes.data(), q.data(), k.data(), v.data(), dy.data(), lse.data(),
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
  for (K kind : {K::Full, K::Block, K::Swa, K::Bridge, K::Pbb, K::SeBridge})
    for (bool branch : {false, true})
      for (bool alibi : {false, true}) {
        if (branch && (kind == K::Full || kind == K::Block || kind == K::Swa)) continue;
        check_case(kind, branch, alibi, /*T=*/45, /*dh=*/8);
      }
  check_case(K::Full, false, true, 77, 40);      // dh between the 32 and 64 capacities
  check_case(K::SeBridge, true, false, 70, 72);  // dh in the 128 capacity
  check_case(K::Full, false, false, 1, 4);       // a single position
  // centered bridges with b < w <= 2b: overlapping write-back sets, two bridge branches (Eq. 35)
  check_case(K::Bridge, true, true, 45, 8, /*b=*/8, /*w=*/12);
  check_case(K::Pbb, true, false, 45, 8, /*b=*/8, /*w=*/12);
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
