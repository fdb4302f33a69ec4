#pragma once
// The device trainer's precision policies (issue 31; docs/gpu.md "Precision policies"), shared by
// tests/gpu/test_precision_emu.cpp (the emulated build, every CI run) and test_gpu_train_device.cpp
// (the CUDA build on a device): loss and gradients of TF32 / bf16 GEMMs against the float32 CPU
// trainer within a tolerance derived from the rounding, and bf16 resume exactness through the
// training loop and a checkpoint.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cf/gpu/precision.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/nn/checkpoint.hpp"
#include "train_cases.hpp"

namespace cf_test_gpu {

// The unit roundoff of a GEMM input format: half a unit in the last place of its significand
// (11 significant bits for TF32, 8 for bf16), the largest relative error of one rounding.
inline double unit_roundoff(cf::gpu::Precision p) {
  return p == cf::gpu::Precision::Tf32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

// The tolerances of the policies against the float32 CPU trainer, in units of u. Each GEMM input
// is off by at most u relatively, so each product by 2u and each GEMM output by at most 2u of its
// sum of |terms|. A gradient tensor is the output of one GEMM (dW = dout^T x) whose inputs carry
// the errors of the GEMMs before them (forward, then backward: about 4L + 2 of them with L = 2
// layers here); errors of independent roundings add in quadrature rather than in sum, and
// rel_diff measures against the tensor's largest entry (cancelling sums do not inflate it): a few
// u. Gradients: 8u (measured worst 1.9u TF32, 2.3u bf16). The loss is about log V = 3.4 at these
// initialisations while the logits it reads are O(1) and off by a few u of their scale, and the
// mean over 77 counted targets averages their errors: u (measured 0.0008u TF32, 0.003u bf16).
inline double gradient_tolerance(cf::gpu::Precision p) { return 8 * unit_roundoff(p); }
inline double loss_tolerance(cf::gpu::Precision p) { return unit_roundoff(p); }

// Configs of train_cases.hpp the policies are checked on: GPT-2 style (learned positions,
// LayerNorm, full + swa), ALiBi with block + bridge, and the Llama-like block (RoPE, GQA, RMSNorm,
// SwiGLU, untied head).
inline std::vector<Case> precision_cases() {
  std::vector<Case> all = cases(), att = attention_cases();
  return {all[0], all[1], att.back()};
}

// Loss and every gradient tensor of one micro-batch of the device build `Trainer` in policy `p`
// against cf::nn::forward_backward (float32); returns the worst gradient tensor's rel_diff and
// sets `loss_rel` to the loss's relative difference.
template <class Trainer>
double precision_gradient_diff(const Case& cs, cf::gpu::Precision p, double& loss_rel) {
  const int B = 2, T = 45;
  const Model<float> model = init_model<float>(cs.cfg, 7);
  std::vector<std::int32_t> x, y;
  batch(cs.cfg, B, T, 11, x, y);
  Workspace<float> ws;
  std::vector<float> g0(model.params.size(), 0.f), g1(model.params.size());
  const float loss0 = forward_backward<float>(model, x.data(), y.data(), B, T, &g0, ws);
  cf::gpu::TrainPlan plan = cf::gpu::make_train_plan(cs.cfg, B, T);
  plan.precision = p;
  Trainer tr(std::move(plan));
  tr.upload(model.params.data(), nullptr, nullptr);
  tr.zero_grad();
  const double loss1 = tr.micro_batch(x.data(), y.data());
  tr.gradient(g1.data());
  loss_rel = std::abs(loss1 - loss0) / std::abs(loss0);
  double worst = 0;
  for (const auto& t : model.layout.tensors)
    worst = std::max(worst, rel_diff(g1.data() + t.offset, g0.data() + t.offset, t.size));
  return worst;
}

// The policy `p` of `Trainer` against the CPU trainer on every precision case, at the tolerances
// above; the measured worst is printed with CF_TEST_VERBOSE (or always, `warn`).
template <class Trainer>
void check_precision_against_cpu(cf::gpu::Precision p, bool warn) {
  const std::string name(cf::gpu::kPrecisions.name(p));
  double worst = 0, worst_loss = 0;
  for (const Case& cs : precision_cases()) {
    INFO(name << ": " << cs.label);
    double loss_rel = 0;
    const double g = precision_gradient_diff<Trainer>(cs, p, loss_rel);
    CHECK(loss_rel < loss_tolerance(p));
    CHECK(g < gradient_tolerance(p));
    worst = std::max(worst, g), worst_loss = std::max(worst_loss, loss_rel);
  }
  if (warn || std::getenv("CF_TEST_VERBOSE"))
    WARN(name << ": worst loss rel. diff " << worst_loss << " (" << worst_loss / unit_roundoff(p)
              << " u), worst gradient tensor " << worst << " (" << worst / unit_roundoff(p) << " u)");
}

// bf16 resume exactness through the training loop (cf::nn::train with the device backend): N = 6
// updates straight against 3, the checkpoint (float32 master weights and moments), a resume from
// it, and 3 more. The bf16 weight copies are remade from the float32 weights at load, so the two
// runs' parameters and AdamW moments are equal bit for bit.
inline void check_bf16_resume_exact(cf::gpu::TrainerBuild build, const std::string& dir,
                                    cf::gpu::Precision prec = cf::gpu::Precision::Bf16) {
  namespace fs = std::filesystem;
  const ModelConfig c = small("swa,bridge", PosKind::Learned, NormKind::LayerNorm);
  TrainData d;
  d.vocab_size = c.vocab_size;
  for (int i = 0; i < 3000; ++i) (i < 2700 ? d.train : d.val).push_back((i * 5 + i / 11) % c.vocab_size);
  TrainConfig tc;
  tc.max_steps = 6;
  tc.batch = 2, tc.seq_len = 37;
  tc.lr = 1e-2, tc.min_lr = 1e-3, tc.warmup = 2;
  tc.eval_interval = 3, tc.eval_batches = 1, tc.ckpt_interval = 3;
  tc.precision = std::string(cf::gpu::kPrecisions.name(prec));
  auto backend = [&] { return cf::gpu::make_update_backend(build, cf::gpu::default_context(), prec); };
  fs::remove_all(dir);
  tc.out_dir = dir + "/straight";
  train(c, tc, d, "", nullptr, nullptr, backend().get());
  tc.out_dir = dir + "/split";
  tc.stop_after = 3;
  train(c, tc, d, "", nullptr, nullptr, backend().get());
  const Checkpoint mid = load_checkpoint(tc.out_dir + "/last.h5");
  REQUIRE(mid.step == 3);
  CHECK(mid.train_config.at("precision") == tc.precision);
  tc.stop_after = 0;
  train(c, tc, d, tc.out_dir + "/last.h5", nullptr, nullptr, backend().get());
  const Checkpoint a = load_checkpoint(dir + "/straight/last.h5"), b = load_checkpoint(dir + "/split/last.h5");
  REQUIRE(a.step == 6);
  REQUIRE(b.step == 6);
  const auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
  };
  CHECK(same(a.model.params, b.model.params));
  CHECK(same(a.optim.m, b.optim.m));
  CHECK(same(a.optim.v, b.optim.v));
  CHECK(!same(a.model.params, mid.model.params));  // it trained after the resume
  fs::remove_all(dir);
}

}  // namespace cf_test_gpu
