// lib/nn's enums read their names from one table each (cf/nn/config.hpp, issue 28): the names
// configs and checkpoints hold, the aliases the parsers accept, and the messages, written out here
// as the parsers printed them before the tables (tests and scripts/check_identical.sh compare tool
// outputs byte for byte).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "cf/core/error.hpp"
#include "cf/nn/config.hpp"

using namespace cf::nn;

TEST_CASE("nn enum names: canonical names and aliases of the attention, position and norm tables", "[nn][enum]") {
  CHECK(attn_name(AttnKind::SeBridge) == "se-bridge");
  CHECK(attn_name(AttnKind::RunwayBilinear) == "runway-bilinear");
  CHECK(parse_attn_kind(" Softmax ") == AttnKind::Full);  // trimmed, case-insensitive
  CHECK(parse_attn_kind("se") == AttnKind::SeBridge);
  CHECK(parse_attn_kind("sebridge") == AttnKind::SeBridge);
  CHECK(parse_attn_kind("s-d") == AttnKind::Sd);
  CHECK(parse_attn_kind("ELU-linear") == AttnKind::Linear);
  CHECK(pos_name(PosKind::Alibi) == "alibi");
  CHECK(parse_pos_kind("RoPE") == PosKind::Rope);
  CHECK(norm_name(NormKind::RMSNorm) == "rmsnorm");
  CHECK(parse_norm_kind("ln") == NormKind::LayerNorm);
  CHECK(mlp_name(MlpKind::GeluTanh) == "gelu-tanh");
  CHECK(parse_mlp_kind("gelu_new") == MlpKind::GeluTanh);
  CHECK(alibi_slopes_name(AlibiSlopes::Hf) == "hf");
  // every built-in name parses back to its value
  for (int k = 0; k <= static_cast<int>(AttnKind::Linear); ++k)
    CHECK(parse_attn_kind(attn_name(static_cast<AttnKind>(k))) == static_cast<AttnKind>(k));
  // the list shown in messages and train --help is the table's names with full's alias
  std::string shown(kAttnNamesShown);
  shown.replace(shown.find("|softmax"), 8, "");
  CHECK(shown == kAttnKinds.list());
}

TEST_CASE("nn enum names: parse errors keep their messages", "[nn][enum]") {
  CHECK_THROWS_WITH(parse_attn_kind("dense"),
                    "unknown attention variant 'dense' (known: full|softmax, block, swa, bridge, pbb, se-bridge, "
                    "runway-dot, runway-bilinear, sd, linear)");
  CHECK_THROWS_WITH(parse_pos_kind("xpos"), "unknown position scheme 'xpos' (known: learned, rope, alibi, none)");
  CHECK_THROWS_WITH(parse_norm_kind("batch"), "unknown normalisation 'batch' (known: layernorm, none, rmsnorm)");
  CHECK_THROWS_WITH(parse_mlp_kind("GELU"), "unknown mlp 'GELU' (known: gelu-tanh, gelu, swiglu)");
  CHECK_THROWS_WITH(arch_from_json(nlohmann::json{{"alibi_slopes", "bloom"}}),
                    "config key 'arch.alibi_slopes' must be 'simple' or 'hf' (got 'bloom')");
  CHECK(arch_from_json(nlohmann::json{{"alibi_slopes", "hf"}}).alibi == AlibiSlopes::Hf);
  CHECK(arch_to_json(ArchVariant{}).count("alibi_slopes") == 0);  // the default is not written
}

TEST_CASE("nn enum names: a layer's fusion is read and written through graph's table", "[nn][enum]") {
  ModelConfig c;
  c.n_layer = 1;
  c.layers = parse_schedule("bridge", 1, LayerConfig{});
  c.layers[0].fusion = cf::graph::Fusion::Union;
  nlohmann::json j = to_json(c);
  CHECK(j["layers"][0]["fusion"] == "union");
  CHECK(config_from_json(j).layers[0].fusion == cf::graph::Fusion::Union);
  j["layers"][0]["fusion"] = "sum";
  CHECK_THROWS_WITH(config_from_json(j), "model config: field 'layers[0].fusion' must be branch or union (got 'sum')");
}
