// The per-tensor mapping of Hugging Face checkpoints onto the causalflow layout (cf/hf/tensor_map.hpp,
// issues 13 and 30), which the float32 loader and the device's stored-dtype loader both apply: for
// every family, the pieces write every element of the layout exactly once (the tied head: none of
// lm_head), and the per-element placement the device runs (TensorPiece::destination) puts each
// stored element where place_float puts it. (The placement itself is checked against torch by the
// tests/hf fixtures' logits and by export -> import identity.)
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cf/hf/config.hpp"
#include "cf/hf/tensor_map.hpp"
#include "cf/nn/params.hpp"

using namespace cf;
using namespace cf::hf;
using json = nlohmann::json;

namespace {

std::vector<json> family_configs() {
  return {json{{"model_type", "gpt2"},
               {"vocab_size", 11},
               {"n_embd", 12},
               {"n_layer", 2},
               {"n_head", 3},
               {"n_positions", 8}},
          json{{"model_type", "gpt2"},
               {"vocab_size", 11},
               {"n_embd", 12},
               {"n_layer", 1},
               {"n_head", 2},
               {"n_positions", 8},
               {"tie_word_embeddings", false}},
          json{{"model_type", "gpt_neox"},
               {"vocab_size", 11},
               {"hidden_size", 16},
               {"num_hidden_layers", 2},
               {"num_attention_heads", 2},
               {"intermediate_size", 24},
               {"rotary_pct", 0.5}},
          json{{"model_type", "bloom"}, {"vocab_size", 11}, {"n_embed", 12}, {"n_layer", 2}, {"n_head", 3}},
          json{{"model_type", "llama"},
               {"vocab_size", 11},
               {"hidden_size", 16},
               {"num_hidden_layers", 2},
               {"num_attention_heads", 4},
               {"num_key_value_heads", 2},
               {"intermediate_size", 20}},
          json{{"model_type", "qwen2"},
               {"vocab_size", 11},
               {"hidden_size", 16},
               {"num_hidden_layers", 1},
               {"num_attention_heads", 4},
               {"num_key_value_heads", 1},
               {"intermediate_size", 20},
               {"tie_word_embeddings", true}}};
}

}  // namespace

TEST_CASE(
    "hf tensor map: every family's pieces cover the layout once, and the per-element placement equals place_float",
    "[hf]") {
  for (const json& j : family_configs()) {
    INFO(j.dump());
    const HfConfig h = parse_hf_config(j, "test");
    const nn::ParamLayout lay = nn::make_layout(h.config);
    const auto pieces = tensor_pieces(h.family, h.config, [](const std::string&) { return true; });
    std::vector<int> writes(static_cast<std::size_t>(lay.total), 0);
    std::vector<float> by_place(writes.size(), 0.f), by_element(writes.size(), 0.f);
    float next = 1;
    for (const TensorPiece& p : pieces) {
      INFO(p.hf << " -> " << p.cf);
      std::vector<float> stored(static_cast<std::size_t>(p.numel()));
      std::iota(stored.begin(), stored.end(), next);  // distinct values: a misplaced one shows
      next += static_cast<float>(stored.size());
      const std::int64_t base = lay.find(p.cf).offset;
      place_float(p, stored.data(), by_place.data() + base);
      const std::vector<std::int64_t> inv = p.op == PieceOp::Rows ? p.inverse_rows() : std::vector<std::int64_t>{};
      for (std::int64_t e = 0; e < p.numel(); ++e) {
        const std::int64_t d = base + p.destination(e, inv);
        REQUIRE(d >= base);
        REQUIRE(d < lay.total);
        by_element[static_cast<std::size_t>(d)] = stored[static_cast<std::size_t>(e)];
        ++writes[static_cast<std::size_t>(d)];
      }
    }
    CHECK(by_element == by_place);
    for (const nn::ParamInfo& t : lay.tensors) {
      INFO(t.name);
      std::int64_t n = 1;
      for (auto s : t.shape) n *= s;
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(writes[static_cast<std::size_t>(t.offset + i)] == 1);
    }
  }
}
