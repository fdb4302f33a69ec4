// Runway (Lee & Clark) (runway cascades), Theorem 3.3 on trained models: exact Jacobian block
// norms ||d h_d(L+r) / d h_s(L)|| of a standard (full attention) and a runway-rewired (runway-dot,
// Eqs. 8-14) model trained on the Brown corpus (bytes), against the bound
// C^r [(I + A(L+r-1)) ... (I + A(L))]_ds built from the models' own head-mean attention: the smallest
// constant C*, the one-layer constants C_1(l) (C* <= max C_1 must hold; blocks outside the mask
// must be exactly zero), Spearman(J, B) off the diagonal and on it, the tightness distribution, and
// the share of pairs where the direct-path gate (runway) term exceeds the self term.
// Heat maps measured vs bound per model.
//   nb_runway_01_jacobian_vs_bound [--full] [--out-dir DIR]
// quick (CTest): 3 layers x 32 wide, 150 steps, n = 24; full: 4 x 32, 500 steps, n = 32.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cf/core/plot.hpp"
#include "cf/influence/jacobian_analysis.hpp"
#include "cf/influence/jacobian_report.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/nn/trainer.hpp"
#include "cf/notebook/cli.hpp"

using namespace cf;

namespace {

// the jacobian tool's heat map: log10 colour bar naming the quantity, the non-causal triangle grey
void heatmap(const Eigen::MatrixXd& m, const std::string& title, const std::string& quantity, const std::string& path) {
  plot::save(influence::log10_lower_heatmap(m, title, quantity), path);
}

int report(const notebook::Options& opt) {
  const std::string& out_dir = opt.out;
  const bool full = opt.full();
  const auto t0 = std::chrono::steady_clock::now();
  const nn::TrainData data = nn::load_corpus_bytes("brown", 0.05);
  const int n = full ? 32 : 24;
  int failures = 0;
  std::printf("Runway (Lee & Clark) Theorem 3.3 on trained Brown byte models (%s mode), n = %d, L = 0, r = n_layer\n\n",
              full ? "full" : "quick", n);
  std::printf(
      "| model | norm | C* | max C_1 | C* <= max C_1 | zeros outside mask | Spearman off-diag | Spearman diag | "
      "tightness p10 / median | gate > self share |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string attn : {"full", "runway-dot"}) {
    nn::ModelConfig c;
    c.vocab_size = 256;
    c.block_size = full ? 128 : 64;
    c.n_layer = full ? 4 : 3;
    c.n_head = 4;
    c.d_model = 32;
    c.pos = nn::PosKind::Learned;
    c.layers = nn::parse_schedule(attn, c.n_layer, nn::LayerConfig{});
    nn::TrainConfig tc;
    tc.out_dir = out_dir + "/" + attn;
    tc.max_steps = full ? 500 : 150;
    tc.batch = 8;
    tc.seq_len = c.block_size;
    tc.lr = 2e-3;
    tc.warmup = full ? 50 : 10;
    tc.eval_interval = tc.max_steps;
    tc.ckpt_interval = tc.max_steps;
    nn::train(c, tc, data, "", nullptr, nullptr);
    const nn::Model<float> model = cf::model::load_model(tc.out_dir + "/last.h5");
    const std::vector<std::int32_t> w(data.val.begin() + 1000, data.val.begin() + 1000 + n);
    const influence::JacobianAnalysis a = influence::analyse_jacobian(model, w, 0, c.n_layer);
    long nonzero = 0, outside = 0;
    for (const auto& o : a.one_layer_frobenius) nonzero += o.outside_mask_nonzero, outside += o.outside_mask_pairs;
    for (const auto* b : {&a.frobenius, &a.spectral}) {
      const bool ok = b->c_star_within_c1 && b->zero_bound_nonzero_j == 0 && nonzero == 0;
      if (!ok) ++failures;
      std::printf("| %s | %s | %.4g | %.4g | %s | %ld of %ld nonzero | %.4f | %.4f | %.3g / %.3g | %.4f |\n",
                  attn.c_str(), b == &a.frobenius ? "Frobenius" : "spectral", b->c_star, b->c1_max, ok ? "yes" : "NO",
                  nonzero, outside, b->spearman_offdiag, b->spearman_diag, b->tightness.p10, b->tightness.median,
                  b->gate_share);
    }
    std::printf("|  | C_1(l) Frobenius |");
    for (const auto& o : a.one_layer_frobenius) std::printf(" %.4g", o.c1);
    std::printf(" | | | | | | | |\n");
    heatmap(a.J.frobenius,
            "Runway (Lee & Clark): measured Jacobian norms ||J_ds||_F, J_ds = d h_d(r) / d h_s(0), " + attn,
            "||J_ds||_F", out_dir + "/runway_" + attn + "_measured.svg");
    heatmap(a.bound.bound * std::pow(a.frobenius.c_star, a.span),
            "Runway (Lee & Clark): bound C*^r B_ds (Theorem 3.3), " + attn, "C*^r B_ds",
            out_dir + "/runway_" + attn + "_bound.svg");
    std::printf("|  | cost | %lld VJPs, %lld batched passes, %.1f s | | | | | | | |\n", (long long)a.vjps,
                (long long)a.backward_calls, a.seconds_jacobians);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nfigures: %s/runway_*_{measured,bound}.svg\nrun time: %.1f s\n", out_dir.c_str(), sec);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return notebook::run(
      argc, argv, "nb_runway_01_jacobian_vs_bound",
      "Notebook: Runway (Lee & Clark) Theorem 3.3, exact Jacobian blocks vs the bound on trained models",
      "runway_jacobian_out", report);
}
