// The device analysis model's precision policies (issue 30; docs/gpu.md "Analysis model"), emulated
// build: the linear layers' GEMMs in tf32 or bf16 (the trainer's PrecisionGemm: inputs rounded,
// float32 accumulation and output) against the CPU's float32 model at a tolerance derived from the
// unit roundoff and the depth; fp32 bit for bit the model without a policy; bf16 of a float32 model
// (rounded once on the device), of its F32 directory (rounded as placed) and of its bf16 shards (used
// as stored) bit for bit the same; and, on the tests/hf fixtures, bf16 against an independent torch
// computation with the same roundings (tests/hf/hf_reference.py bf16-logits) far more tightly.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/functors.hpp"  // train_cases.hpp's AdamW helper
#include "cf/hf/checkpoint.hpp"
#include "stored_fixture.hpp"
#include "train_cases.hpp"

using namespace cf_test_gpu;
using cf::gpu::AnalysisModel;
using cf::gpu::Placement;
using cf::gpu::Precision;

namespace {

std::string tmp_dir(const std::string& name) {
  const char* t = std::getenv("TMPDIR");
  return (std::filesystem::path(t ? t : "/tmp") / ("cf_test_precision_" + name)).string();
}

// The unit roundoff u of the policy's GEMM inputs (2^-11 TF32, 2^-8 bf16).
double unit_roundoff(Precision p) { return p == Precision::Tf32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

// The policy against the float32 CPU model, relative to each tensor's largest entry. Each rounded
// input is off by at most u, so a product by 2u and a GEMM output by at most 2u of its sum of |terms|.
// The logits sit behind 4 L + 1 rounded GEMMs (qkv, c_proj, c_fc, c_proj per block, the head), and
// the errors of consecutive GEMMs add at worst: 2u (4 L + 1). The deepest probabilities sit behind
// 4 (L - 1) + 1 of them (layer L - 1's qkv), leaving 4 GEMMs' worth (8u) for the softmax's
// amplification of the scores' errors. L = 2: 18u. Measured worst on the
// fixtures: 7.9u (bf16), 9.3u (tf32): docs/gpu.md.
double policy_tolerance(Precision p, int L) { return 2 * unit_roundoff(p) * (4 * L + 1); }

// bf16 against the torch oracle with the same roundings: the same products, summed in float32 here
// and in float64 there (<= k 2^-24 of the sum of |terms| per GEMM), and where that difference moves
// an activation across a bfloat16 rounding boundary (a chance of about k 2^-16 per input) one of the
// k terms of the next GEMM moves by 2u of itself, about 2u / k of the output's scale (k >= 32
// here): each flip costs at most u / 16, and a few may meet in one output. u / 4.
double oracle_tolerance() { return unit_roundoff(Precision::Bf16) / 4; }

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return rel_diff(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

struct Run {
  double loss = 0;
  std::vector<float> logprobs, logits;
  std::map<std::pair<int, int>, std::vector<float>> probs;
};

// A forward pass with every head's probabilities of every (layer, sequence) recorded.
template <class Forward>
Run run(Forward&& forward) {
  Run r;
  cf::nn::ForwardHooks h;
  h.on_layer = [&r](const LayerActivations& la) {
    const std::size_t n = static_cast<std::size_t>(la.n_head) * la.seq_len * la.seq_len;
    r.probs[{la.layer, la.seq}].assign(la.attn_probs, la.attn_probs + n);
  };
  r.loss = forward(&h, &r.logprobs, &r.logits);
  return r;
}

Run run_device(AnalysisModel& dev, const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y, int B,
               int T) {
  return run([&](const cf::nn::ForwardHooks* h, std::vector<float>* lp, std::vector<float>* z) {
    return dev.forward(x.data(), y.data(), B, T, h, lp, z);
  });
}

// The CPU float32 model: loss, log-probabilities, probabilities (forward_backward) and logits
// (forward_logits per sequence) in the device's layout.
Run run_cpu(const Model<float>& m, const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y, int B,
            int T) {
  Run r = run([&](const cf::nn::ForwardHooks* h, std::vector<float>* lp, std::vector<float>*) {
    Workspace<float> ws;
    return forward_backward<float>(m, x.data(), y.data(), B, T, nullptr, ws, h, lp);
  });
  const int V = m.config.vocab_size;
  for (int b = 0; b < B; ++b) {
    const Eigen::MatrixXf z = forward_logits(m, std::vector<std::int32_t>(x.begin() + b * T, x.begin() + (b + 1) * T));
    for (int t = 0; t < T; ++t)
      for (int v = 0; v < V; ++v) r.logits.push_back(z(t, v));
  }
  return r;
}

// Device run `d` in policy `p` against the CPU's float32 run `c` of an L-layer model; the worst
// relative difference is returned (logits, log-probabilities, probabilities).
double check_policy(const Run& d, const Run& c, Precision p, int L) {
  const double tol = policy_tolerance(p, L);
  INFO(cf::gpu::kPrecisions.name(p) << ": tolerance " << tol);
  const double lz = rel(d.logits, c.logits), llp = rel(d.logprobs, c.logprobs);
  CHECK(lz < tol);
  CHECK(llp < tol);
  // each -log p(target) = logsumexp(z) - z_target moves by at most twice the largest logit error
  CHECK(std::abs(d.loss - c.loss) <= 2 * tol * max_abs(c.logits));
  double worst = std::max(lz, llp);
  REQUIRE(d.probs.size() == c.probs.size());
  for (const auto& [key, pr] : c.probs) {
    INFO("layer " << key.first << ", sequence " << key.second);
    const double r = rel(d.probs.at(key), pr);
    CHECK(r < tol);
    worst = std::max(worst, r);
  }
  return worst;
}

std::string exported_gpt2(bool tied) {
  ModelConfig c = small("full,full", PosKind::Learned, NormKind::LayerNorm, 24, 3);
  c.arch.tied_head = tied;
  const Model<float> m = init_model<float>(c, tied ? 41 : 43);
  const std::string dir = tmp_dir(tied ? "gpt2_tied" : "gpt2_untied");
  std::filesystem::remove_all(dir);
  cf::hf::export_gpt2(m, dir);
  return dir;
}

void report(const char* what, double worst, Precision p) {
  if (std::getenv("CF_TEST_VERBOSE"))
    std::printf("%s %s: worst %.3g (%.2fu)\n", what, std::string(cf::gpu::kPrecisions.name(p)).c_str(), worst,
                worst / unit_roundoff(p));
}

}  // namespace

TEST_CASE(
    "gpu analysis model precision policies (emulated): fp32 is the model without a policy bit for bit, tf32 and "
    "bf16 = the float32 CPU model within the derived tolerance, bf16 the same bits from a model, its F32 folder and "
    "its bf16 shards",
    "[gpu][emu][analysis][precision]") {
  for (bool tied : {true, false}) {
    INFO((tied ? "tied head" : "untied head"));
    const std::string dir = exported_gpt2(tied), shards = tmp_dir(tied ? "bf16_tied" : "bf16_untied");
    // the matrices in bf16 shards, the norms, biases and positions in float32 (as the device keeps them)
    cf_test_stored::convert(
        dir, shards,
        [](const std::string& n) {
          const bool matrix = n.find("wte") != std::string::npos || n.find("lm_head") != std::string::npos ||
                              n.find("c_attn.weight") != std::string::npos ||
                              n.find("c_proj.weight") != std::string::npos ||
                              n.find("c_fc.weight") != std::string::npos;
          return std::string(matrix ? "BF16" : "F32");
        },
        3);
    const Model<float> cpu = cf::hf::load_hf_model(dir);
    const int B = 2, T = 16, L = cpu.config.n_layer;
    std::vector<std::int32_t> x, y;
    batch(cpu.config, B, T, 31, x, y);
    const Run c = run_cpu(cpu, x, y, B, T);

    AnalysisModel plain(Placement::Emulated, cpu), fp32(Placement::Emulated, cpu, Precision::Fp32);
    const Run r0 = run_device(plain, x, y, B, T), r1 = run_device(fp32, x, y, B, T);
    CHECK(r1.logits == r0.logits);
    CHECK(r1.probs == r0.probs);
    CHECK(r1.loss == r0.loss);

    for (Precision p : {Precision::Tf32, Precision::Bf16}) {
      AnalysisModel dev(Placement::Emulated, cpu, p), folder(Placement::Emulated, dir, p);
      CHECK(dev.precision() == p);
      const Run d = run_device(dev, x, y, B, T), f = run_device(folder, x, y, B, T);
      report("exported gpt2", check_policy(d, c, p, L), p);
      CHECK(f.logits == d.logits);  // the same roundings, wherever the float32 weights come from
      // measurably not the float32 model: the policy is in effect
      CHECK(rel(d.logits, c.logits) > unit_roundoff(p) / 64);
    }
    // stored bf16 shards used as they are = the float32 model rounded to bf16 (nearest even both)
    AnalysisModel rounded(Placement::Emulated, cpu, Precision::Bf16),
        stored(Placement::Emulated, shards, Precision::Bf16);
    CHECK(stored.weight_type() == cf::gpu::WeightType::BF16);
    CHECK(run_device(stored, x, y, B, T).logits == run_device(rounded, x, y, B, T).logits);
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(shards);
  }
}

// One tests/hf fixture (CTest runs this case per family with CF_STORED_FIXTURE set, and
// CF_BF16_ORACLE: hf_reference.py bf16-logits of the fixture's tokens.txt): tf32 and bf16 against
// lib/hf's float32 model, and bf16 against the torch oracle (F32 fixtures: their matrices rounded on
// both sides; gpt2-bf16-sharded: every tensor as stored). Without the fixture (no torch) the case
// exits 77, which CTest reports as skipped.
TEST_CASE("gpu analysis model precision policies (emulated) on a tests/hf fixture", "[fixture]") {
  const char* dir = std::getenv("CF_STORED_FIXTURE");
  const char* oracle = std::getenv("CF_BF16_ORACLE");
  REQUIRE(dir != nullptr);
  REQUIRE(oracle != nullptr);
  if (!std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    std::printf("skipped: no fixture '%s' (tests/hf makes it with torch)\n", dir);
    std::exit(77);
  }
  const Model<float> cpu = cf::hf::load_hf_model(dir);
  const int B = 2, T = std::min(16, cpu.config.block_size), L = cpu.config.n_layer;
  std::vector<std::int32_t> x, y;
  batch(cpu.config, B, T, 31, x, y);
  const Run c = run_cpu(cpu, x, y, B, T);
  for (Precision p : {Precision::Tf32, Precision::Bf16}) {
    AnalysisModel dev(Placement::Emulated, dir, p);
    report(dir, check_policy(run_device(dev, x, y, B, T), c, p, L), p);
  }

  std::vector<std::int32_t> tok;
  std::ifstream in(std::filesystem::path(dir) / "tokens.txt");
  for (std::int32_t t; in >> t;) tok.push_back(t);
  const int n = static_cast<int>(tok.size()), V = cpu.config.vocab_size;
  std::vector<float> want(static_cast<std::size_t>(n) * V);
  std::ifstream ref(oracle, std::ios::binary);
  ref.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
  REQUIRE(ref.gcount() == static_cast<std::streamsize>(want.size() * sizeof(float)));
  AnalysisModel dev(Placement::Emulated, dir, Precision::Bf16);
  const std::vector<std::int32_t> none(tok.size(), -1);
  std::vector<float> got;
  dev.forward(tok.data(), none.data(), 1, n, nullptr, nullptr, &got);
  const double r = rel(got, want);
  report("torch bf16 oracle", r, Precision::Bf16);
  CHECK(r < oracle_tolerance());
}
