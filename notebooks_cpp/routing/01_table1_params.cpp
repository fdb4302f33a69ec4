// Routing/filtering (Jamil & Kapadia) (routing and filtering), Table 1 "Model parameters" row, from the
// trainer's own parameter layout (cf::nn::make_layout, the tensors a checkpoint holds).
// Published: Standard 124,412,160 | S–D + LN 124,513,680 | S–D without LN 124,475,280.
// The same numbers are asserted in tests/nn/test_training.cpp. Reading of the table (docs/trainer.md):
// GPT-2 small without qkv bias; the S–D columns also drop the attention output bias.
#include <cstdio>

#include "cf/core/app.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/params.hpp"

using namespace cf::nn;

int report() {
  struct Row {
    const char* name;
    ModelConfig c;
    long long published;
  };
  ModelConfig sd = gpt2_small_config("sd", /*qkv_bias=*/false);
  sd.proj_bias = false;
  ModelConfig sd_noln = sd;
  sd_noln.norm = NormKind::None;
  const Row rows[] = {{"Standard", gpt2_small_config("full", /*qkv_bias=*/false), 124412160LL},
                      {"S-D + LN", sd, 124513680LL},
                      {"S-D without LN", sd_noln, 124475280LL}};
  std::printf(
      "Routing/filtering (Jamil & Kapadia) Table 1: parameters of the GPT-2-small-shaped models (12 x 768, 12 heads, "
      "vocab 50,257)\n\n");
  std::printf("| model | causalflow layout | param_count | published | match |\n|---|---|---|---|---|\n");
  int bad = 0;
  for (const Row& r : rows) {
    const long long layout = static_cast<long long>(make_layout(r.c).total), count = param_count(r.c);
    const bool ok = layout == r.published && count == r.published;
    bad += !ok;
    std::printf("| %s | %lld | %lld | %lld | %s |\n", r.name, layout, count, r.published, ok ? "yes" : "NO");
  }
  std::printf(
      "\nS-D adds H (d_model + 1) = %d damping parameters per layer; dropping LayerNorm removes "
      "4 d_model per layer + 2 d_model = %d in all.\n",
      12 * (768 + 1), 4 * 768 * 12 + 2 * 768);
  return bad ? 1 : 0;
}

// Command line: --help describes the report; unknown options and arguments are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{
      "Notebook: Routing/filtering (Jamil & Kapadia) Table 1 parameter counts (exit 1 unless both reproduce the "
      "published row)",
      "nb_routing_01_table1_params"};
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(); });
  return code != 0 ? code : rc;
}
