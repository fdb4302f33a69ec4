#pragma once
// Shared by the seeded backward's tests (tests/gpu/test_seeded_emu.cpp: the device trainer's
// emulated build on the CPU; test_gpu_train_device.cpp: its CUDA build on a device): the configs,
// a fixed output seed, and the comparison of DeviceTrainer::seeded with cf::nn::forward_backward
// under the same cf::nn::GradientSeed (docs/gpu.md "Seeded backward").
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cf/gpu/train_step.hpp"
#include "cf/gpu/trainer.hpp"
#include "cf/nn/model.hpp"
#include "train_cases.hpp"

namespace cf_test_gpu {

using namespace cf::nn;

// Plain, variant and attention-unit models (train_cases.hpp) covering every kind of block the
// seeded backward crosses: mask families and fusions, no norm, untied head, RMSNorm + SwiGLU,
// parallel residual, embedding norm, S-D, runway dot and bilinear with partial RoPE, linear
// attention with GQA, a Llama-like block.
inline std::vector<Case> seeded_cases() {
  const std::vector<Case> all = cases();
  std::vector<Case> v;
  for (const Case& c : all)
    for (const char* want :
         {"full+swa, learned positions", "block+bridge(branch), ALiBi", "pbb+se-bridge(union)", "Llama-like: RMSNorm",
          "NeoX-like", "BLOOM-like", "swa + S-D", "runway bilinear + runway dot", "swa + linear", "Llama-like block"})
      if (c.label.rfind(want, 0) == 0) v.push_back(c);
  REQUIRE(v.size() == 10);
  return v;
}

// A fixed output seed, a function of the probabilities only (so both sides compute it from their
// own): d objective / d logits[r, v] = u[r, v] p[r, v] - (v == r mod V) p[r, v], u in [-1, 1].
struct OutputSeed {
  std::vector<float> u;
  OutputSeed(int N, int V) : u(static_cast<std::size_t>(N) * V) {
    std::mt19937 g(3);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (float& x : u) x = d(g);
  }
  void operator()(float* p, int N, int V) const {
    for (int r = 0; r < N; ++r)
      for (int v = 0; v < V; ++v) {
        float& x = p[static_cast<std::size_t>(r) * V + v];
        x = u[static_cast<std::size_t>(r) * V + v] * x - (v == r % V ? x : 0.f);
      }
  }
};

inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// One seed on both sides: the value, the read-out and the partial parameter gradient agree to
// `tol` of each tensor's largest entry (float32 on both sides, summed in other orders).
template <class Trainer>
void check_seed(const Model<float>& model, Trainer& tr, const std::vector<std::int32_t>& x,
                const std::vector<std::int32_t>& y, int B, int T, GradientSeed<float> seed, double tol) {
  const int N = B * T, C = model.config.d_model;
  std::vector<float> d0, g0(model.params.size(), 0.f), d1(static_cast<std::size_t>(N) * C), g1(g0.size());
  seed.dresid = &d0;
  Workspace<float> ws;
  const float v0 = forward_backward<float>(model, x.data(), y.data(), B, T, &g0, ws, nullptr, nullptr, &seed);
  cf::gpu::TrainerSeed s;
  s.on_probs = seed.on_probs, s.resid_layer = seed.resid_layer, s.resid = seed.resid, s.out_layer = seed.out_layer;
  s.dresid = d1.data();
  tr.reshape(cf::gpu::make_train_plan(model.config, B, T));
  const double v1 = tr.seeded(x.data(), y.data(), s);
  tr.gradient(g1.data());
  INFO("B " << B << ", T " << T << ", resid_layer " << seed.resid_layer << ", out_layer " << seed.out_layer);
  REQUIRE(d0.size() == d1.size());
  const double rd = rel_diff(d1.data(), d0.data(), static_cast<std::int64_t>(d0.size()));
  CHECK(rd < tol);
  CHECK(std::abs(v1 - v0) <= tol * std::max(1.0, std::abs(double(v0))));
  check_tensors(model.layout, g1, g0, tol, "partial parameter gradient");
  if (std::getenv("CF_TEST_VERBOSE")) WARN("read-out: relative difference " << rd);
}

// Every seed of the test on one analysis trainer `Trainer` (cf::gpu::emu::Trainer or
// cuda::Trainer), allocated at 3 x 45 and reshaped to 2 x 45 and 1 x 20: output seeds read out at
// h(0), h(1) and h(n_layer), residual seeds (n_layer, 0), (n_layer, n_layer - 1), (1, 0); one of
// each kind at the second shape.
template <class Trainer>
void check_all_seeds(const Case& cs, double tol) {
  INFO(cs.label);
  const Model<float> model = init_model<float>(cs.cfg, 17);
  const int L = cs.cfg.n_layer, V = cs.cfg.vocab_size, C = cs.cfg.d_model;
  Trainer tr(cf::gpu::default_context(), cf::gpu::make_train_plan(cs.cfg, 3, 45), cf::gpu::TrainerUse::Analysis);
  tr.upload(model.params.data(), nullptr, nullptr);
  for (const auto& [B, T] : {std::pair{2, 45}, std::pair{1, 20}}) {
    const bool all = T == 45;
    std::vector<std::int32_t> x, y;
    batch(cs.cfg, B, T, 11 + T, x, y);
    const OutputSeed os(B * T, V);
    for (int out : {0, 1, L}) {
      if (!all && out != 1) continue;
      GradientSeed<float> s;
      s.on_probs = os;
      s.out_layer = out;
      check_seed(model, tr, x, y, B, T, s, tol);
    }
    const std::vector<float> r = random_vector(static_cast<std::size_t>(B) * T * C, 5);
    for (const auto& [top, out] : {std::pair{L, 0}, std::pair{L, L - 1}, std::pair{1, 0}}) {
      if (!all && top != 1) continue;
      GradientSeed<float> s;
      s.resid_layer = top;
      s.resid = r.data();
      s.out_layer = out;
      check_seed(model, tr, x, y, B, T, s, tol);
    }
  }
}

}  // namespace cf_test_gpu
