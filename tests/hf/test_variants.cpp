// Finite-difference gradient tests in double for the architecture variants of the Hugging Face
// families (issue 13; cf/nn/variant_ops.hpp and cf::nn::ArchVariant in forward_backward): each op
// (RMSNorm, exact GELU, SwiGLU, partial rotary with rope_theta) and the whole model with every
// variant alone and the four families' combinations. Harness: tests/common/cf_test/finite_difference.hpp:
// the reference is a central difference of the same scalar loss; the tolerance is relative to the
// largest gradient entry.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>

#include "cf/nn/model.hpp"
#include "cf/nn/ops.hpp"
#include "cf/nn/variant_ops.hpp"
#include "cf_test/finite_difference.hpp"

using namespace cf::nn;
using namespace cf::test;

namespace {

ModelConfig base_config() {
  ModelConfig c;
  c.vocab_size = 11;
  c.block_size = 12;
  c.n_layer = 2;
  c.n_head = 4;
  c.d_model = 16;
  c.layers = parse_schedule("full", c.n_layer, LayerConfig{});
  return c;
}

double model_fd_error(const ModelConfig& c, int B = 2, int Tn = 9) {
  Model<double> m = init_model<double>(c, 7);
  const auto noise = random_vec(m.params.size(), 11, 0.3);
  for (std::size_t i = 0; i < m.params.size(); ++i) m.params[i] += noise[i];
  std::mt19937 rng(3);
  std::vector<std::int32_t> tok(B * Tn), tgt(B * Tn);
  for (auto& t : tok) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  for (auto& t : tgt) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  tgt[1] = -1;
  Workspace<double> ws;
  std::vector<double> grad(m.params.size(), 0.0);
  forward_backward<double>(m, tok.data(), tgt.data(), B, Tn, &grad, ws);
  auto loss = [&]() { return forward_backward<double>(m, tok.data(), tgt.data(), B, Tn, nullptr, ws); };
  std::vector<std::size_t> idx;  // per tensor: first, last and four random entries (all when small)
  for (const auto& t : m.layout.tensors) {
    const auto o = static_cast<std::size_t>(t.offset), n = static_cast<std::size_t>(t.size);
    if (n <= 6) {
      for (std::size_t i = 0; i < n; ++i) idx.push_back(o + i);
      continue;
    }
    idx.push_back(o);
    idx.push_back(o + n - 1);
    for (int k = 0; k < 4; ++k) idx.push_back(o + rng() % n);
  }
  return fd_max_rel_error(m.params, grad, loss, idx);
}

}  // namespace

TEST_CASE("variant ops: RMSNorm backward equals finite differences (N=3, C=7)", "[hf][grad]") {
  const int N = 3, C = 7;
  auto x = random_vec(N * C, 1), w = random_vec(C, 2), r = random_vec(N * C, 3);
  std::vector<double> out(N * C), rstd(N), dx(N * C, 0), dw(C, 0);
  auto loss = [&]() {
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6);
    return dot(out, r);
  };
  loss();
  rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
  CHECK(fd_max_rel_error(x, dx, loss, all_indices(x.size())) < kRelTol);
  CHECK(fd_max_rel_error(w, dw, loss, all_indices(w.size())) < kRelTol);
}

TEST_CASE("variant ops: exact GELU and SwiGLU backward equal finite differences", "[hf][grad]") {
  const int N = 4, F = 5;
  auto x = random_vec(N * F, 4, 3.0), r = random_vec(N * F, 5);
  std::vector<double> out(N * F), dx(N * F, 0);
  auto lg = [&]() {
    gelu_erf_forward(out.data(), x.data(), N * F);
    return dot(out, r);
  };
  lg();
  gelu_erf_backward(dx.data(), x.data(), r.data(), N * F);
  CHECK(fd_max_rel_error(x, dx, lg, all_indices(x.size())) < kRelTol);
  // exact GELU against its definition x Phi(x) at a few points (Phi by erfc: independent formula)
  for (double v : {-2.0, -0.5, 0.0, 0.7, 3.0}) {
    double y;
    gelu_erf_forward(&y, &v, 1);
    CHECK(y == Approx(v * 0.5 * std::erfc(-v / std::sqrt(2.0))).epsilon(1e-14));
  }
  auto h = random_vec(N * 2 * F, 6, 2.0);
  std::vector<double> s(N * F), dh(N * 2 * F, 0);
  auto ls = [&]() {
    swiglu_forward(s.data(), h.data(), N, F);
    return dot(s, r);
  };
  ls();
  swiglu_backward(dh.data(), h.data(), r.data(), N, F);
  CHECK(fd_max_rel_error(h, dh, ls, all_indices(h.size())) < kRelTol);
}

TEST_CASE("variant ops: partial rotary with rope_theta is a rotation of the first r dims", "[hf][grad]") {
  const int T = 5, dh = 8, rot = 4;
  auto x = random_vec(T * dh, 7);
  auto y = x;
  rope_apply(y.data(), T, dh, dh, false, rot, 500.0);
  for (int t = 0; t < T; ++t) {
    for (int d = rot; d < dh; ++d) CHECK(y[t * dh + d] == x[t * dh + d]);  // pass-through dims
    for (int i = 0; i < rot / 2; ++i) {  // pair (2i, 2i+1) rotated by t * 500^(-2i/rot)
      const double a = t * std::pow(500.0, -2.0 * i / rot), u = x[t * dh + 2 * i], v = x[t * dh + 2 * i + 1];
      CHECK(y[t * dh + 2 * i] == Approx(u * std::cos(a) - v * std::sin(a)).margin(1e-14));
      CHECK(y[t * dh + 2 * i + 1] == Approx(u * std::sin(a) + v * std::cos(a)).margin(1e-14));
    }
  }
  rope_apply(y.data(), T, dh, dh, true, rot, 500.0);  // inverse = transpose: back to x
  for (int i = 0; i < T * dh; ++i) CHECK(y[i] == Approx(x[i]).margin(1e-14));
}

TEST_CASE("variant model gradients: each variant alone equals finite differences", "[hf][grad]") {
  struct Case {
    const char* name;
    std::function<void(ModelConfig&)> set;
  };
  const std::vector<Case> cases = {
      {"rmsnorm",
       [](ModelConfig& c) {
         c.norm = NormKind::RMSNorm;
         c.arch.norm_eps = 1e-6;
       }},
      {"layernorm eps 1e-3", [](ModelConfig& c) { c.arch.norm_eps = 1e-3; }},
      {"exact gelu", [](ModelConfig& c) { c.arch.mlp = MlpKind::Gelu; }},
      {"swiglu d_ff 12 no mlp bias",
       [](ModelConfig& c) {
         c.arch.mlp = MlpKind::SwiGLU;
         c.arch.d_ff = 12;
         c.arch.mlp_bias = false;
       }},
      {"gqa 4 heads / 2 kv", [](ModelConfig& c) { c.arch.n_kv_head = 2; }},
      {"gqa 4 heads / 1 kv, rope",
       [](ModelConfig& c) {
         c.arch.n_kv_head = 1;
         c.pos = PosKind::Rope;
       }},
      {"parallel residual", [](ModelConfig& c) { c.arch.parallel_residual = true; }},
      {"partial rotary 2 of 4, theta 500",
       [](ModelConfig& c) {
         c.pos = PosKind::Rope;
         c.arch.rope_dim = 2;
         c.arch.rope_theta = 500;
       }},
      {"embedding layernorm", [](ModelConfig& c) { c.arch.emb_norm = true; }},
      {"embedding rmsnorm",
       [](ModelConfig& c) {
         c.arch.emb_norm = true;
         c.norm = NormKind::RMSNorm;
       }},
      {"untied head", [](ModelConfig& c) { c.arch.tied_head = false; }},
  };
  for (const auto& k : cases) {
    ModelConfig c = base_config();
    k.set(c);
    INFO(k.name);
    CHECK(model_fd_error(c) < kRelTol);
  }
}

TEST_CASE("variant model gradients: the four families' combinations equal finite differences", "[hf][grad]") {
  ModelConfig neox = base_config();  // GPT-NeoX / Pythia
  neox.pos = PosKind::Rope;
  neox.arch.mlp = MlpKind::Gelu;
  neox.arch.parallel_residual = true;
  neox.arch.rope_dim = 2;
  neox.arch.tied_head = false;
  neox.arch.d_ff = 20;
  ModelConfig bloom = base_config();  // BLOOM
  bloom.pos = PosKind::Alibi;
  bloom.arch.emb_norm = true;
  ModelConfig llama = base_config();  // Llama / Qwen2 (q/k/v bias, no o_proj bias)
  llama.pos = PosKind::Rope;
  llama.norm = NormKind::RMSNorm;
  llama.arch.mlp = MlpKind::SwiGLU;
  llama.arch.mlp_bias = false;
  llama.arch.d_ff = 10;
  llama.arch.n_kv_head = 2;
  llama.arch.rope_theta = 1e6;
  llama.arch.tied_head = false;
  llama.bias = true;
  llama.proj_bias = false;
  for (const ModelConfig* c : {&neox, &bloom, &llama}) {
    INFO(to_json(*c).dump());
    CHECK(model_fd_error(*c) < kRelTol);
  }
}
