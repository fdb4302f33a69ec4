// Benchmark of the weight-level routing/filtering decomposition (issue 5, acceptance 3):
//  (a) every head of a GPT-2-124M-shaped checkpoint (12 layers x 12 heads, d = 768, d_k = 64):
//      read the attention weights from an HDF5 checkpoint + factorised analysis, target < 1 s;
//  (b) one head at d = 4096, d_k = 128: factorised (2 d_k x 2 d_k core) vs dense (form the
//      d x d kernel, symmetric eigensolver of F + SVD of R, singular values only: the cheapest
//      dense route), as a ratio.
// Usage: bench_spectral [--quick]   (--quick: d = 1024 for (b), for a fast check)
// Not a test: prints a Markdown table; numbers go to docs/benchmarks/spectral.md.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "cf/core/app.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/spectral/checkpoint.hpp"
#include "cf/spectral/decomposition.hpp"
#include "cf/spectral/model.hpp"

using namespace cf::spectral;
using Clock = std::chrono::steady_clock;

namespace {
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

Eigen::MatrixXd randn(Index r, Index c, unsigned seed, double scale) {
  std::mt19937 g(seed);
  std::normal_distribution<double> N(0, scale);
  Eigen::MatrixXd X(r, c);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = N(g);
  return X;
}

// Dense baseline: the d x d kernel, F and R formed, singular values of both by dense solvers.
double dense_baseline(const Eigen::MatrixXd& Wq, const Eigen::MatrixXd& Wk, double* erank_R) {
  const Eigen::MatrixXd W = Wq * Wk.transpose();
  const Parts p = split(W);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(p.F, Eigen::EigenvaluesOnly);
  Eigen::BDCSVD<Eigen::MatrixXd> svd(p.R);
  *erank_R = effective_rank_entropy(svd.singularValues());
  return es.eigenvalues().cwiseAbs().maxCoeff();
}
}  // namespace

int report(bool quick);

// Command line: --help describes the benchmark; unknown options are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{"Benchmark of the weight-level routing/filtering decomposition; prints a Markdown table",
               "bench_spectral"};
  bool quick = false;
  app.add_flag("--quick", quick, "d = 1024 for part (b), for a fast check");
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(quick); });
  return code != 0 ? code : rc;
}

int report(bool quick) {
  // ---- (a) GPT-2-124M-shaped checkpoint -------------------------------------------------------
  const int L = 12, H = 12, D = 768, dh = 64;
  const std::string path = "bench_spectral_gpt2.h5";
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < L; ++l) layers.push_back({{"attn", "full"}, {"d_head", dh}});
  const nlohmann::json cfg = {{"vocab_size", 50257}, {"block_size", 1024}, {"n_layer", L},        {"n_head", H},
                              {"d_model", D},        {"pos", "learned"},   {"norm", "layernorm"}, {"layers", layers}};
  cf::io::write_hdf5_atomic(path, [&](cf::io::File& f) {
    f.set_attr("format", "causalflow-checkpoint");
    f.set_attr("config", cfg.dump());
    auto g = f.create_group("params");
    for (int l = 0; l < L; ++l)
      g.write_matrix("h." + std::to_string(l) + ".attn.c_attn.weight", randn(3 * D, D, 1 + l, 0.02).cast<float>());
  });
  double best_read = 1e9, best_an = 1e9, best_an_noeig = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    const AttentionWeights w = read_attention_weights(path);
    const auto t1 = Clock::now();
    const ModelSpectrum m = analyse_weights(w);
    const auto t2 = Clock::now();
    AnalysisOptions o;
    o.eigenvalues = false;
    const ModelSpectrum m2 = analyse_weights(w, {}, o);
    const auto t3 = Clock::now();
    best_read = std::min(best_read, secs(t0, t1));
    best_an = std::min(best_an, secs(t1, t2));
    best_an_noeig = std::min(best_an_noeig, secs(t2, t3));
    if (rep == 0)
      std::printf("# GPT-2-124M shape: %d heads analysed, mean erank(R) %.3f, median rho %.3f\n", m.summary.heads,
                  m.summary.erank_R_mean, m.summary.rho_median);
    (void)m2;
  }
  std::remove(path.c_str());
  std::printf("\n| task | read (s) | analyse (s) | total (s) |\n|---|---|---|---|\n");
  std::printf("| GPT-2-124M shape, 144 heads, all metrics incl. max Re lambda | %.3f | %.3f | %.3f |\n", best_read,
              best_an, best_read + best_an);
  std::printf("| GPT-2-124M shape, 144 heads, without eigenvalues | %.3f | %.3f | %.3f |\n", best_read, best_an_noeig,
              best_read + best_an_noeig);

  // ---- (b) factorised vs dense, one head -------------------------------------------------------
  std::printf("\n| d | d_k | factorised (s) | dense (s) | ratio | |erank_R diff| |\n|---|---|---|---|---|---|\n");
  for (const int d : quick ? std::vector<int>{1024} : std::vector<int>{1024, 4096}) {
    const int dk = 128;
    const Eigen::MatrixXd Wq = randn(d, dk, 7, 1.0), Wk = randn(d, dk, 8, 1.0);
    AnalysisOptions o;
    o.eigenvalues = false;  // same work on both sides: singular values of F and R
    o.spectrum_M = false;
    double best_f = 1e9, er_f = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = Clock::now();
      const HeadSpectrum h = analyse_factored(Wq, Wk, 1.0, o);
      best_f = std::min(best_f, secs(t0, Clock::now()));
      er_f = h.R.erank_entropy;
    }
    double er_d = 0;
    const auto t0 = Clock::now();
    dense_baseline(Wq, Wk, &er_d);
    const double td = secs(t0, Clock::now());
    std::printf("| %d | %d | %.4f | %.2f | %.0fx | %.2e |\n", d, dk, best_f, td, td / best_f, std::abs(er_f - er_d));
    std::fflush(stdout);
  }
  return 0;
}
