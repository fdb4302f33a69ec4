// Position bias (Herasimchyk et al.), section 6 and Tables 2-5 at small scale: train a small ALiBi
// model and a learned-position model on the Brown corpus (bytes), measure alpha_l, the content
// prior and the influence profile of Eq. 6 on evenly spread windows, and compare the rollout
// variants (a) attention-only, (b) residual-aware, (c) residual-aware + constant-plus-diagonal
// content, and attention flow (f) (Abnar & Zuidema: max-flow on the layered graph of the kernels of
// (b), issue 34) with the measured profile (Spearman, W1/(n-1)). The paper's claim: (b) and (c) track
// the measured profile better than (a). This program reports whatever comes out, with its numbers.
// Figures: one per model with the four curves (docs/influence.md shows the full-mode ones).
//   nb_position_bias_01_rollout_vs_influence [--full] [--out-dir DIR]
// quick (CTest): 4 layers x 64 wide, 150 steps of 8 x 64 tokens, n = 48, 16 windows; full: the same
// model trained 600 steps, n = 64, 64 windows (run time in docs/influence.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cf/core/plot.hpp"
#include "cf/influence/agreement_table.hpp"
#include "cf/influence/influence.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/nn/trainer.hpp"
#include "cf/notebook/cli.hpp"

using namespace cf;

namespace {

int report(const notebook::Options& opt) {
  const std::string& out_dir = opt.out;
  const bool full = opt.full();
  const auto t0 = std::chrono::steady_clock::now();
  const nn::TrainData data = nn::load_corpus_bytes("brown", 0.05);
  const int n = full ? 64 : 48, W = full ? 64 : 16;
  int failures = 0;
  std::printf(
      "Position bias (Herasimchyk et al.) Tables 2-5 at small scale (%s mode): Brown bytes, n = %d, %d windows of "
      "the validation split\n\n",
      full ? "full" : "quick", n, W);
  std::printf(
      "| model | kernels | metric | (a) attention-only | (b) residual-aware | (c) residual + content | (f) attention "
      "flow |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (nn::PosKind pos : {nn::PosKind::Alibi, nn::PosKind::Learned}) {
    nn::ModelConfig c;
    c.vocab_size = 256;
    c.block_size = 64;
    c.n_layer = 4;
    c.n_head = 4;
    c.d_model = 64;
    c.pos = pos;
    c.layers = nn::parse_schedule("full", c.n_layer, nn::LayerConfig{});
    nn::TrainConfig tc;
    tc.out_dir = out_dir + "/" + nn::pos_name(pos);
    tc.max_steps = full ? 600 : 150;
    tc.batch = 8;
    tc.seq_len = c.block_size;
    tc.lr = 2e-3;
    tc.warmup = full ? 50 : 10;
    tc.eval_interval = tc.max_steps;
    tc.ckpt_interval = tc.max_steps;
    const nn::TrainResult tr = nn::train(c, tc, data, "", nullptr, nullptr);
    const nn::Model<float> model = cf::model::load_model(tc.out_dir + "/last.h5");
    const auto w = influence::influence_windows(data.val, n, W);
    const auto infl = influence::measure_influence(model, w.tokens, influence::Target::Probability);
    const auto meas = influence::measure_model(model, w.tokens);
    const std::string name =
        std::string(nn::pos_name(pos)) + " (val loss " + std::to_string(tr.final_val_loss).substr(0, 5) + ")";
    for (auto src : {influence::KernelSource::Alibi, influence::KernelSource::Measured}) {
      if (src == influence::KernelSource::Alibi && pos != nn::PosKind::Alibi) continue;
      const auto ag = influence::rollout_agreement(model, meas, src, infl.profile, false, /*with_flow=*/true);
      for (int metric = 0; metric < 2; ++metric) {
        std::printf("| %s | %s | %s |", name.c_str(), influence::kernel_source_name(src).c_str(),
                    metric == 0 ? "Spearman" : "W1/(n-1)");
        for (const auto& v : ag.variants) {
          if (!v.defined) {
            std::printf(" not defined |");
            continue;
          }
          const double x = metric == 0 ? v.spearman : v.w1;
          if (!std::isfinite(x)) ++failures;
          std::printf(" %.4f |", x);
        }
        std::printf("\n");
      }
      const std::string fig =
          out_dir + "/position_bias_" + nn::pos_name(pos) + "_" + influence::kernel_source_name(src) + ".svg";
      plot::save(
          influence::agreement_plot(ag, infl.profile, std::string("position bias, ") + nn::pos_name(pos) + " model"),
          fig);
    }
    if (std::abs(infl.profile.sum() - 1) > 1e-9) ++failures;
    std::printf("|  | alpha_l | token-mean |");
    for (long l = 0; l < meas.alpha_token_mean.size(); ++l) std::printf(" %.3f", meas.alpha_token_mean(l));
    std::printf(" | | | |\n");
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nfigures: %s/position_bias_*.svg ((a), (b), (c) where defined, (f) flow, measured influence)\n",
              out_dir.c_str());
  std::printf("run time: %.1f s\n", sec);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return notebook::run(argc, argv, "nb_position_bias_01_rollout_vs_influence",
                       "Notebook: Position bias (Herasimchyk et al.) rollout kernels and attention flow vs measured "
                       "influence on trained models",
                       "position_bias_influence_out", report);
}
