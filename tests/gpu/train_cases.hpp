#pragma once
// Shared by the device trainer's tests (tests/gpu/test_train_step_emu.cpp: the emulated build on
// the CPU; test_gpu_train_device.cpp: the CUDA build on a device): small models at ragged T (45:
// not a multiple of the 32-row tile), every mask family of the attention kernels, both bridge
// fusions, learned / ALiBi / no positions, LayerNorm or none, biases on and off, tied and untied
// heads; seeded batches; tensor-by-tensor comparison in the model's parameter layout.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cf/nn/model.hpp"

namespace cf_test_gpu {

using namespace cf::nn;

inline ModelConfig small(const std::string& schedule, PosKind pos, NormKind norm, int C = 16, int H = 2, int L = 2) {
  ModelConfig c;
  c.vocab_size = 29;
  c.block_size = 64;
  c.n_layer = L;
  c.n_head = H;
  c.d_model = C;
  c.pos = pos;
  c.norm = norm;
  LayerConfig p;
  p.b = 12, p.w = 10, p.e = 4;  // several blocks and bridges inside T = 45
  c.layers = parse_schedule(schedule, L, p);
  return c;
}

// A case: a config and a label; the batch is B = 2 sequences of T = 45 with a few targets masked.
struct Case {
  std::string label;
  ModelConfig cfg;
};

inline std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"full+swa, learned positions, LayerNorm", small("full,swa", PosKind::Learned, NormKind::LayerNorm)});
  ModelConfig a = small("block,bridge", PosKind::Alibi, NormKind::LayerNorm);  // bridge: fusion branch (default)
  v.push_back({"block+bridge(branch), ALiBi", a});
  ModelConfig u = small("pbb,se-bridge", PosKind::None, NormKind::None, 24, 3);
  for (auto& l : u.layers) l.fusion = cf::graph::Fusion::Union;
  u.bias = false;
  u.proj_bias = false;
  u.arch.tied_head = false;
  u.arch.d_ff = 40;
  v.push_back({"pbb+se-bridge(union), no positions, no norm, no qkv/proj bias, untied head, d_ff 40", u});
  ModelConfig s = small("se-bridge,pbb,bridge", PosKind::Learned, NormKind::LayerNorm, 16, 2, 3);
  s.layers[2].fusion = cf::graph::Fusion::Union;
  s.layers[0].d_head = 12;  // H d_head = 24 != d_model
  s.arch.mlp_bias = false;
  v.push_back({"se-bridge(branch)+pbb(branch)+bridge(union), d_head 12, no MLP bias", s});
  // centered bridges with b < w <= 2b: two bridge branches (seed 002 Eq. 35)
  ModelConfig o = small("bridge,pbb", PosKind::Alibi, NormKind::LayerNorm);
  for (auto& l : o.layers) l.b = 8, l.w = 12;
  v.push_back({"bridge+pbb with overlapping write-back sets (b 8, w 12), ALiBi", o});
  return v;
}

inline void batch(const ModelConfig& c, int B, int T, std::uint32_t seed, std::vector<std::int32_t>& x,
                  std::vector<std::int32_t>& y) {
  std::mt19937 g(seed);
  x.resize(static_cast<std::size_t>(B) * T);
  y.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<std::int32_t>(g() % c.vocab_size);
    y[i] = i % 7 == 3 ? -1 : static_cast<std::int32_t>(g() % c.vocab_size);  // some targets not counted
  }
}

// max |a - b| over a tensor, relative to the largest |b| in it (plus a floor for tiny tensors).
inline double rel_diff(const float* a, const float* b, std::int64_t n) {
  double d = 0, m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    m = std::max(m, std::abs(double(b[i])));
  }
  return d / std::max(m, 1e-3);
}

// Every tensor of two flat arrays in the model's layout agrees to `tol` (rel_diff).
inline void check_tensors(const ParamLayout& lay, const std::vector<float>& got, const std::vector<float>& want,
                          double tol, const std::string& what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (const auto& t : lay.tensors) {
    INFO(what << " " << t.name);
    const double r = rel_diff(got.data() + t.offset, want.data() + t.offset, t.size);
    worst = std::max(worst, r);
    CHECK(r < tol);
  }
  if (std::getenv("CF_TEST_VERBOSE")) WARN(what << ": worst relative difference " << worst);
}

}  // namespace cf_test_gpu
