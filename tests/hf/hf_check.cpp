// Test driver for tests/hf (not a user tool): compares causalflow's forward pass on a Hugging Face
// directory with the torch reference written by hf_reference.py, and compares two checkpoints'
// tensors bit for bit.
//   hf_check logits DIR        exit 0 when logits and next-token loss match DIR/ref_logits.f32, ref_loss.txt
//   hf_check same CK_A CK_B    exit 0 when both load to the same config and bit-identical tensors
//   hf_check bad-files DIR     write DIR/{malformed,truncated,oversized,overlap,wrongdtype,noconfig}: tiny
//                              gpt2 directories whose model.safetensors is broken in one way each
//   hf_check bloom-slopes H    print the ALiBi slopes (one per line, %.17g) of a BLOOM config.json with
//                              n_head = H as lib/hf reads it (tests/hf/alibi_slopes_oracle.py compares
//                              them with Hugging Face's build_alibi_tensor in torch)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include "cf/hf/config.hpp"
#include "cf/hf/safetensors.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/model.hpp"

namespace {

int logits(const std::string& dir) {
  const cf::nn::Model<float> m = cf::model::load_model(dir);
  std::ifstream tf(dir + "/tokens.txt");
  std::vector<std::int32_t> tok{std::istream_iterator<std::int32_t>(tf), std::istream_iterator<std::int32_t>()};
  const int T = static_cast<int>(tok.size()), V = m.config.vocab_size;
  std::vector<float> ref(static_cast<std::size_t>(T) * V);
  std::ifstream rf(dir + "/ref_logits.f32", std::ios::binary);
  rf.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 4));
  if (!rf || T < 2) {
    std::cerr << "cannot read the reference files in " << dir << "\n";
    return 1;
  }
  double ref_loss = 0;
  std::ifstream(dir + "/ref_loss.txt") >> ref_loss;
  const Eigen::MatrixXf lg = cf::nn::forward_logits(m, tok);
  double diff = 0, scale = 0;
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v) {
      diff = std::max(diff, std::abs(double(lg(t, v)) - ref[static_cast<std::size_t>(t) * V + v]));
      scale = std::max(scale, std::abs(double(ref[static_cast<std::size_t>(t) * V + v])));
    }
  std::vector<std::int32_t> in(tok.begin(), tok.end() - 1), tg(tok.begin() + 1, tok.end());
  cf::nn::Workspace<float> ws;
  const double loss = cf::nn::forward_backward<float>(m, in.data(), tg.data(), 1, T - 1, nullptr, ws);
  // float32 round-off: the forward pass is a few hundred float32 operations deep at these sizes;
  // 2e-5 relative to the largest logit is ~150 ulp of headroom above the observed ~1e-6.
  const double tol = 2e-5 * std::max(1.0, scale);
  const double ltol = 2e-5 * std::max(1.0, std::abs(ref_loss));
  std::printf("%s: max |logit diff| %.3g (max |logit| %.3g, tol %.3g); loss %.9f vs torch %.9f (diff %.3g, tol %.3g)\n",
              dir.c_str(), diff, scale, tol, loss, ref_loss, std::abs(loss - ref_loss), ltol);
  const bool ok = diff <= tol && std::abs(loss - ref_loss) <= ltol;
  std::printf("%s\n", ok ? "logits ok" : "logits MISMATCH");
  return ok ? 0 : 1;
}

int same(const std::string& a, const std::string& b) {
  const cf::nn::Model<float> x = cf::model::load_model(a), y = cf::model::load_model(b);
  if (x.layout.total != y.layout.total) {
    std::printf("different sizes %lld vs %lld\n", static_cast<long long>(x.layout.total),
                static_cast<long long>(y.layout.total));
    return 1;
  }
  std::int64_t ndiff = 0;
  for (const auto& t : x.layout.tensors) {
    const auto& u = y.layout.find(t.name);
    if (t.shape != u.shape || std::memcmp(x.params.data() + t.offset, y.params.data() + u.offset,
                                          static_cast<std::size_t>(t.size) * 4) != 0) {
      std::printf("tensor %s differs\n", t.name.c_str());
      ++ndiff;
    }
  }
  std::printf("%zu tensors compared bit for bit, %lld differ\n", x.layout.tensors.size(),
              static_cast<long long>(ndiff));
  return ndiff == 0 ? 0 : 1;
}

void put(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

int bad_files(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg =
      R"({"model_type": "gpt2", "vocab_size": 8, "n_embd": 4, "n_layer": 1, "n_head": 1, "n_positions": 4})";
  std::vector<float> wte(32, 0.5f);
  const std::string good = cf::hf::safetensors_bytes({{"wte.weight", {8, 4}, wte.data()}}, {{"format", "pt"}});
  const std::string hdr = R"({"wte.weight":{"dtype":"F32","shape":[8,4],"data_offsets":[0,128]}})";
  const std::map<std::string, std::string> files = {
      {"malformed", le64(20) + "{\"wte.weight\": [1, 2" + std::string(8, ' ') + std::string(128, '\0')},
      {"truncated", good.substr(0, good.size() - 20)},
      {"oversized", le64(1ULL << 40) + "{}"},
      {"overlap",
       le64(
           std::string(
               R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},"b":{"dtype":"F32","shape":[8],"data_offsets":[16,48]}})")
               .size()) +
           R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},"b":{"dtype":"F32","shape":[8],"data_offsets":[16,48]}})" +
           std::string(48, '\0')},
      {"wrongdtype", le64(std::string(R"({"wte.weight":{"dtype":"Q4","shape":[8,4],"data_offsets":[0,128]}})").size()) +
                         R"({"wte.weight":{"dtype":"Q4","shape":[8,4],"data_offsets":[0,128]}})" +
                         std::string(128, '\0')},
      {"intdtype", le64(std::string(R"({"wte.weight":{"dtype":"I32","shape":[8,4],"data_offsets":[0,128]}})").size()) +
                       R"({"wte.weight":{"dtype":"I32","shape":[8,4],"data_offsets":[0,128]}})" +
                       std::string(128, '\0')},
      {"noconfig", good},
  };
  (void)hdr;
  for (const auto& [name, bytes] : files) {
    fs::create_directories(dir + "/" + name);
    put(dir + "/" + name + "/model.safetensors", bytes);
    if (name != "noconfig") put(dir + "/" + name + "/config.json", cfg);
  }
  // valid weights, a config.json field gpt2 cannot take: n_inner 0 (GPT2MLP's zero-width MLP, not
  // "4 n_embd"), a fractional n_inner, an activation without a causalflow MLP
  const std::map<std::string, std::string> configs = {
      {"inner0", R"("n_inner": 0)"}, {"innerfrac", R"("n_inner": 8.5)"}, {"relu", R"("activation_function": "relu")"}};
  for (const auto& [name, field] : configs) {
    fs::create_directories(dir + "/" + name);
    put(dir + "/" + name + "/model.safetensors", good);
    put(dir + "/" + name + "/config.json", cfg.substr(0, cfg.size() - 1) + ", " + field + "}");
  }
  std::printf("bad files written\n");
  return 0;
}

int bloom_slopes(const std::string& heads) {
  const int H = std::stoi(heads);
  const nlohmann::json cfg = {{"model_type", "bloom"}, {"vocab_size", 16}, {"n_embed", 2 * H},
                              {"n_layer", 1},          {"n_head", H},      {"seq_length", 8}};
  const cf::hf::HfConfig h = cf::hf::parse_hf_config(cfg, "bloom-" + heads);
  for (double m : cf::nn::alibi_slopes(h.config)) std::printf("%.17g\n", m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::strcmp(argv[1], "logits") == 0) return logits(argv[2]);
    if (argc == 4 && std::strcmp(argv[1], "same") == 0) return same(argv[2], argv[3]);
    if (argc == 3 && std::strcmp(argv[1], "bad-files") == 0) return bad_files(argv[2]);
    if (argc == 3 && std::strcmp(argv[1], "bloom-slopes") == 0) return bloom_slopes(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: hf_check logits DIR | same CK_A CK_B | bad-files DIR | bloom-slopes H\n");
  return 2;
}
