#pragma once
// Inputs of the attention kernel tests (test_attention_emu.cpp, test_flash_attention_emu.cpp):
// the dense branch masks the trainer builds, seeded normal tensors, the largest difference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cf/graph/mask.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_masks.hpp"

namespace cf_test {

using Masks = std::vector<std::vector<std::uint8_t>>;

// Dense branch masks exactly as the trainer builds them (cf::nn::detail::layer_branches: union =
// one branch over all sources; branch fusion = the block branch plus the bridge branches of
// Boundary repair (Yang) Eq. 35, one softmax per bridge).
inline Masks make_masks(cf::graph::PatternKind kind, bool branch, int T, int b, int w, int e) {
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

inline std::vector<float> randn(std::size_t n, std::uint32_t seed, float sd = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

// The dense head of lib/nn (float), per (b, h): y, dq, dk, dv of a test's Result from its Problem
// (B, H, T, dh, scale, slopes, masks, mp, q, k, v, dy, n()).
template <class Result, class Problem>
Result dense_oracle(const Problem& p) {
  Result r;
  r.y.resize(p.n()), r.dq.assign(p.n(), 0.0f), r.dk.assign(p.n(), 0.0f), r.dv.assign(p.n(), 0.0f);
  std::vector<float> P(p.masks.size() * std::size_t(p.T) * p.T);
  for (int bh = 0; bh < p.B * p.H; ++bh) {
    cf::nn::detail::HeadSpec spec;
    spec.scale = p.scale;
    spec.alibi_slope = p.slopes[bh % p.H];
    spec.masks = p.mp;
    const std::size_t o = std::size_t(bh) * p.T * p.dh;
    cf::nn::detail::attention_head_forward<float>(spec, p.T, p.dh, p.q.data() + o, p.k.data() + o, p.v.data() + o, p.dh,
                                                  r.y.data() + o, p.dh, nullptr, nullptr, P.data(), nullptr, nullptr);
    cf::nn::detail::attention_head_backward<float>(spec, p.T, p.dh, p.q.data() + o, p.k.data() + o, p.v.data() + o,
                                                   p.dh, r.dq.data() + o, r.dk.data() + o, r.dv.data() + o,
                                                   p.dy.data() + o, p.dh, P.data(), nullptr, nullptr, nullptr);
  }
  return r;
}

}  // namespace cf_test
