// Architecture variants of the Hugging Face families (cf::nn::ArchVariant, issue 13): names, JSON
// and validation, kept apart from config.cpp so the trainer's own config code stays as it was.
#include <cmath>

#include "cf/core/alibi.hpp"
#include "cf/core/error.hpp"
#include "cf/nn/config.hpp"

namespace cf::nn {

bool ArchVariant::operator==(const ArchVariant& o) const {
  return mlp == o.mlp && d_ff == o.d_ff && mlp_bias == o.mlp_bias && n_kv_head == o.n_kv_head &&
         parallel_residual == o.parallel_residual && rope_theta == o.rope_theta && rope_dim == o.rope_dim &&
         emb_norm == o.emb_norm && tied_head == o.tied_head && norm_eps == o.norm_eps && alibi == o.alibi;
}

int ffn_dim(const ModelConfig& c) { return c.arch.d_ff > 0 ? c.arch.d_ff : 4 * c.d_model; }
int kv_heads(const ModelConfig& c) { return c.arch.n_kv_head > 0 ? c.arch.n_kv_head : c.n_head; }
std::vector<double> alibi_slopes(const ModelConfig& c) {
  return c.arch.alibi == AlibiSlopes::Hf ? cf::alibi_slopes_hf(c.n_head) : cf::alibi_slopes_simple(c.n_head);
}
int rope_dims(const ModelConfig& c, int l) { return c.arch.rope_dim > 0 ? c.arch.rope_dim : head_dim(c, l); }

std::string mlp_name(MlpKind k) { return std::string(kMlpKinds.name(k)); }

MlpKind parse_mlp_kind(const std::string& s) {
  if (const auto k = kMlpKinds.find(s)) return *k;
  throw InvalidArgument(str("unknown mlp '", s, "' (known: ", kMlpKinds.list(), ")"));
}

nlohmann::json arch_to_json(const ArchVariant& a) {
  nlohmann::json j = {{"mlp", mlp_name(a.mlp)},
                      {"d_ff", a.d_ff},
                      {"mlp_bias", a.mlp_bias},
                      {"n_kv_head", a.n_kv_head},
                      {"parallel_residual", a.parallel_residual},
                      {"rope_theta", a.rope_theta},
                      {"rope_dim", a.rope_dim},
                      {"emb_norm", a.emb_norm},
                      {"tied_head", a.tied_head},
                      {"norm_eps", a.norm_eps}};
  // written only when not the default, so that files without it read as before
  if (a.alibi != AlibiSlopes::Simple) j["alibi_slopes"] = alibi_slopes_name(a.alibi);
  return j;
}

ArchVariant arch_from_json(const nlohmann::json& j) {
  require(j.is_object(), "config key 'arch' must be an object");
  ArchVariant a;
  a.mlp = parse_mlp_kind(j.value("mlp", std::string("gelu-tanh")));
  a.d_ff = j.value("d_ff", 0);
  a.mlp_bias = j.value("mlp_bias", true);
  a.n_kv_head = j.value("n_kv_head", 0);
  a.parallel_residual = j.value("parallel_residual", false);
  a.rope_theta = j.value("rope_theta", 10000.0);
  a.rope_dim = j.value("rope_dim", 0);
  a.emb_norm = j.value("emb_norm", false);
  a.tied_head = j.value("tied_head", true);
  a.norm_eps = j.value("norm_eps", 1e-5);
  const std::string slopes = j.value("alibi_slopes", alibi_slopes_name(AlibiSlopes::Simple));
  const auto recipe = kAlibiSlopes.find(slopes);
  require(recipe.has_value(), "config key 'arch.alibi_slopes' must be '", kAlibiSlopes.list("' or '"), "' (got '",
          slopes, "')");
  a.alibi = *recipe;
  return a;
}

void validate_arch(const ModelConfig& c) {
  const ArchVariant& a = c.arch;
  require(a.d_ff >= 0 && a.d_ff <= (1 << 20), "arch.d_ff must be in [0, 2^20] (got ", a.d_ff, ")");
  require(a.n_kv_head >= 0 && a.n_kv_head <= c.n_head, "arch.n_kv_head must be in [0, n_head = ", c.n_head, "] (got ",
          a.n_kv_head, ")");
  require(c.n_head % kv_heads(c) == 0, "n_head = ", c.n_head, " must be a multiple of n_kv_head = ", kv_heads(c));
  require(std::isfinite(a.rope_theta) && a.rope_theta > 1, "arch.rope_theta must be finite and > 1 (got ", a.rope_theta,
          ")");
  require(std::isfinite(a.norm_eps) && a.norm_eps > 0 && a.norm_eps < 1, "arch.norm_eps must be in (0, 1) (got ",
          a.norm_eps, ")");
  require(!a.emb_norm || c.norm != NormKind::None, "arch.emb_norm needs norm layernorm or rmsnorm");
  for (int l = 0; l < c.n_layer; ++l) {
    const int dh = head_dim(c, l);
    require(a.rope_dim >= 0 && a.rope_dim <= dh && a.rope_dim % 2 == 0,
            "arch.rope_dim must be even and in [0, d_head = ", dh, "] (got ", a.rope_dim, ")");
    const AttnKind k = c.layers[static_cast<std::size_t>(l)].attn;
    if (kv_heads(c) != c.n_head)
      require(k != AttnKind::Sd && k != AttnKind::RunwayDot && k != AttnKind::RunwayBilinear, "layer ", l, ": ",
              attn_name(k), " attention does not support grouped-query attention (n_kv_head = ", kv_heads(c),
              " != n_head = ", c.n_head, ")");
  }
}

}  // namespace cf::nn
