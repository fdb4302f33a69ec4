// Library-level tests of the hostile-user findings of issue 29: typed JSON reads naming file and
// pointer, added-token matching through a trie against the slow definition (every added token
// tried at every byte), exact added-token ids, transformers' single-file precedence, duplicated
// tensors, config sizes checked before allocation, non-finite activations named by layer, checkpoint
// series taken literally and without duplicates, the files of a model folder, the space check.
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/core/model_folder.hpp"
#include "cf/data/gpt2_bpe.hpp"
#include "cf/data/unicode.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/hf/safetensors.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/model/load.hpp"
#include "cf/model/series.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/nn/model.hpp"

using namespace cf;
namespace fs = std::filesystem;

namespace {

// A byte-level tokenizer.json: the 256 byte symbols as the vocabulary (ids 0..255), no merges, so
// that every byte outside an added token is its own id; `added` = (content, id).
std::string byte_tokenizer_json(const std::vector<std::pair<std::string, long long>>& added) {
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"merges", nlohmann::json::array()}};
  const auto& b2u = data::gpt2_byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    data::utf8_append(sym, b2u[b]);
    j["model"]["vocab"][sym] = b;
  }
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["added_tokens"] = nlohmann::json::array();
  for (const auto& [c, id] : added) j["added_tokens"].push_back({{"content", c}, {"id", id}});
  return j.dump();
}

std::vector<float> ramp(std::size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 7);
  return v;
}

}  // namespace

TEST_CASE("json reads: a mistyped field names the file and the JSON pointer", "[hostile][json]") {
  const nlohmann::json doc = nlohmann::json::parse(R"({"model": {"type": 3, "ids": [1, 1.9, 4294967297]}})");
  const JsonRef j(doc, "tokenizer 'x/tokenizer.json'");
  REQUIRE_THROWS_WITH(j.at("model").string_or("type", ""),
                      "tokenizer 'x/tokenizer.json': /model/type must be a string (got 3)");
  REQUIRE(j.at("model").at("ids").at(0).as_integer(0, 10) == 1);
  REQUIRE_THROWS_WITH(j.at("model").at("ids").at(1).as_integer(0, 10),
                      Catch::Contains("/model/ids/1 must be an integer"));
  REQUIRE_THROWS_WITH(j.at("model").at("ids").at(2).as_integer(0, 1 << 24), Catch::Contains("(got 4294967297)"));
  REQUIRE_THROWS_WITH(j.at("vocab"), Catch::Contains("/vocab is missing"));
  REQUIRE_THROWS_AS(parse_json_file_text("", "cfg/config.json"), InvalidArgument);
  REQUIRE_THROWS_WITH(parse_json_file_text("  \n", "cfg/config.json"),
                      "'cfg/config.json' is not valid JSON (the file is empty)");
}

TEST_CASE("hf tokenizer: 20000 added tokens through the trie equal the slow definition", "[hostile][tokenizer]") {
  std::mt19937 rng(29);
  std::vector<std::pair<std::string, long long>> added;
  const std::string alphabet = "abc <>|xy";
  for (int i = 0; i < 20000; ++i) {
    std::string c;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) c += alphabet[rng() % alphabet.size()];
    added.emplace_back("<" + c, 256 + i);  // every token starts with '<': plain bytes remain between them
  }
  fs::remove_all("hostile_tok");
  fs::create_directories("hostile_tok");
  write_file_atomic("hostile_tok/tokenizer.json", byte_tokenizer_json(added));
  const auto tok = hf::HfTokenizer::load("hostile_tok");
  std::string text;
  for (int i = 0; i < 3000; ++i) text += alphabet[rng() % alphabet.size()];
  // the slow definition: at each byte, the longest added token (the last one listed wins a tie, as
  // a JSON map of content -> id keeps the last); else the byte's own id
  std::map<std::string, long long> by_content;
  for (const auto& [c, id] : added) by_content[c] = id;
  std::vector<std::int32_t> want;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t best = 0;
    long long id = -1;
    for (const auto& [c, cid] : by_content)
      if (c.size() > best && text.compare(i, c.size(), c) == 0) {
        best = c.size();
        id = cid;
      }
    if (best > 0) {
      want.push_back(static_cast<std::int32_t>(id));
      i += best;
    } else {
      want.push_back(static_cast<unsigned char>(text[i]));
      ++i;
    }
  }
  const std::vector<std::int32_t> got = tok->encode(text);
  REQUIRE(got.size() == want.size());
  REQUIRE(got == want);
  REQUIRE(std::count_if(want.begin(), want.end(), [](std::int32_t x) { return x >= 256; }) > 50);
}

TEST_CASE("hf tokenizer: added-token ids are exact integers, fields typed", "[hostile][tokenizer]") {
  fs::remove_all("hostile_tok_ids");  // a link left by an earlier run would be written through
  fs::create_directories("hostile_tok_ids");
  write_file_atomic("hostile_tok_ids/tokenizer.json", byte_tokenizer_json({{"<a>", 4294967297LL}}));
  REQUIRE_THROWS_WITH(hf::HfTokenizer::load("hostile_tok_ids"),
                      Catch::Contains("/added_tokens/0/id must be an integer in [0, 16777215] (got 4294967297)"));
  nlohmann::json j = nlohmann::json::parse(byte_tokenizer_json({}));
  j["added_tokens"] = {{{"content", "<a>"}, {"id", 1.9}}};
  write_file_atomic("hostile_tok_ids/tokenizer.json", j.dump());
  REQUIRE_THROWS_WITH(hf::HfTokenizer::load("hostile_tok_ids"),
                      Catch::Contains("/added_tokens/0/id must be an integer"));
  j["added_tokens"] = nlohmann::json::array();
  j["pre_tokenizer"]["add_prefix_space"] = "yes";
  write_file_atomic("hostile_tok_ids/tokenizer.json", j.dump());
  REQUIRE_THROWS_WITH(hf::HfTokenizer::load("hostile_tok_ids"),
                      Catch::Contains("hostile_tok_ids/tokenizer.json': /pre_tokenizer/add_prefix_space must be true "
                                      "or false (got \"yes\")"));
  // a dangling tokenizer.json link is refused, not replaced by bytes
  fs::remove("hostile_tok_ids/tokenizer.json");
  fs::create_symlink("no_such_tokenizer.json", "hostile_tok_ids/tokenizer.json");
  REQUIRE_THROWS_WITH(hf::folder_tokenizer("hostile_tok_ids"), Catch::Contains("which does not exist"));
}

TEST_CASE("hf safetensors: the single file wins over an index, a tensor in two shards is duplicated",
          "[hostile][safetensors]") {
  const auto a = ramp(4), b = ramp(4, 1.0f);
  fs::remove_all("hostile_st");
  fs::create_directories("hostile_st");
  hf::write_safetensors("hostile_st/model.safetensors", {{"w", {4}, a.data()}}, {});
  hf::write_safetensors("hostile_st/s1.safetensors", {{"w", {4}, b.data()}}, {});
  write_file_atomic("hostile_st/model.safetensors.index.json", R"({"weight_map": {"w": "s1.safetensors"}})");
  REQUIRE(hf::TensorStore("hostile_st").read("w", {4}) == a);  // transformers reads the single file
  fs::remove("hostile_st/model.safetensors");
  REQUIRE(hf::TensorStore("hostile_st").read("w", {4}) == b);
  hf::write_safetensors("hostile_st/weights.bin", {{"w", {4}, a.data()}, {"v", {4}, a.data()}}, {});
  write_file_atomic("hostile_st/model.safetensors.index.json",
                    R"({"weight_map": {"w": "s1.safetensors", "v": "weights.bin"}})");
  REQUIRE_THROWS_WITH(hf::TensorStore("hostile_st"), Catch::Contains("tensor 'w' is duplicated") &&
                                                         Catch::Contains("s1.safetensors") &&
                                                         Catch::Contains("weights.bin"));
  // every file the loader reads or probes is an input of the output checks
  const auto inputs = model_folder_inputs("hostile_st");
  for (const char* f : {"weights.bin", "s1.safetensors", "model.safetensors", "config.json", "tokenizer.json"})
    REQUIRE(std::find(inputs.begin(), inputs.end(), (fs::path("hostile_st") / f).string()) != inputs.end());
}

TEST_CASE("hf config: sizes far beyond the tensors are refused before allocation (gpt2 2 layers)",
          "[hostile][config]") {
  fs::remove_all("hostile_cfg");
  fs::create_directories("hostile_cfg");
  const auto w = ramp(16 * 8);
  hf::write_safetensors("hostile_cfg/model.safetensors", {{"wte.weight", {16, 8}, w.data()}}, {});
  write_file_atomic("hostile_cfg/config.json", R"({"model_type": "gpt2", "vocab_size": 1000000, "n_embd": 65536,
      "n_layer": 200, "n_head": 64, "n_positions": 1024})");
  REQUIRE_THROWS_WITH(hf::load_hf_model("hostile_cfg"),
                      Catch::Contains("tensor 'wte.weight' has 2 dimensions [16, 8] but config.json says "
                                      "[vocab_size, d_model] = [1000000, 65536]"));
  write_file_atomic("hostile_cfg/config.json", R"({"model_type": "gpt2", "vocab_size": 16, "n_embd": 8,
      "n_layer": 256, "n_inner": 1000000, "n_head": 2, "n_positions": 65536})");
  REQUIRE_THROWS_AS(hf::load_hf_model("hostile_cfg"), InvalidArgument);
  REQUIRE_THROWS_WITH(hf::load_hf_model("hostile_cfg"), Catch::Contains("but its safetensors hold only 128 values"));
  write_file_atomic("hostile_cfg/config.json", "");
  REQUIRE_THROWS_WITH(cf::model::load_model("hostile_cfg"),
                      Catch::Contains("config.json' is not valid JSON (the file is empty)"));
  write_file_atomic("hostile_cfg/config.json", R"({"model_type": "gpt2", "vocab_size": 16, "n_embd": 8, "n_layer": 1,
      "n_head": 2, "n_positions": 8})");
  REQUIRE_THROWS_WITH(cf::model::load_model("hostile_cfg/model.safetensors"),
                      Catch::Contains("is a file of the Hugging Face folder 'hostile_cfg'") &&
                          Catch::Contains("--checkpoint 'hostile_cfg'"));
}

TEST_CASE("forward pass: finite weights that overflow are named by layer (2 layers, d 16)", "[hostile][nn]") {
  nn::ModelConfig c;
  c.vocab_size = 32;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.layers.assign(2, nn::LayerConfig{});
  const std::vector<std::int32_t> tok = {1, 2, 3, 4, 5, 6}, tgt = {2, 3, 4, 5, 6, 7};
  nn::Workspace<float> ws;
  {
    nn::Model<float> m = nn::init_model<float>(c, 1);
    REQUIRE(std::isfinite(nn::forward_backward<float>(m, tok.data(), tgt.data(), 1, 6, nullptr, ws)));
    // both residual branches of block 1 add 3e38 (finite): 3e38 + 3e38 overflows float
    for (const char* name : {"h.1.attn.c_proj.bias", "h.1.mlp.c_proj.bias"}) {
      const auto& p = m.layout.find(name);
      std::fill(m.params.begin() + p.offset, m.params.begin() + p.offset + p.size, 3e38f);
    }
    REQUIRE_THROWS_AS(nn::forward_backward<float>(m, tok.data(), tgt.data(), 1, 6, nullptr, ws), InvalidArgument);
    REQUIRE_THROWS_WITH(nn::forward_backward<float>(m, tok.data(), tgt.data(), 1, 6, nullptr, ws),
                        Catch::Contains("residual stream after layer 1 holds a non-finite value"));
    nn::Workspace<float> trainer_ws;  // the trainer's own NaN stop: no throw, a non-finite loss
    trainer_ws.set_finite_check(false);
    REQUIRE(!std::isfinite(nn::forward_backward<float>(m, tok.data(), tgt.data(), 1, 6, nullptr, trainer_ws)));
  }
  {
    nn::Model<float> m = nn::init_model<float>(c, 1);
    const auto& p = m.layout.find("wte.weight");
    std::fill(m.params.begin() + p.offset, m.params.begin() + p.offset + p.size, 3e38f);
    const auto& q = m.layout.find("wpe.weight");
    std::fill(m.params.begin() + q.offset, m.params.begin() + q.offset + q.size, 3e38f);
    REQUIRE_THROWS_WITH(nn::forward_backward<float>(m, tok.data(), tgt.data(), 1, 6, nullptr, ws),
                        Catch::Contains("after the embedding"));
  }
}

TEST_CASE("checkpoint series: existing names are literal, one file named twice is refused", "[hostile][series]") {
  fs::remove_all("hostile_series");
  fs::create_directories("hostile_series");
  std::ofstream("hostile_series/run[1].h5") << "x";
  std::ofstream("hostile_series/a,b.h5") << "x";
  const auto one = model::expand_checkpoints({"hostile_series/run[1].h5"});
  REQUIRE(one.size() == 1);
  REQUIRE(one[0].path == "hostile_series/run[1].h5");
  REQUIRE(model::expand_checkpoints({"hostile_series/a,b.h5"}).at(0).path == "hostile_series/a,b.h5");
  REQUIRE_THROWS_WITH(model::expand_checkpoints({"hostile_series/a,b.h5,./hostile_series/a,b.h5"}),
                      Catch::Contains("--checkpoint names the file"));
  std::ofstream("hostile_series/x.h5") << "x";
  REQUIRE_THROWS_WITH(model::expand_checkpoints({"hostile_series/x.h5,./hostile_series/x.h5"}),
                      Catch::Contains("twice ('hostile_series/x.h5' and './hostile_series/x.h5')"));
}

TEST_CASE("space check: an estimate above ulimit -f is refused naming it", "[hostile][space]") {
  struct rlimit old;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit lim = old;
  lim.rlim_cur = 1 << 20;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  CHECK_NOTHROW(require_space_for("hostile_space.h5", 1000, "the capture"));
  CHECK_THROWS_WITH(require_space_for("hostile_space.h5", 270'000'000'000ULL, "the capture"),
                    Catch::Contains("the capture needs about 270 GB but"));
  ::setrlimit(RLIMIT_FSIZE, &old);
  CHECK_THROWS_WITH(require_space_for("hostile_space.h5", ~0ULL, "the capture"),
                    Catch::Contains("free"));  // more than any file system holds
}
