// The device trainer's linear layers with fused GEMM epilogues (issue 31; docs/gpu.md "GEMM
// epilogues") on the emulated build: the fused path (cuBLASLt's twin, emu::gemm_epilogue) and the
// fallback the CUDA build takes where cuBLASLt has no algorithm for a shape (the plain GEMM and the
// epilogue functors, reached here through ContextOptions::fused_epilogues = false) give the same
// loss and the same gradients bit for bit, under every precision policy, for tanh GELU (fused),
// erf GELU and SwiGLU (bias epilogue only) models, over two accumulated micro-batches. Agreement
// with the CPU trainer is checked by test_train_step_emu.cpp and test_precision_emu.cpp, which run
// the fused path.
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "cf/gpu/context.hpp"
#include "cf/gpu/precision.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/gpu/trainer.hpp"
#include "precision_cases.hpp"

namespace {

using namespace cf_test_gpu;
using cf::gpu::Precision;

// Losses of two micro-batches and the accumulated gradient of the emulated trainer on `ctx`.
std::vector<float> run(cf::gpu::Context& ctx, const Case& cs, Precision p, std::vector<double>& losses) {
  const int B = 2, T = 45;
  const cf::nn::Model<float> model = cf::nn::init_model<float>(cs.cfg, 7);
  cf::gpu::TrainPlan plan = cf::gpu::make_train_plan(cs.cfg, B, T);
  plan.precision = p;
  cf::gpu::emu::Trainer tr(ctx, std::move(plan));
  tr.upload(model.params.data(), nullptr, nullptr);
  tr.zero_grad();
  for (std::uint32_t seed : {11u, 12u}) {
    std::vector<std::int32_t> x, y;
    batch(cs.cfg, B, T, seed, x, y);
    losses.push_back(tr.micro_batch(x.data(), y.data()));
  }
  std::vector<float> g(model.params.size());
  tr.gradient(g.data());
  return g;
}

}  // namespace

TEST_CASE("gpu device trainer (emulated): fused GEMM epilogues = the fallback without them, bit for bit",
          "[gpu][emu][train][epilogue]") {
  cf::gpu::ContextOptions off;
  off.fused_epilogues = false;
  cf::gpu::Context fused_ctx, plain_ctx(off);
  // fp32 on every config; tf32 and bf16 (no bias-gradient epilogue, rounded inputs) on the precision cases
  std::vector<std::pair<Case, Precision>> runs;
  for (const Case& cs : cases()) runs.emplace_back(cs, Precision::Fp32);
  for (const Case& cs : precision_cases())
    for (Precision p : {Precision::Tf32, Precision::Bf16}) runs.emplace_back(cs, p);
  for (const auto& [cs, p] : runs) {
    INFO(cs.label << ", " << cf::gpu::kPrecisions.name(p));
    std::vector<double> l_fused, l_plain;
    const std::vector<float> g_fused = run(fused_ctx, cs, p, l_fused), g_plain = run(plain_ctx, cs, p, l_plain);
    CHECK(l_fused == l_plain);
    CHECK(g_fused == g_plain);
  }
}
