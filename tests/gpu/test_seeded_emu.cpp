// The device trainer's seeded backward (DeviceTrainer::seeded, issue 30) executed on the CPU
// through its emulated build against cf::nn::forward_backward with the same cf::nn::GradientSeed,
// the oracle (whose backward has its own finite-difference tests in double, tests/nn): the output
// seed (d objective / d logits from the probabilities) and the residual seed, read out at several
// layers, on plain, variant and attention-unit models (runway, S-D, linear, GQA, RoPE), one trainer
// reshaped between batch shapes, built for training (the partial parameter gradient compared too)
// and for analysis (none computed: no weight-gradient GEMM, counted); influence's top-prediction
// seed on the device against its host on_probs form; then influence and Jacobian blocks
// (lib/influence) on the device pass (cf::gpu::device_seeded_pass) against the same analyses on the
// CPU, and the refusals.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/device_stats.hpp"
#include "cf/gpu/seeded_pass.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/gpu/trainer.hpp"
#include "cf/influence/influence.hpp"
#include "cf/influence/jacobian.hpp"
#include "cf/nn/model.hpp"
#include "seeded_cases.hpp"

using namespace cf::nn;
using namespace cf_test_gpu;

TEST_CASE("gpu device trainer (emulated) seeded backward = cf::nn forward_backward with the same GradientSeed",
          "[gpu][emu][seeded]") {
  // float32 on both sides, summed in other orders: 1e-5 of each tensor's scale. A training trainer:
  // the partial parameter gradient too
  for (const Case& cs : seeded_cases()) check_all_seeds<cf::gpu::emu::Trainer>(cs, 1e-5, cf::gpu::TrainerUse::Training);
}

TEST_CASE("gpu device trainer (emulated) analysis seeded backward = cf::nn forward_backward, no parameter gradient",
          "[gpu][emu][seeded]") {
  // the tools' trainer: the input-gradient chain alone, to the same tolerance
  for (const Case& cs : seeded_cases()) check_all_seeds<cf::gpu::emu::Trainer>(cs, 1e-5, cf::gpu::TrainerUse::Analysis);
}

TEST_CASE("gpu device trainer (emulated) top-prediction seed on the device = the host on_probs form",
          "[gpu][emu][seeded]") {
  // the same logits on both sides of the first comparison: 1e-6 (float32 round-off of the formula)
  for (const Case& cs : seeded_cases())
    if (cs.label.rfind("full+swa", 0) == 0 || cs.label.rfind("swa + S-D", 0) == 0 || cs.label.rfind("runway", 0) == 0 ||
        cs.label.rfind("Llama-like block", 0) == 0)
      check_top_seed<cf::gpu::emu::Trainer>(cs, 1e-6, 1e-5);
}

namespace {
// The device trainer's GEMMs (cf::gpu::DeviceStats::gemms) in one call of f.
template <class F>
std::uint64_t gemms_in(F&& f) {
  const std::uint64_t before = cf::gpu::device_stats(cf::gpu::Backend::Emulated).gemms;
  f();
  return cf::gpu::device_stats(cf::gpu::Backend::Emulated).gemms - before;
}
}  // namespace

TEST_CASE("gpu device trainer (emulated) analysis seeded pass runs no weight-gradient GEMM", "[gpu][emu][seeded]") {
  // Two blocks of qkv, c_proj, c_fc, c_proj (4 linear layers each) and the LM head: 4 L + 1 = 9
  // linear layers, each one GEMM forward, one for the input gradient (d in = d out W) and, for
  // training, one for the weight gradient (dW = d out^T in). A residual seed at h(L) runs the 8 of
  // the blocks; an output seed read out at h(L) back-propagates the head alone.
  const ModelConfig c = small("full,swa", PosKind::Learned, NormKind::LayerNorm);
  REQUIRE(c.n_layer == 2);
  const Model<float> model = init_model<float>(c, 3);
  const int B = 2, T = 10;
  std::vector<std::int32_t> x, y;
  batch(c, B, T, 4, x, y);
  std::vector<float> r(static_cast<std::size_t>(B) * T * c.d_model, 0.5f), d(r.size());
  const OutputSeed os(B * T, c.vocab_size);
  auto run = [&](cf::gpu::TrainerUse use, int resid_layer, int out_layer) {
    cf::gpu::emu::Trainer tr(cf::gpu::default_context(), cf::gpu::make_train_plan(c, B, T), use);
    tr.upload(model.params.data(), nullptr, nullptr);
    cf::gpu::TrainerSeed s;
    if (resid_layer < 0) s.on_probs = os;
    s.resid_layer = resid_layer, s.resid = r.data(), s.out_layer = out_layer, s.dresid = d.data();
    return gemms_in([&] { tr.seeded(x.data(), y.data(), s); });
  };
  using cf::gpu::TrainerUse;
  CHECK(run(TrainerUse::Analysis, -1, 0) == 9 + 9);
  CHECK(run(TrainerUse::Training, -1, 0) == 9 + 9 + 9);
  CHECK(run(TrainerUse::Analysis, 2, 0) == 8 + 8);
  CHECK(run(TrainerUse::Training, 2, 0) == 8 + 8 + 8);
  CHECK(run(TrainerUse::Analysis, -1, 2) == 9 + 1);
  CHECK(run(TrainerUse::Training, -1, 2) == 9 + 1 + 1);
  // a training step computes every weight gradient
  cf::gpu::emu::Trainer tr(cf::gpu::default_context(), cf::gpu::make_train_plan(c, B, T));
  tr.upload(model.params.data(), nullptr, nullptr);
  CHECK(gemms_in([&] { tr.micro_batch(x.data(), y.data()); }) == 9 + 9 + 9);
}

TEST_CASE("gpu device seeded pass (emulated): influence and Jacobian blocks = the CPU's", "[gpu][emu][seeded]") {
  using namespace cf::influence;
  for (const Case& cs : seeded_cases()) {
    if (cs.label.rfind("full+swa", 0) != 0 && cs.label.rfind("runway", 0) != 0 && cs.label.rfind("swa + S-D", 0) != 0)
      continue;
    INFO(cs.label);
    const Model<float> model = init_model<float>(cs.cfg, 23);
    const cf::nn::SeededPass<float> dev = cf::gpu::device_seeded_pass(cf::gpu::Placement::Emulated, model);
    std::vector<std::vector<std::int32_t>> windows(3);
    std::mt19937 g(8);
    for (auto& w : windows)
      for (int j = 0; j < 12; ++j) w.push_back(static_cast<std::int32_t>(g() % cs.cfg.vocab_size));
    for (Target t : {Target::Probability, Target::LogProbability, Target::Logit}) {
      const InfluenceGradients cpu = influence_gradients(model, windows, t, true);
      const InfluenceGradients gpu = influence_gradients(model, windows, t, true, dev);
      CHECK(gpu.yhat == cpu.yhat);
      CHECK((gpu.p_yhat - cpu.p_yhat).cwiseAbs().maxCoeff() < 1e-6);
      for (std::size_t w = 0; w < windows.size(); ++w)  // d target / d e_j, to float32 round-off of its scale
        CHECK((gpu.de[w] - cpu.de[w]).cwiseAbs().maxCoeff() < 1e-5 * cpu.de[w].cwiseAbs().maxCoeff());
    }
    const InfluenceResult m0 = measure_influence(model, windows, Target::Probability, 2);
    const InfluenceResult m1 = measure_influence(model, windows, Target::Probability, 2, dev);
    CHECK((m1.profile - m0.profile).cwiseAbs().maxCoeff() < 1e-5 * m0.profile.maxCoeff());
    // Jacobian blocks: prefixes of every length through one trainer (reshaped), seeds in chunks of
    // 10 and 6 (d_model 16 or 24)
    const std::vector<std::int32_t> w(windows[0].begin(), windows[0].begin() + 6);
    for (const auto& [L0, r] : {std::pair{0, 2}, std::pair{1, 1}}) {
      const JacobianBlocks j0 = jacobian_blocks(model, w, L0, r, true, 10);
      const JacobianBlocks j1 = jacobian_blocks(model, w, L0, r, true, 10, nullptr, dev);
      INFO("L " << L0 << ", r " << r);
      CHECK(j1.backward_calls == j0.backward_calls);
      double scale = 0, diff = 0;
      for (std::size_t k = 0; k < j0.blocks.size(); ++k) {
        REQUIRE(j1.blocks[k].size() == j0.blocks[k].size());
        if (j0.blocks[k].size() == 0) continue;
        scale = std::max(scale, j0.blocks[k].cwiseAbs().maxCoeff());
        diff = std::max(diff, (j1.blocks[k] - j0.blocks[k]).cwiseAbs().maxCoeff());
      }
      CHECK(scale > 0.1);  // h(L+r) contains h(L): the diagonal blocks hold the identity
      CHECK(diff < 1e-5 * scale);
      CHECK((j1.frobenius - j0.frobenius).cwiseAbs().maxCoeff() < 1e-5 * j0.frobenius.maxCoeff());
      CHECK((j1.spectral - j0.spectral).cwiseAbs().maxCoeff() < 1e-5 * j0.spectral.maxCoeff());
    }
  }
}

TEST_CASE("gpu device seeded pass refuses what the device trainer does not run, and bad seeds", "[gpu][seeded]") {
  using cf::gpu::Placement;
  ModelConfig wide = small("full,full", PosKind::Learned, NormKind::LayerNorm, 160, 1);  // head dimension 160
  REQUIRE_THROWS_WITH(cf::gpu::placement_for_seeded(Placement::Emulated, "cuda", "influence", wide),
                      Catch::Contains("--device cuda: the device trainer does not support head dimension 160 > 128"));
  CHECK(cf::gpu::placement_for_seeded(Placement::Cuda, "auto", "influence", wide) == Placement::Cpu);
  CHECK(cf::gpu::placement_for_seeded(Placement::Cpu, "cpu", "influence", wide) == Placement::Cpu);
  const Model<float> big = init_model<float>(wide, 1);
  REQUIRE_THROWS_WITH(cf::gpu::device_seeded_pass(Placement::Emulated, big), Catch::Contains("head dimension 160"));

  const ModelConfig c = small("full,swa", PosKind::Learned, NormKind::LayerNorm);
  const Model<float> model = init_model<float>(c, 2);
  REQUIRE_THROWS_WITH(cf::gpu::device_seeded_pass(Placement::Cpu, model), Catch::Contains("device placement"));
  cf::gpu::emu::Trainer tr(cf::gpu::default_context(), cf::gpu::make_train_plan(c, 1, 8),
                           cf::gpu::TrainerUse::Analysis);
  tr.upload(model.params.data(), nullptr, nullptr);
  std::vector<float> m(model.params.size(), 0.f);
  CHECK_THROWS_WITH(tr.upload(model.params.data(), m.data(), m.data()), Catch::Contains("no AdamW moments"));
  CHECK_THROWS_WITH(tr.apply(cf::gpu::AdamWUpdate{}, 0.f), Catch::Contains("no AdamW update"));
  CHECK_THROWS_WITH(tr.gradient(m.data()), Catch::Contains("no parameter gradient"));
  CHECK_THROWS_WITH(tr.clip(1, 1.0), Catch::Contains("no parameter gradient"));
  CHECK(tr.finite());
  CHECK_FALSE(tr.fits(cf::gpu::make_train_plan(c, 2, 8)));
  CHECK_THROWS_WITH(tr.reshape(cf::gpu::make_train_plan(c, 1, 9)), Catch::Contains("does not fit"));
  std::vector<std::int32_t> x(8, 1), y(8, -1);
  std::vector<float> r(8 * c.d_model, 1.f);
  cf::gpu::TrainerSeed s;
  CHECK_THROWS_WITH(tr.seeded(x.data(), y.data(), s), Catch::Contains("neither on_probs nor a residual seed"));
  CHECK_THROWS_WITH(tr.micro_batch(x.data(), y.data()), Catch::Contains("no parameter gradient"));
  const TopSeed<float> top;
  s.top = &top;
  s.on_probs = [](float*, int, int) {};
  CHECK_THROWS_WITH(tr.seeded(x.data(), y.data(), s), Catch::Contains("both on_probs and a top-prediction seed"));
  s.on_probs = nullptr, s.top = nullptr;
  s.resid = r.data();
  s.resid_layer = 3;
  CHECK_THROWS_WITH(tr.seeded(x.data(), y.data(), s), Catch::Contains("must lie in [1, n_layer = 2]"));
  s.resid_layer = 1;
  s.out_layer = 1;
  CHECK_THROWS_WITH(tr.seeded(x.data(), y.data(), s), Catch::Contains("out_layer = 1 outside [0, 0]"));
  // a model whose weights overflow float32 (no norm to rescale the stream): refused, not NaNs
  const ModelConfig bare = small("full,swa", PosKind::Learned, NormKind::None);
  Model<float> huge = init_model<float>(bare, 2);
  for (float& w : huge.params) w *= 1e30f;
  const cf::nn::SeededPass<float> dev = cf::gpu::device_seeded_pass(Placement::Emulated, huge);
  CHECK_THROWS_AS(
      cf::influence::influence_gradients(huge, {{1, 2, 3, 4}}, cf::influence::Target::Probability, false, dev),
      cf::InvalidArgument);
}
