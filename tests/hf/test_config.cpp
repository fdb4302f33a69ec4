// config.json of the supported families (cf/hf/config.hpp): key spellings, variants, refusals,
// and the parameter count of each variant layout against param_count (two independent sums).
#include <catch2/catch.hpp>
#include <chrono>

#include "cf/core/error.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/hf/config.hpp"
#include "cf/nn/params.hpp"

using namespace cf;
using namespace cf::hf;
using nlohmann::json;

TEST_CASE("hf config: BLOOM accepts n_embed | hidden_size and n_head | num_attention_heads", "[hf]") {
  const json a = {{"model_type", "bloom"}, {"vocab_size", 50}, {"n_embed", 32}, {"n_layer", 2}, {"n_head", 4}};
  const json b = {{"model_type", "bloom"},
                  {"vocab_size", 50},
                  {"hidden_size", 32},
                  {"num_hidden_layers", 2},
                  {"num_attention_heads", 4}};
  const auto ca = parse_hf_config(a, "a").config, cb = parse_hf_config(b, "b").config;
  CHECK(nn::to_json(ca) == nn::to_json(cb));
  CHECK(ca.d_model == 32);
  CHECK(ca.pos == nn::PosKind::Alibi);
  CHECK(ca.arch.emb_norm);
  // issue 29: a head count that is not a power of two takes BLOOM's interleaved slopes (it was
  // refused): H = 3, P = 2: 2^(-8/2), 2^(-16/2), then 2^(-4/2) (odd power 1 of the 4-head base)
  const auto c3 =
      parse_hf_config(json{{"model_type", "bloom"}, {"vocab_size", 50}, {"n_embed", 24}, {"n_layer", 2}, {"n_head", 3}},
                      "c")
          .config;
  CHECK(c3.arch.alibi == nn::AlibiSlopes::Hf);
  CHECK(nn::alibi_slopes(c3) == std::vector<double>{0.0625, 0.00390625, 0.25});
  // the recipe travels with the config (checkpoint and capture attribute "config", arch.alibi_slopes)
  CHECK(nn::to_json(c3)["arch"]["alibi_slopes"] == "hf");
  CHECK(nn::alibi_slopes(nn::config_from_json(nn::to_json(c3))) == nn::alibi_slopes(c3));
}

TEST_CASE("hf config: family variants and refusals", "[hf]") {
  const json neox = {{"model_type", "gpt_neox"}, {"vocab_size", 50},         {"hidden_size", 64},
                     {"num_hidden_layers", 2},   {"num_attention_heads", 4}, {"intermediate_size", 128},
                     {"rotary_pct", 0.25}};
  const auto n = parse_hf_config(neox, "neox").config;
  CHECK(n.arch.parallel_residual);
  CHECK(n.arch.rope_dim == 4);
  CHECK(!n.arch.tied_head);
  CHECK(n.arch.mlp == nn::MlpKind::Gelu);
  const json llama = {{"model_type", "llama"},   {"vocab_size", 50},         {"hidden_size", 64},
                      {"num_hidden_layers", 2},  {"num_attention_heads", 8}, {"num_key_value_heads", 2},
                      {"intermediate_size", 96}, {"rope_theta", 500000.0}};
  const auto l = parse_hf_config(llama, "llama").config;
  CHECK(l.norm == nn::NormKind::RMSNorm);
  CHECK(nn::kv_heads(l) == 2);
  CHECK(l.arch.rope_theta == 500000.0);
  CHECK(!l.bias);
  json q = llama;
  q["model_type"] = "qwen2";
  const auto qc = parse_hf_config(q, "qwen2").config;
  CHECK(qc.bias);
  CHECK(!qc.proj_bias);
  json bad = llama;
  bad["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  REQUIRE_THROWS_WITH(parse_hf_config(bad, "x"), Catch::Contains("rope_scaling"));
  REQUIRE_THROWS_WITH(parse_hf_config(json{{"model_type", "t5"}}, "x"), Catch::Contains("model_type 't5'"));
  REQUIRE_THROWS_WITH(parse_hf_config(json{{"model_type", "gpt2"}, {"vocab_size", 5}}, "x"),
                      Catch::Contains("n_embd | hidden_size"));
  bad = llama;
  bad["num_key_value_heads"] = 3;
  REQUIRE_THROWS_WITH(parse_hf_config(bad, "x"), Catch::Contains("multiple of n_kv_head"));
}

TEST_CASE("hf config: layout size equals param_count for every variant", "[hf]") {
  for (const json& j :
       {json{{"model_type", "gpt2"},
             {"vocab_size", 50},
             {"n_embd", 32},
             {"n_layer", 2},
             {"n_head", 4},
             {"n_positions", 16}},
        json{{"model_type", "gpt_neox"},
             {"vocab_size", 50},
             {"hidden_size", 32},
             {"num_hidden_layers", 2},
             {"num_attention_heads", 4},
             {"intermediate_size", 80}},
        json{{"model_type", "bloom"}, {"vocab_size", 50}, {"n_embed", 32}, {"n_layer", 2}, {"n_head", 4}},
        json{{"model_type", "qwen2"},
             {"vocab_size", 50},
             {"hidden_size", 32},
             {"num_hidden_layers", 2},
             {"num_attention_heads", 4},
             {"num_key_value_heads", 1},
             {"intermediate_size", 40},
             {"tie_word_embeddings", true}}}) {
    const auto c = parse_hf_config(j, "x").config;
    INFO(j.dump());
    CHECK(nn::make_layout(c).total == nn::param_count(c));
    CHECK(nn::to_json(nn::config_from_json(nn::to_json(c))) == nn::to_json(c));  // arch survives JSON
  }
}

TEST_CASE("hf export: only the gpt2-expressible architectures", "[hf]") {
  const json g = {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 32},
                  {"n_layer", 2},         {"n_head", 4},      {"n_positions", 16}};
  CHECK(gpt2_export_blocker(parse_hf_config(g, "g").config).empty());
  const json b = {{"model_type", "bloom"}, {"vocab_size", 50}, {"n_embed", 32}, {"n_layer", 2}, {"n_head", 4}};
  CHECK(gpt2_export_blocker(parse_hf_config(b, "b").config).find("alibi") != std::string::npos);
  nn::ModelConfig c = parse_hf_config(g, "g").config;
  c.layers[1].attn = nn::AttnKind::Swa;
  CHECK(gpt2_export_blocker(c).find("layer 1") != std::string::npos);
}

TEST_CASE("hf config: huge layer, head, width and vocabulary counts are refused before anything is sized", "[hf]") {
  // n_layer = 1e8 once allocated gigabytes of layer configs before the [1, 256] check, and
  // 2000000000 was reported as "must be a non-negative integer".
  const auto t0 = std::chrono::steady_clock::now();
  const json gpt2 = {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 32},
                     {"n_layer", 2},         {"n_head", 4},      {"n_positions", 16}};
  REQUIRE_NOTHROW(parse_hf_config(gpt2, "ok"));
  for (const json& bad :
       {json(100000000), json(2000000000), json(1e9), json(0), json(-3), json(257), json(18446744073709551615ULL)}) {
    json j = gpt2;
    j["n_layer"] = bad;
    REQUIRE_THROWS_WITH(parse_hf_config(j, "c"),
                        Catch::Contains("n_layer | num_hidden_layers must be an integer in [1, 256]"));
  }
  json j = gpt2;
  j["n_head"] = 2000000000;
  REQUIRE_THROWS_WITH(parse_hf_config(j, "c"), Catch::Contains("must be an integer in [1, 1024] (got 2000000000)"));
  j = gpt2;
  j["n_embd"] = 1 << 20;
  REQUIRE_THROWS_WITH(parse_hf_config(j, "c"), Catch::Contains("must be an integer in [1, 65536]"));
  j = gpt2;
  j["vocab_size"] = 2000000000;
  REQUIRE_THROWS_WITH(parse_hf_config(j, "c"), Catch::Contains("vocab_size must be an integer in [2, 1000000]"));
  const json llama = {
      {"model_type", "llama"},    {"vocab_size", 50},        {"hidden_size", 32}, {"num_hidden_layers", 1000000000},
      {"num_attention_heads", 4}, {"intermediate_size", 64}, {"head_dim", 16}};
  REQUIRE_THROWS_WITH(parse_hf_config(llama, "l"), Catch::Contains("num_hidden_layers must be an integer in [1, 256]"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}
