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

// One seed on both sides: the value and the read-out agree to `tol` of each tensor's largest entry
// (float32 on both sides, summed in other orders), and so does the partial parameter gradient of a
// training trainer; an analysis trainer computes none.
template <class Trainer>
void check_seed(const Model<float>& model, Trainer& tr, cf::gpu::TrainerUse use, const std::vector<std::int32_t>& x,
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
  INFO("B " << B << ", T " << T << ", resid_layer " << seed.resid_layer << ", out_layer " << seed.out_layer);
  REQUIRE(d0.size() == d1.size());
  const double rd = rel_diff(d1.data(), d0.data(), static_cast<std::int64_t>(d0.size()));
  CHECK(rd < tol);
  CHECK(std::abs(v1 - v0) <= tol * std::max(1.0, std::abs(double(v0))));
  if (use == cf::gpu::TrainerUse::Training) {
    tr.gradient(g1.data());
    check_tensors(model.layout, g1, g0, tol, "partial parameter gradient");
  } else {
    CHECK_THROWS_WITH(tr.gradient(g1.data()), Catch::Contains("no parameter gradient"));
  }
  if (std::getenv("CF_TEST_VERBOSE")) WARN("read-out: relative difference " << rd);
}

// Every seed of the test on one trainer `Trainer` (cf::gpu::emu::Trainer or cuda::Trainer) built
// for `use` (analysis: the tools' trainer, no parameter gradient; training: the partial parameter
// gradient compared too), allocated at 3 x 45 and reshaped to 2 x 45 and 1 x 20: output seeds read
// out at h(0), h(1) and h(n_layer), residual seeds (n_layer, 0), (n_layer, n_layer - 1), (1, 0);
// one of each kind at the second shape.
template <class Trainer>
void check_all_seeds(const Case& cs, double tol, cf::gpu::TrainerUse use) {
  INFO(cs.label << (use == cf::gpu::TrainerUse::Analysis ? ", analysis trainer" : ", training trainer"));
  const Model<float> model = init_model<float>(cs.cfg, 17);
  const int L = cs.cfg.n_layer, V = cs.cfg.vocab_size, C = cs.cfg.d_model;
  Trainer tr(cf::gpu::default_context(), cf::gpu::make_train_plan(cs.cfg, 3, 45), use);
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
      check_seed(model, tr, use, x, y, B, T, s, tol);
    }
    const std::vector<float> r = random_vector(static_cast<std::size_t>(B) * T * C, 5);
    for (const auto& [top, out] : {std::pair{L, 0}, std::pair{L, L - 1}, std::pair{1, 0}}) {
      if (!all && top != 1) continue;
      GradientSeed<float> s;
      s.resid_layer = top;
      s.resid = r.data();
      s.out_layer = out;
      check_seed(model, tr, use, x, y, B, T, s, tol);
    }
  }
}

// The top-prediction objective of influence (Position bias (Herasimchyk et al.) Eq. 6) written
// here from its definition as a host on_probs callback, independently of cf::nn::apply_top_seed and
// of the device's functors: at each sequence's last position, yhat = the first argmax of p, and
// d f / d logits = p_yhat (e_yhat - p) (probability), e_yhat - p (log-probability), e_yhat (logit);
// zero at the other positions. Records yhat and p(yhat) per sequence.
struct HostTopSeed {
  TopObjective objective;
  int T;
  std::vector<std::int32_t>* yhat;
  std::vector<float>* p_yhat;
  void operator()(float* probs, int N, int V) const {
    yhat->clear(), p_yhat->clear();
    for (int r = 0; r < N; ++r) {
      float* p = probs + static_cast<std::size_t>(r) * V;
      if (r % T != T - 1) {
        std::fill(p, p + V, 0.f);
        continue;
      }
      const int y = static_cast<int>(std::max_element(p, p + V) - p);  // the first of equal maxima
      const float py = p[y];
      yhat->push_back(y), p_yhat->push_back(py);
      for (int v = 0; v < V; ++v) {
        const float e = v == y ? 1.f : 0.f;
        p[v] = objective == TopObjective::Probability      ? py * (e - p[v])
               : objective == TopObjective::LogProbability ? e - p[v]
                                                           : e;
      }
    }
  }
};

// The top-prediction seed (cf::nn::TopSeed) evaluated on the device against the host on_probs form
// of the same objective (HostTopSeed, its probabilities copied to the host and back) on one analysis
// trainer: the same predictions and probabilities, value and read-out d objective / d h(0) to
// `same` (the same logits and arithmetic: float32 round-off at most); and cf::nn::forward_backward
// with the TopSeed (the CPU's form) against its own host form and against the device to `tol`.
template <class Trainer>
void check_top_seed(const Case& cs, double same, double tol) {
  INFO(cs.label);
  const Model<float> model = init_model<float>(cs.cfg, 29);
  const int B = 3, T = 12, C = cs.cfg.d_model;
  std::vector<std::int32_t> x, y;
  batch(cs.cfg, B, T, 7, x, y);
  Trainer tr(cf::gpu::default_context(), cf::gpu::make_train_plan(cs.cfg, B, T), cf::gpu::TrainerUse::Analysis);
  tr.upload(model.params.data(), nullptr, nullptr);
  const std::size_t NC = static_cast<std::size_t>(B) * T * C;
  for (TopObjective obj : {TopObjective::Probability, TopObjective::LogProbability, TopObjective::Logit}) {
    INFO("objective " << static_cast<int>(obj));
    std::vector<std::int32_t> yh_host, yh_dev, yh_cpu, yh_cpu_host;
    std::vector<float> py_host, py_dev, py_cpu, py_cpu_host, d_host(NC), d_dev(NC), d_cpu, d_cpu_host;
    cf::gpu::TrainerSeed h;
    h.on_probs = HostTopSeed{obj, T, &yh_host, &py_host};
    h.dresid = d_host.data();
    const double v_host = tr.seeded(x.data(), y.data(), h);
    const TopSeed<float> top{obj, &yh_dev, &py_dev};
    cf::gpu::TrainerSeed d;
    d.top = &top;
    d.dresid = d_dev.data();
    const double v_dev = tr.seeded(x.data(), y.data(), d);
    REQUIRE(yh_host.size() == static_cast<std::size_t>(B));
    CHECK(yh_dev == yh_host);
    CHECK(py_dev == py_host);  // the same probability read on both sides
    CHECK(v_dev == v_host);    // the loss of the same forward pass
    CHECK(rel_diff(d_dev.data(), d_host.data(), static_cast<std::int64_t>(NC)) <= same);

    std::vector<float> g(model.params.size(), 0.f);
    Workspace<float> ws;
    GradientSeed<float> cpu, cpu_host;
    cpu.top = TopSeed<float>{obj, &yh_cpu, &py_cpu};
    cpu.dresid = &d_cpu;
    cpu_host.on_probs = HostTopSeed{obj, T, &yh_cpu_host, &py_cpu_host};
    cpu_host.dresid = &d_cpu_host;
    forward_backward<float>(model, x.data(), y.data(), B, T, &g, ws, nullptr, nullptr, &cpu);
    forward_backward<float>(model, x.data(), y.data(), B, T, &g, ws, nullptr, nullptr, &cpu_host);
    CHECK(yh_cpu == yh_cpu_host);
    CHECK(py_cpu == py_cpu_host);
    REQUIRE(d_cpu.size() == NC);
    CHECK(rel_diff(d_cpu.data(), d_cpu_host.data(), static_cast<std::int64_t>(NC)) <= same);
    CHECK(yh_dev == yh_cpu);
    for (int b = 0; b < B; ++b) CHECK(std::abs(py_dev[b] - py_cpu[b]) <= tol);
    CHECK(rel_diff(d_dev.data(), d_cpu.data(), static_cast<std::int64_t>(NC)) < tol);
  }
}

}  // namespace cf_test_gpu
