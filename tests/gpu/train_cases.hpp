#pragma once
// Shared by the device trainer's tests (tests/gpu/test_train_step_emu.cpp: the emulated build on
// the CPU; test_gpu_train_device.cpp: the CUDA build on a device): small models at ragged T (45:
// not a multiple of the 32-row tile), every mask family of the attention kernels, both bridge
// fusions, learned / ALiBi / no positions, LayerNorm or none, biases on and off, tied and untied
// heads, the norm / MLP / residual / embedding variants of imported families (RMSNorm, any norm
// eps, erf GELU, SwiGLU, parallel residual, embedding norm); seeded batches; tensor-by-tensor
// comparison in the model's parameter layout.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cf/gpu/train_step.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/optim.hpp"
#include "cf/nn/trainer.hpp"

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

// The norm, MLP, residual and embedding variants of the Hugging Face families (cf::nn::ArchVariant,
// issue 13) the device trainer runs, alone and combined as in the families.
inline std::vector<Case> variant_cases() {
  std::vector<Case> v;
  // Llama's MLP and norm: RMSNorm at eps 1e-6, SwiGLU (c_fc = gate | up), no biases anywhere
  ModelConfig l = small("full,swa", PosKind::Learned, NormKind::RMSNorm);
  l.arch.mlp = MlpKind::SwiGLU;
  l.arch.d_ff = 24;
  l.arch.mlp_bias = false;
  l.bias = l.proj_bias = false;
  l.arch.norm_eps = 1e-6;
  v.push_back({"Llama-like: RMSNorm eps 1e-6, SwiGLU d_ff 24, no biases", l});
  // GPT-NeoX's block: parallel residual, erf GELU, LayerNorm eps 1e-3 (far from the old fixed 1e-5)
  ModelConfig x = small("block,bridge", PosKind::Learned, NormKind::LayerNorm);
  x.arch.parallel_residual = true;
  x.arch.mlp = MlpKind::Gelu;
  x.arch.norm_eps = 1e-3;
  x.arch.tied_head = false;
  v.push_back({"NeoX-like: parallel residual, erf GELU, LayerNorm eps 1e-3, untied head", x});
  // BLOOM's embedding norm with ALiBi; MLP biases off
  ModelConfig b = small("swa,full", PosKind::Alibi, NormKind::LayerNorm);
  b.arch.emb_norm = true;
  b.arch.mlp_bias = false;
  v.push_back({"BLOOM-like: embedding norm, ALiBi, no MLP bias", b});
  // everything at once over three layers: RMSNorm, SwiGLU with MLP biases, parallel residual,
  // embedding norm, no positions
  ModelConfig a = small("pbb,se-bridge,full", PosKind::None, NormKind::RMSNorm, 16, 2, 3);
  a.arch.mlp = MlpKind::SwiGLU;
  a.arch.parallel_residual = true;
  a.arch.emb_norm = true;
  a.arch.norm_eps = 1e-4;
  v.push_back({"RMSNorm + SwiGLU + parallel residual + embedding norm, eps 1e-4, no positions", a});
  // erf GELU on a sequential residual with RMSNorm
  ModelConfig g = small("bridge,swa", PosKind::Alibi, NormKind::RMSNorm);
  g.arch.mlp = MlpKind::Gelu;
  v.push_back({"RMSNorm + erf GELU, ALiBi", g});
  return v;
}

// The attention features of issue 31: RoPE (full and partial rotary), grouped-query attention,
// the S-D, runway and linear units, and a Llama-like block (RoPE + GQA + RMSNorm + SwiGLU).
inline std::vector<Case> attention_cases() {
  std::vector<Case> v;
  v.push_back({"RoPE, full+swa", small("full,swa", PosKind::Rope, NormKind::LayerNorm)});
  ModelConfig r = small("block,bridge", PosKind::Rope, NormKind::LayerNorm, 16, 2);
  r.arch.rope_dim = 4;  // partial rotary: 4 of d_head 8
  r.arch.rope_theta = 500;
  v.push_back({"RoPE partial rotary (rope_dim 4 of 8, theta 500), block+bridge", r});
  for (int kv : {1, 2}) {
    ModelConfig g = small("full,swa", PosKind::Learned, NormKind::LayerNorm, 16, 4);
    g.arch.n_kv_head = kv;
    v.push_back({"grouped-query attention, n_kv_head " + std::to_string(kv) + " of 4", g});
  }
  v.push_back({"S-D + full, learned positions", small("sd,full", PosKind::Learned, NormKind::LayerNorm)});
  ModelConfig sd = small("swa,sd", PosKind::Alibi, NormKind::None, 24, 3);
  sd.layers[1].sd_eps = 0.3;
  v.push_back({"swa + S-D (sd_eps 0.3), ALiBi, no norm", sd});
  v.push_back({"runway dot + bridge", small("runway-dot,bridge", PosKind::Learned, NormKind::LayerNorm)});
  v.push_back({"runway bilinear + full", small("full,runway-bilinear", PosKind::Learned, NormKind::LayerNorm)});
  ModelConfig rg = small("runway-bilinear,runway-dot", PosKind::Rope, NormKind::LayerNorm, 16, 4);
  rg.arch.rope_dim = 2;
  v.push_back({"runway bilinear + runway dot, partial RoPE, 4 heads", rg});
  v.push_back({"S-D + S-D, RoPE", small("sd,sd", PosKind::Rope, NormKind::LayerNorm)});
  v.push_back(
      {"linear + full (ELU+1), learned positions", small("linear,full", PosKind::Learned, NormKind::LayerNorm)});
  ModelConfig lg = small("swa,linear", PosKind::Rope, NormKind::None, 16, 4);
  lg.arch.n_kv_head = 2;
  v.push_back({"swa + linear, RoPE, GQA kv 2 of 4, no norm", lg});
  ModelConfig ll = small("full,full", PosKind::Rope, NormKind::RMSNorm, 32, 4);
  ll.arch.n_kv_head = 2;
  ll.arch.mlp = MlpKind::SwiGLU;
  ll.arch.norm_eps = 1e-6;
  ll.bias = false;
  ll.proj_bias = false;
  ll.arch.mlp_bias = false;
  ll.arch.tied_head = false;
  v.push_back({"Llama-like block: RoPE + GQA (kv 2 of 4), RMSNorm eps 1e-6, SwiGLU, no biases, untied head", ll});
  return v;
}

// The loop tests' variant model: RMSNorm (eps 1e-6), SwiGLU and a parallel residual on swa + bridge.
inline ModelConfig variant_loop_config() {
  ModelConfig c = small("swa,bridge", PosKind::Learned, NormKind::RMSNorm);
  c.arch.mlp = MlpKind::SwiGLU;
  c.arch.parallel_residual = true;
  c.arch.norm_eps = 1e-6;
  return c;
}

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
  // centered bridges with b < w <= 2b: two bridge branches (Boundary repair (Yang) Eq. 35)
  ModelConfig o = small("bridge,pbb", PosKind::Alibi, NormKind::LayerNorm);
  for (auto& l : o.layers) l.b = 8, l.w = 12;
  v.push_back({"bridge+pbb with overlapping write-back sets (b 8, w 12), ALiBi", o});
  for (Case& c : variant_cases()) v.push_back(std::move(c));
  for (Case& c : attention_cases()) v.push_back(std::move(c));
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

// Two optimiser steps of the device trainer `Trainer` (cf::gpu::emu::Trainer or cuda::Trainer),
// two micro-batches each, clipped hard (max norm 0.05 < the norm: clipping active), against the
// oracle fed the same gradient: the loop's accumulation rule (mean of the micro-batches), then
// cf::nn clip_grad_norm and adamw_step. `param_tol`: relative tolerance on the parameters.
template <class Trainer>
void check_clip_adamw(double param_tol) {
  const int B = 1, T = 37;
  const Case cs = cases()[1];
  Model<float> model = init_model<float>(cs.cfg, 3);
  Trainer tr(cf::gpu::make_train_plan(cs.cfg, B, T));
  tr.upload(model.params.data(), nullptr, nullptr);
  AdamWState st;
  AdamWConfig ac;
  for (int step = 1; step <= 2; ++step) {
    tr.zero_grad();
    std::vector<std::int32_t> x, y;
    for (int k = 0; k < 2; ++k) {
      batch(cs.cfg, B, T, 100 * step + k, x, y);
      tr.micro_batch(x.data(), y.data());
    }
    std::vector<float> g(model.params.size());
    tr.gradient(g.data());  // the device's gradient, updated by the oracle and by the device
    for (auto& v : g) v /= 2.f;
    const double norm_cpu = clip_grad_norm(g, 0.05);
    const double norm_dev = tr.clip(2, 0.05);
    INFO("step " << step << " norm " << norm_cpu);
    CHECK(norm_cpu > 0.05);
    CHECK(std::abs(norm_dev - norm_cpu) < 1e-6 * norm_cpu);
    const double lr = 3e-3;
    adamw_step(model.params, g, st, model.layout, lr, ac);
    const double bc1 = 1.0 - std::pow(ac.beta1, double(step)), bc2 = 1.0 - std::pow(ac.beta2, double(step));
    tr.apply(
        cf::gpu::AdamWUpdate{float(lr), float(ac.beta1), float(ac.beta2), float(bc1), float(bc2), float(ac.eps), 0.f},
        float(ac.weight_decay));
    std::vector<float> p(model.params.size()), m(p.size()), v(p.size());
    tr.download(p.data(), m.data(), v.data());
    check_tensors(model.layout, p, model.params, param_tol, "params");
    check_tensors(model.layout, m, st.m, 1e-5, "m");
    check_tensors(model.layout, v, st.v, 1e-5, "v");
    CHECK(tr.finite());
  }
}

// Parameters after one AdamW step from the same state agree to `tol` of each tensor's largest
// entry plus the step's own sensitivity: the step is lr m^ / (sqrt(v^) + eps), a ratio whose
// relative error is the moments', i.e. the gradient's round-off (tol of the tensor's largest
// |m|) over |m_i|; for entries whose gradient is itself round-off (the key bias: zero in exact
// arithmetic since softmax ignores a constant logit shift) either side may move by up to 2 lr.
inline void check_update(const ParamLayout& lay, const std::vector<float>& got, const std::vector<float>& want,
                         const std::vector<float>& m, double lr, double tol) {
  for (const auto& t : lay.tensors) {
    INFO("params " << t.name);
    double pmax = 1e-3, mmax = 0;
    for (std::int64_t i = t.offset; i < t.offset + t.size; ++i)
      pmax = std::max(pmax, double(std::abs(want[i]))), mmax = std::max(mmax, double(std::abs(m[i])));
    std::int64_t bad = 0;
    for (std::int64_t i = t.offset; i < t.offset + t.size; ++i) {
      const double rel = std::min(1.0, tol * mmax / std::max(double(std::abs(m[i])), 1e-30));
      bad += std::abs(double(got[i]) - double(want[i])) > tol * pmax + 2 * lr * rel;
    }
    CHECK(bad == 0);
  }
}

// Five optimiser steps (AdamW, clipping at norm 1) of the CPU trainer, and at every step the
// device build `Trainer` loaded with the CPU's parameters and moments: its loss and every gradient
// tensor equal cf::nn::forward_backward's to `tol`, and so do its moments and (check_update) its
// parameters after its own clipped AdamW update. Why not two free-running trajectories: AdamW's first steps move each
// parameter by about lr sign(g), so a gradient entry near zero that round-off flips sends the two runs apart by lr
// (measured 1e-4 of a tensor after 5 steps of the plain GPT-2 model); the loop tests below bound those trajectories at
// their own tolerance.
template <class Trainer>
void check_five_steps(const Case& cs, double tol) {
  INFO(cs.label);
  const int B = 2, T = 45;
  Model<float> model = init_model<float>(cs.cfg, 13);
  Trainer tr(cf::gpu::make_train_plan(cs.cfg, B, T));
  AdamWState st;
  AdamWConfig ac;
  Workspace<float> ws;
  double worst = 0;
  for (int step = 1; step <= 5; ++step) {
    INFO("step " << step);
    tr.upload(model.params.data(), st.m.empty() ? nullptr : st.m.data(), st.v.empty() ? nullptr : st.v.data());
    std::vector<std::int32_t> x, y;
    batch(cs.cfg, B, T, 40 + step, x, y);
    std::vector<float> g0(model.params.size(), 0.f), g1(model.params.size());
    const float loss0 = forward_backward<float>(model, x.data(), y.data(), B, T, &g0, ws);
    tr.zero_grad();
    const double loss1 = tr.micro_batch(x.data(), y.data());
    tr.gradient(g1.data());
    CHECK(std::abs(loss1 - loss0) < tol * std::abs(loss0));
    check_tensors(model.layout, g1, g0, tol, "gradient");
    for (const auto& t : model.layout.tensors)
      worst = std::max(worst, rel_diff(g1.data() + t.offset, g0.data() + t.offset, t.size));
    const double lr = 3e-3;
    clip_grad_norm(g0, 1.0);
    tr.clip(1, 1.0);
    adamw_step(model.params, g0, st, model.layout, lr, ac);
    const double bc1 = 1.0 - std::pow(ac.beta1, double(step)), bc2 = 1.0 - std::pow(ac.beta2, double(step));
    tr.apply(
        cf::gpu::AdamWUpdate{float(lr), float(ac.beta1), float(ac.beta2), float(bc1), float(bc2), float(ac.eps), 0.f},
        float(ac.weight_decay));
    std::vector<float> p(model.params.size()), m(p.size()), v(p.size());
    tr.download(p.data(), m.data(), v.data());
    check_tensors(model.layout, m, st.m, tol, "m");
    check_tensors(model.layout, v, st.v, tol, "v");
    check_update(model.layout, p, model.params, st.m, lr, tol);
  }
  if (std::getenv("CF_TEST_VERBOSE")) WARN(cs.label << ": worst gradient tensor over 5 steps " << worst);
}

// The training loop (cf::nn::train, 6 steps of a swa+bridge model unless given) on the CPU and
// with a device build's update backend, over the same data and configuration, checkpoints in cpu_dir / dev_dir.
struct LoopPair {
  ModelConfig c;
  TrainData d;
  TrainConfig tc;  ///< out_dir = dev_dir
  TrainResult cpu, dev;
};
inline LoopPair run_loop_pair(cf::gpu::TrainerBuild build, const std::string& cpu_dir, const std::string& dev_dir,
                              const ModelConfig& cfg = small("swa,bridge", PosKind::Learned, NormKind::LayerNorm)) {
  LoopPair lp;
  lp.c = cfg;
  lp.d.vocab_size = lp.c.vocab_size;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3000; ++i) {
    const int tok = (rng() % 8 == 0) ? int(rng() % lp.c.vocab_size) : (i * 3 + i / 7) % lp.c.vocab_size;
    (i < 2700 ? lp.d.train : lp.d.val).push_back(tok);
  }
  TrainConfig& tc = lp.tc;
  tc.max_steps = 6;
  tc.batch = 2;
  tc.seq_len = 37;
  tc.grad_accum = 1;
  tc.lr = 1e-2;
  tc.min_lr = 1e-3;
  tc.warmup = 2;
  tc.eval_interval = 3;
  tc.eval_batches = 1;
  tc.ckpt_interval = 3;
  tc.out_dir = cpu_dir;
  lp.cpu = train(lp.c, tc, lp.d, "", nullptr, nullptr);
  tc.out_dir = dev_dir;
  auto backend = cf::gpu::make_update_backend(build);
  lp.dev = train(lp.c, tc, lp.d, "", nullptr, nullptr, backend.get());
  return lp;
}
// The device loop tracks the CPU loop: every step's loss and gradient norm, the final validation
// loss (float round-off grows through the updates: 6 digits measured), and it learns. `warn`
// prints the curves (the device run's numbers go to docs/gpu.md).
inline void check_loop_pair(const LoopPair& lp, bool warn) {
  const TrainResult &cpu = lp.cpu, &dev = lp.dev;
  REQUIRE(cpu.history.size() == 6);
  REQUIRE(dev.history.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    INFO("step " << i + 1 << ": cpu " << cpu.history[i].loss << ", device " << dev.history[i].loss);
    if (warn)
      WARN("step " << i + 1 << ": loss cpu " << cpu.history[i].loss << ", device " << dev.history[i].loss
                   << "; grad norm cpu " << cpu.history[i].grad_norm << ", device " << dev.history[i].grad_norm);
    CHECK(std::abs(dev.history[i].loss - cpu.history[i].loss) < 1e-4 * cpu.history[i].loss);
    CHECK(std::abs(dev.history[i].grad_norm - cpu.history[i].grad_norm) < 1e-3 * cpu.history[i].grad_norm);
  }
  CHECK(dev.history.back().loss < dev.history.front().loss);  // it learns
  CHECK(std::abs(dev.final_val_loss - cpu.final_val_loss) < 1e-4 * cpu.final_val_loss);
}

}  // namespace cf_test_gpu
