// The device analysis model's emulated build (cf::gpu::AnalysisModel with Placement::Emulated,
// issue 30) against the CPU forward of lib/nn: mean loss, log p(target) per position, logits, and
// what the capture hook sees (attention probabilities of the captured heads, zeros elsewhere; Q, K;
// the residual in, attention output, residual out and their norms), for every mask family and
// every architecture variant the device model runs; score hooks and strided perplexity; the
// refusals of the others.
#include <catch2/catch.hpp>
#include <map>

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/functors.hpp"  // train_cases.hpp's AdamW helper
#include "train_cases.hpp"

using namespace cf_test_gpu;
using cf::gpu::AnalysisModel;
using cf::gpu::Placement;

namespace {

// The trainer's cases (mask families, fusions, positions, norms, biases, heads) plus the HF
// families' variants: RoPE (full and partial rotary), RMSNorm, GELU erf, SwiGLU, grouped-query
// attention, the parallel residual, BLOOM's embedding norm and slopes, another norm epsilon. The
// trainer's cases of attention units the analysis model refuses (S-D, runway, linear) are left out
// here; the refusal test names them.
bool mask_families_only(const ModelConfig& c) {
  for (const LayerConfig& l : c.layers)
    if (l.attn != AttnKind::Full && l.attn != AttnKind::Block && l.attn != AttnKind::Swa &&
        l.attn != AttnKind::Bridge && l.attn != AttnKind::Pbb && l.attn != AttnKind::SeBridge)
      return false;
  return true;
}

std::vector<Case> analysis_cases() {
  std::vector<Case> v;
  for (Case& c : cases())
    if (mask_families_only(c.cfg)) v.push_back(std::move(c));
  ModelConfig llama = small("full,swa", PosKind::Rope, NormKind::RMSNorm, 16, 4);
  llama.arch.mlp = MlpKind::SwiGLU;
  llama.arch.n_kv_head = 2;
  llama.arch.d_ff = 24;
  llama.arch.mlp_bias = false;
  llama.arch.tied_head = false;
  llama.arch.norm_eps = 1e-6;
  llama.arch.rope_theta = 500000.0;
  llama.bias = false;
  llama.proj_bias = false;
  v.push_back({"llama: RoPE, RMSNorm eps 1e-6, SwiGLU, GQA 4/2, no biases, untied head", llama});
  ModelConfig qwen = llama;
  qwen.bias = true;  // Qwen2's qkv bias
  qwen.arch.n_kv_head = 1;
  v.push_back({"qwen2: as llama with qkv bias and one kv head", qwen});
  ModelConfig neox = small("full,bridge", PosKind::Rope, NormKind::LayerNorm, 16, 2);
  neox.arch.mlp = MlpKind::Gelu;
  neox.arch.parallel_residual = true;
  neox.arch.rope_dim = 4;  // partial rotary: 4 of d_head 8
  neox.arch.tied_head = false;
  v.push_back({"gpt_neox: partial RoPE, GELU erf, parallel residual, bridge", neox});
  ModelConfig bloom = small("full,full", PosKind::Alibi, NormKind::LayerNorm, 18, 3);
  bloom.arch.emb_norm = true;
  bloom.arch.alibi = AlibiSlopes::Hf;
  v.push_back({"bloom: ALiBi with HF slopes over 3 heads, embedding norm", bloom});
  return v;
}

// What on_layer saw, copied (layer, sequence) by (layer, sequence).
struct Seen {
  std::vector<float> probs, q, k, rin, aout, rout, nin, naout, nout;
};
using SeenMap = std::map<std::pair<int, int>, Seen>;

cf::nn::ForwardHooks recording_hooks(SeenMap& seen, std::vector<int> heads) {
  cf::nn::ForwardHooks h;
  h.capture_heads = std::move(heads);
  h.on_layer = [&seen](const LayerActivations& la) {
    const std::size_t H = la.n_head, T = la.seq_len, TT = T * T, TD = T * la.d_head, TC = T * la.d_model;
    Seen s;
    s.probs.assign(la.attn_probs, la.attn_probs + H * TT);
    s.q.assign(la.q, la.q + H * TD);
    s.k.assign(la.k, la.k + H * TD);
    s.rin.assign(la.resid_in, la.resid_in + TC);
    s.aout.assign(la.attn_out, la.attn_out + TC);
    s.rout.assign(la.resid_out, la.resid_out + TC);
    s.nin.assign(la.resid_in_norm, la.resid_in_norm + T);
    s.naout.assign(la.attn_out_norm, la.attn_out_norm + T);
    s.nout.assign(la.resid_out_norm, la.resid_out_norm + T);
    seen[{la.layer, la.seq}] = std::move(s);
  };
  return h;
}

double worst = 0;  // the largest rel() of a run, printed with CF_TEST_VERBOSE=1

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  const double r = rel_diff(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
  worst = std::max(worst, r);
  if (std::getenv("CF_TEST_VERBOSE")) WARN("worst relative difference so far " << worst);
  return r;
}

// float32 on both sides, summed in different orders (GEMM blocking, the explicit softmax against
// the CPU's tiled online softmax): measured <= 2.6e-7 of each tensor's largest entry.
constexpr double kTol = 2e-5;

}  // namespace

TEST_CASE(
    "gpu analysis model (emulated) = cf::nn forward: loss, log-probabilities and logits, every mask family and "
    "HF variant",
    "[gpu][emu][analysis]") {
  const int B = 2, T = 45;
  for (const Case& cs : analysis_cases()) {
    INFO(cs.label);
    const Model<float> model = init_model<float>(cs.cfg, 5);
    std::vector<std::int32_t> x, y;
    batch(cs.cfg, B, T, 13, x, y);
    Workspace<float> ws;
    std::vector<float> lp_cpu, lp_dev, logits;
    const float loss_cpu = forward_backward<float>(model, x.data(), y.data(), B, T, nullptr, ws, nullptr, &lp_cpu);
    AnalysisModel dev(Placement::Emulated, model);
    const double loss_dev = dev.forward(x.data(), y.data(), B, T, nullptr, &lp_dev, &logits);
    CHECK(std::abs(loss_dev - loss_cpu) < kTol * std::abs(loss_cpu));
    CHECK(rel(lp_dev, lp_cpu) < kTol);
    for (int b = 0; b < B; ++b) {  // logits against cf::nn::forward_logits, one sequence at a time
      const std::vector<std::int32_t> seq(x.begin() + b * T, x.begin() + (b + 1) * T);
      const Eigen::MatrixXf want = forward_logits(model, seq);
      std::vector<float> w(static_cast<std::size_t>(T) * cs.cfg.vocab_size);
      for (int t = 0; t < T; ++t)
        for (int v = 0; v < cs.cfg.vocab_size; ++v) w[static_cast<std::size_t>(t) * cs.cfg.vocab_size + v] = want(t, v);
      const std::vector<float> got(logits.begin() + static_cast<std::ptrdiff_t>(w.size()) * b,
                                   logits.begin() + static_cast<std::ptrdiff_t>(w.size()) * (b + 1));
      CHECK(rel(got, w) < kTol);
    }
  }
}

TEST_CASE(
    "gpu analysis model (emulated) = cf::nn forward hooks: probabilities of the captured heads, Q, K, residuals "
    "and their norms",
    "[gpu][emu][analysis]") {
  const int B = 2, T = 45;
  for (const Case& cs : analysis_cases()) {
    for (const std::vector<int>& heads : {std::vector<int>{}, std::vector<int>{cs.cfg.n_head - 1}}) {
      INFO(cs.label << ", " << (heads.empty() ? "all heads" : "the last head only"));
      const Model<float> model = init_model<float>(cs.cfg, 9);
      std::vector<std::int32_t> x, y;
      batch(cs.cfg, B, T, 17, x, y);
      SeenMap cpu, dev;
      const cf::nn::ForwardHooks hc = recording_hooks(cpu, heads), hd = recording_hooks(dev, heads);
      Workspace<float> ws;
      forward_backward<float>(model, x.data(), y.data(), B, T, nullptr, ws, &hc);
      AnalysisModel(Placement::Emulated, model).forward(x.data(), y.data(), B, T, &hd);
      REQUIRE(cpu.size() == static_cast<std::size_t>(B * cs.cfg.n_layer));
      REQUIRE(dev.size() == cpu.size());
      for (const auto& [key, c] : cpu) {
        INFO("layer " << key.first << ", sequence " << key.second);
        const Seen& d = dev.at(key);
        CHECK(rel(d.probs, c.probs) < kTol);
        CHECK(rel(d.q, c.q) < kTol);
        CHECK(rel(d.k, c.k) < kTol);
        CHECK(rel(d.rin, c.rin) < kTol);
        CHECK(rel(d.aout, c.aout) < kTol);
        CHECK(rel(d.rout, c.rout) < kTol);
        CHECK(rel(d.nin, c.nin) < kTol);
        CHECK(rel(d.naout, c.naout) < kTol);
        CHECK(rel(d.nout, c.nout) < kTol);
        if (!heads.empty()) {  // the heads not captured are zero on both sides
          const std::size_t TT = static_cast<std::size_t>(T) * T;
          CHECK(std::all_of(d.probs.begin(), d.probs.begin() + static_cast<std::ptrdiff_t>(TT),
                            [](float p) { return p == 0.f; }));
        }
      }
    }
  }
}

TEST_CASE("gpu analysis model: capture on the emulated device gives the CPU capture's summary",
          "[gpu][emu][analysis]") {
  const Case cs = analysis_cases()[1];  // block + bridge (branch fusion), ALiBi
  const Model<float> model = init_model<float>(cs.cfg, 21);
  std::vector<std::int32_t> x, y;
  batch(cs.cfg, 1, 200, 23, x, y);
  const auto windows = cf::nn::capture_windows(x, 40, 3);
  cf::nn::CaptureOptions opt;
  opt.heads = {1};
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  const std::string a = dir + "/cf_test_analysis_cpu.h5", b = dir + "/cf_test_analysis_dev.h5";
  std::remove(a.c_str());
  std::remove(b.c_str());
  const cf::nn::CaptureSummary sc = cf::nn::capture_model(model, windows, a, opt);
  const cf::nn::CaptureSummary sd = cf::gpu::capture_model(Placement::Emulated, model, windows, b, opt);
  std::remove(a.c_str());
  std::remove(b.c_str());
  REQUIRE(sd.layers.size() == sc.layers.size());
  CHECK(sd.n_seq == sc.n_seq);
  CHECK(sd.seq_len == sc.seq_len);
  CHECK(std::abs(sd.nll - sc.nll) < kTol * sc.nll);
  for (std::size_t l = 0; l < sc.layers.size(); ++l) {
    INFO("layer " << l);
    CHECK(std::abs(sd.layers[l].alpha_token_mean - sc.layers[l].alpha_token_mean) < kTol);
    CHECK(std::abs(sd.layers[l].alpha_frobenius - sc.layers[l].alpha_frobenius) < kTol);
    CHECK(std::abs(sd.layers[l].entropy - sc.layers[l].entropy) < kTol * sc.layers[l].entropy);
  }
}

TEST_CASE("gpu analysis model (emulated) = cf::nn: score hooks and strided perplexity with and without them",
          "[gpu][emu][analysis]") {
  // a hook that changes the scores of some (layer, head) pairs and not others, in place: head 1 of
  // layer 1 attends to its own token only, the upper triangle (masked keys) of head 0 of layer 0
  // overwritten (the mask must still hide it)
  cf::nn::ForwardHooks hooks;
  hooks.on_scores = [](int l, int h, Eigen::Ref<Eigen::MatrixXf> M) {
    if (l == 1 && h == 1) M.diagonal().array() += 30.0f;
    if (l == 0 && h == 0)
      for (Eigen::Index i = 0; i < M.rows(); ++i)
        for (Eigen::Index j = i + 1; j < M.cols(); ++j) M(i, j) = 1e3f;
  };
  for (const Case& cs : analysis_cases()) {
    INFO(cs.label);
    Model<float> model = init_model<float>(cs.cfg, 31);
    for (float& w : model.params) w *= 4.f;  // larger than at init: attention that matters to the loss
    std::vector<std::int32_t> x, y;
    batch(cs.cfg, 1, 150, 37, x, y);
    AnalysisModel dev(Placement::Emulated, model);
    const cf::nn::ForwardHooks* none = nullptr;
    for (const cf::nn::ForwardHooks* h : {none, static_cast<const cf::nn::ForwardHooks*>(&hooks)}) {
      INFO((h ? "with the score hook" : "without hooks"));
      const PerplexityResult want = evaluate_perplexity(model, x, 40, 15, h);
      const PerplexityResult got = dev.perplexity(x, 40, 15, h);
      CHECK(got.n_tokens == want.n_tokens);
      CHECK(std::abs(got.nll - want.nll) < kTol * want.nll);
      CHECK(std::abs(got.ppl - want.ppl) < kTol * want.ppl);
    }
    // the hook matters: the perplexity it gives is not the plain one
    const double change = std::abs(dev.perplexity(x, 40, 15, &hooks).nll - dev.perplexity(x, 40, 15).nll);
    if (std::getenv("CF_TEST_VERBOSE")) WARN("nll change from the hook " << change);
    CHECK(change > 1e-6);  // above the nll's float32 noise (measured >= 1.4e-5)
  }
}

TEST_CASE("gpu analysis model refuses what it does not run, naming it", "[gpu][analysis]") {
  auto refused = [](const ModelConfig& c, const std::string& word) {
    INFO(word);
    CHECK_THAT(cf::gpu::device_analysis_unsupported(c), Catch::Contains(word));
    const Model<float> m = init_model<float>(c, 1);
    REQUIRE_THROWS_AS(AnalysisModel(Placement::Emulated, m), cf::InvalidArgument);
    REQUIRE_THROWS_WITH(AnalysisModel(Placement::Emulated, m), Catch::Contains(word));
  };
  refused(small("full,sd", PosKind::Learned, NormKind::LayerNorm), "sd attention (layer 1)");
  refused(small("runway-dot,full", PosKind::Learned, NormKind::LayerNorm), "runway-dot attention (layer 0)");
  refused(small("full,runway-bilinear", PosKind::Learned, NormKind::LayerNorm), "runway-bilinear attention");
  refused(small("linear,full", PosKind::Learned, NormKind::LayerNorm), "linear attention");
  for (const Case& cs : analysis_cases()) CHECK(cf::gpu::device_analysis_unsupported(cs.cfg).empty());

  const Model<float> ok = init_model<float>(small("full,swa", PosKind::Learned, NormKind::LayerNorm), 1);
  REQUIRE_THROWS_AS(AnalysisModel(Placement::Cpu, ok), cf::InvalidArgument);
  AnalysisModel dev(Placement::Emulated, ok);
  std::vector<std::int32_t> x, y;
  batch(ok.config, 1, 8, 1, x, y);
  cf::nn::ForwardHooks lin;
  lin.linearize = {false, true};
  REQUIRE_THROWS_WITH(dev.forward(x.data(), y.data(), 1, 8, &lin), Catch::Contains("ELU+1 linear attention"));
  REQUIRE_THROWS_WITH(dev.forward(x.data(), y.data(), 1, 65, nullptr), Catch::Contains("block_size"));
  x[3] = ok.config.vocab_size;
  REQUIRE_THROWS_WITH(dev.forward(x.data(), y.data(), 1, 8, nullptr), Catch::Contains("outside [0, vocab_size"));
}
