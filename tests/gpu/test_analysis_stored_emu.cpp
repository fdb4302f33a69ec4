// The device analysis model with weights kept in their stored dtype (issue 30; docs/gpu.md "Weights
// in their stored dtype"), emulated build: cf::gpu::AnalysisModel built from a Hugging Face
// directory through cf::hf::WeightStore (bf16 / f16 / f32 matrices on the "device", placed by lib/hf's
// per-tensor mapping) against the CPU model lib/hf's float32 loader reads from the same directory
// (float32 of the same bf16 / f16 values: exact). Mean loss, log p(target), logits and the captured
// attention probabilities agree to float32 round-off; the staging buffer's size changes nothing (bit
// for bit); bad directories are refused before any device memory is taken.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/functors.hpp"  // train_cases.hpp's AdamW helper
#include "cf/hf/checkpoint.hpp"
#include "stored_fixture.hpp"
#include "train_cases.hpp"

using namespace cf_test_gpu;
using cf::gpu::AnalysisModel;
using cf::gpu::Placement;
using cf::gpu::WeightType;

namespace {

std::string tmp_dir(const std::string& name) {
  const char* t = std::getenv("TMPDIR");
  return (std::filesystem::path(t ? t : "/tmp") / ("cf_test_stored_" + name)).string();
}

// float32 on both sides (the stored values widened exactly), summed in other orders: as the
// analysis model's test against lib/nn (measured <= 2.6e-7 of each tensor's scale there).
constexpr double kTol = 2e-5;

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return rel_diff(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
}

// Every head's probabilities of every (layer, sequence), as on_layer hands them over.
cf::nn::ForwardHooks probs_hooks(std::map<std::pair<int, int>, std::vector<float>>& seen) {
  cf::nn::ForwardHooks h;
  h.on_layer = [&seen](const LayerActivations& la) {
    const std::size_t n = static_cast<std::size_t>(la.n_head) * la.seq_len * la.seq_len;
    seen[{la.layer, la.seq}].assign(la.attn_probs, la.attn_probs + n);
  };
  return h;
}

struct DeviceRun {
  double loss = 0;
  std::vector<float> logprobs, logits;
  std::map<std::pair<int, int>, std::vector<float>> probs;
};

DeviceRun run_device(AnalysisModel& dev, const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y, int B,
                     int T) {
  DeviceRun r;
  const cf::nn::ForwardHooks h = probs_hooks(r.probs);
  r.loss = dev.forward(x.data(), y.data(), B, T, &h, &r.logprobs, &r.logits);
  return r;
}

// The stored-dtype device model of `dir` against lib/hf's float32 model of `dir`: mean loss,
// log-probabilities, logits (cf::nn::forward_logits) and every head's probabilities; returns the
// device run (for bit-equality across staging sizes).
DeviceRun check_against_cpu(const std::string& dir, WeightType want, std::size_t staging) {
  INFO(dir << ", staging buffer of " << staging << " bytes");
  const Model<float> cpu = cf::hf::load_hf_model(dir);
  AnalysisModel dev(Placement::Emulated, dir, cf::gpu::default_context(), staging);
  CHECK(dev.weight_type() == want);
  CHECK(dev.config().vocab_size == cpu.config.vocab_size);
  const int B = 2, T = std::min(16, cpu.config.block_size);
  std::vector<std::int32_t> x, y;
  batch(cpu.config, B, T, 31, x, y);
  std::map<std::pair<int, int>, std::vector<float>> probs_cpu;
  const cf::nn::ForwardHooks h = probs_hooks(probs_cpu);
  Workspace<float> ws;
  std::vector<float> lp_cpu;
  const float loss_cpu = forward_backward<float>(cpu, x.data(), y.data(), B, T, nullptr, ws, &h, &lp_cpu);
  DeviceRun d = run_device(dev, x, y, B, T);
  CHECK(std::abs(d.loss - loss_cpu) < kTol * std::abs(loss_cpu));
  CHECK(rel(d.logprobs, lp_cpu) < kTol);
  const int V = cpu.config.vocab_size;
  for (int b = 0; b < B; ++b) {
    const Eigen::MatrixXf want_logits =
        forward_logits(cpu, std::vector<std::int32_t>(x.begin() + b * T, x.begin() + (b + 1) * T));
    std::vector<float> w(static_cast<std::size_t>(T) * V);
    for (int t = 0; t < T; ++t)
      for (int v = 0; v < V; ++v) w[static_cast<std::size_t>(t) * V + v] = want_logits(t, v);
    const std::vector<float> got(d.logits.begin() + static_cast<std::ptrdiff_t>(w.size()) * b,
                                 d.logits.begin() + static_cast<std::ptrdiff_t>(w.size()) * (b + 1));
    CHECK(rel(got, w) < kTol);
  }
  REQUIRE(d.probs.size() == probs_cpu.size());
  for (const auto& [key, p] : probs_cpu) {
    INFO("layer " << key.first << ", sequence " << key.second);
    CHECK(rel(d.probs.at(key), p) < kTol);
  }
  return d;
}

std::string all(const std::string& dtype, const std::string&) { return dtype; }

// `dir` as it is (its own dtype `own`), in bf16 over 3 shards at three staging sizes (4 bytes: one
// element per chunk, 100 bytes: chunks across rows, 16 MiB: whole tensors; bit-equal results), in
// f16 over 2 shards, and with only the MLP matrices in bf16 (mixed dtypes: float32 on the device).
void check_directory(const std::string& dir, WeightType own, const std::string& name) {
  check_against_cpu(dir, own, std::size_t{16} << 20);
  const std::string bf = tmp_dir(name + "_bf16"), hf16 = tmp_dir(name + "_f16"), mixed = tmp_dir(name + "_mixed");
  cf_test_stored::convert(
      dir, bf, [](const std::string& n) { return all("BF16", n); }, 3);
  const DeviceRun whole = check_against_cpu(bf, WeightType::BF16, std::size_t{16} << 20);
  for (std::size_t staging : {std::size_t{4}, std::size_t{100}}) {
    const DeviceRun part = check_against_cpu(bf, WeightType::BF16, staging);
    CHECK(part.logits == whole.logits);
  }
  cf_test_stored::convert(
      dir, hf16, [](const std::string& n) { return all("F16", n); }, 2);
  check_against_cpu(hf16, WeightType::F16, std::size_t{16} << 20);
  cf_test_stored::convert(
      dir, mixed, [](const std::string& n) { return n.find("mlp") != std::string::npos ? "BF16" : "F32"; }, 2);
  check_against_cpu(mixed, WeightType::F32, std::size_t{16} << 20);
  for (const std::string& d : {bf, hf16, mixed}) std::filesystem::remove_all(d);
}

// A GPT-2-layout model (learned positions, LayerNorm, GELU tanh) exported by lib/hf as F32.
std::string exported_gpt2(bool tied, const std::string& name) {
  ModelConfig c = small("full,full", PosKind::Learned, NormKind::LayerNorm, 24, 3);
  c.arch.tied_head = tied;
  const Model<float> m = init_model<float>(c, tied ? 41 : 43);
  const std::string dir = tmp_dir(name + (tied ? "_gpt2_tied" : "_gpt2_untied"));
  std::filesystem::remove_all(dir);
  cf::hf::export_gpt2(m, dir);
  return dir;
}

}  // namespace

TEST_CASE(
    "gpu analysis model with stored-dtype weights (emulated) = lib/hf float32 model: exported gpt2 in f32, bf16 "
    "shards, f16 and mixed dtypes, any staging size",
    "[gpu][emu][analysis][stored]") {
  for (bool tied : {true, false}) {
    INFO((tied ? "tied head" : "untied head"));
    const std::string dir = exported_gpt2(tied, "exported");
    check_directory(dir, WeightType::F32, tied ? "tied" : "untied");
    std::filesystem::remove_all(dir);
  }
}

// One tests/hf fixture (CTest runs this case per family with CF_STORED_FIXTURE set): the directory
// as stored, and its bf16 / f16 / mixed copies. The fixtures are made with torch; without one the
// case exits 77, which CTest reports as skipped.
TEST_CASE("gpu analysis model with stored-dtype weights (emulated) = lib/hf float32 model on a tests/hf fixture",
          "[fixture]") {
  const char* dir = std::getenv("CF_STORED_FIXTURE");
  REQUIRE(dir != nullptr);
  if (!std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    std::printf("skipped: no fixture '%s' (tests/hf makes it with torch)\n", dir);
    std::exit(77);
  }
  const cf::hf::WeightStore ws(dir);
  const cf::hf::Dtype d = ws.tensors().front().dtype;
  const WeightType own = d == cf::hf::Dtype::BF16  ? WeightType::BF16
                         : d == cf::hf::Dtype::F16 ? WeightType::F16
                                                   : WeightType::F32;
  check_directory(dir, own, std::filesystem::path(dir).filename().string());
}

TEST_CASE(
    "gpu analysis model with stored-dtype weights refuses a missing tensor, a wrong shape and an integer dtype "
    "naming the tensor",
    "[gpu][emu][analysis][stored]") {
  const std::string dir = exported_gpt2(true, "refusals"), bad = tmp_dir("refusals_bad");
  const auto bf16 = [](const std::string&) { return std::string("BF16"); };
  cf_test_stored::convert(dir, bad, bf16, 2, [](const std::string& n) { return n != "transformer.h.1.ln_2.bias"; });
  CHECK_THROWS_WITH(AnalysisModel(Placement::Emulated, bad),
                    Catch::Contains("tensor 'transformer.h.1.ln_2.bias' is missing"));
  cf_test_stored::convert(
      dir, bad, [](const std::string& n) { return n == "transformer.wpe.weight" ? "I32" : "BF16"; }, 2);
  CHECK_THROWS_WITH(AnalysisModel(Placement::Emulated, bad),
                    Catch::Contains("tensor 'transformer.wpe.weight' is I32") && Catch::Contains("--weights float32"));
  cf_test_stored::convert(dir, bad, bf16, 1);
  {  // a config asking for a wider model than the tensors
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(std::filesystem::path(bad) / "config.json"));
    cfg["n_embd"] = 48;
    cfg.erase("causalflow_config");
    std::ofstream(std::filesystem::path(bad) / "config.json") << cfg.dump();
  }
  CHECK_THROWS_WITH(
      AnalysisModel(Placement::Emulated, bad),
      Catch::Contains("tensor 'transformer.wte.weight' has shape [29, 24] but config.json implies [29, 48]"));
  std::filesystem::remove_all(bad);
  std::filesystem::remove_all(dir);
}
