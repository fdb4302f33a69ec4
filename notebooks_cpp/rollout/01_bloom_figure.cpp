// Notebook 01 — Position bias (Herasimchyk et al.), figures "bloom" and "bloom_content" (reference figures of the
// paper's public reference code): BLOOM-176B (70 layers, 112 heads, simple ALiBi slopes),
// measured FineWeb-Edu alpha, n = 256.
// Should print: variant (b) p_0 = 0.0203, p_255 = 0.0252, min 0.00253 at 61;
//               variant (c) p_0 = 0.0137, p_255 = 0.0446, min 0.00206 at 49.
// The same numbers are asserted in tests/rollout/test_rollout.cpp ("Published BLOOM-176B ...").
// Writes bloom_rollout.csv (position, attention_only, residual, residual_content) for plotting.
#include <cstdio>

#include "cf/core/app.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

using namespace cf::rollout;

int report() {
  const Preset p = load_preset("bloom");
  const long n = 256;
  AlibiModel m;
  m.slopes = p.slopes;
  const Eigen::VectorXd pa = rollout_last_row_alibi(m, Eigen::VectorXd::Ones(p.layers), n);
  const Eigen::VectorXd pb = rollout_last_row_alibi(m, p.alpha_measured, n);
  m.delta = p.content_delta;
  const Eigen::VectorXd pc = rollout_last_row_alibi(m, p.alpha_measured, n);
  for (auto [name, v] : {std::pair<const char*, const Eigen::VectorXd*>{"(a) attention-only", &pa},
                         {"(b) residual-aware", &pb},
                         {"(c) residual + content", &pc}}) {
    const auto s = summarize(*v);
    std::printf("%-24s p_0 = %.4f  p_255 = %.4f  min %.5f at %ld\n", name, s.first, s.last, s.min, s.argmin);
  }
  if (FILE* f = std::fopen("bloom_rollout.csv", "w")) {
    std::fprintf(f, "position,attention_only,residual,residual_content\n");
    for (long j = 0; j < n; ++j) std::fprintf(f, "%ld,%.10g,%.10g,%.10g\n", j, pa(j), pb(j), pc(j));
    std::fclose(f);
  }
  return 0;
}

// Command line: --help describes the report; unknown options and arguments are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{
      "Notebook: Position bias (Herasimchyk et al.) BLOOM-176B rollout figures (variants b and c); writes "
      "bloom_rollout.csv",
      "nb_rollout_01_bloom_figure"};
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(); });
  return code != 0 ? code : rc;
}
