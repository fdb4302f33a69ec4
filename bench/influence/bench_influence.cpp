// Benchmark of lib/influence (issue 10, acceptance 3; numbers in docs/benchmarks.md). Not a test.
//  1. influence (Position bias (Herasimchyk et al.) Eq. 6) for W = 64 windows of n = 256 on a 4-layer 256-wide byte
//  model
//     (4 heads) against 64 forward+backward training passes on the same windows (one training
//     forward_backward of the batch of 64 windows); target: within 1.5x.
//  2. exact Jacobian blocks (Runway (Lee & Clark) Theorem 3.3) for n = 128 across the 4 layers (L = 0, r = 4):
//     the number of vector-Jacobian products and batched backward passes it needs, and the cost of
//     one batched pass (B = d_model seeds on a causal prefix) against a training pass of the same
//     shape. Timing all 128 targets takes minutes on a loaded 2-core machine: the passes for a
//     sample of targets are timed and the total is extrapolated from their token counts (the
//     cost of a pass is linear in B * T up to the attention's T^2 term; stated in the output).
// Usage: bench_influence [reps=3] [jacobian_targets=4] [timed_targets=all]  (timed: the first, smallest ones)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>

#include "cf/core/app.hpp"
#include "cf/influence/influence.hpp"
#include "cf/influence/jacobian.hpp"
#include "cf/nn/model.hpp"

using namespace cf;

namespace {

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
struct Timing {
  double wall = 1e300, cpu = 0;
};
template <class F>
void time_into(Timing& t, F&& f) {
  const double c0 = cpu_now();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (wall < t.wall) t.wall = wall, t.cpu = cpu_now() - c0;
}

}  // namespace

int bench(int reps, int jt, int timed) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  nn::ModelConfig c;
  c.vocab_size = 256;
  c.block_size = 256;
  c.n_layer = 4;
  c.n_head = 4;
  c.d_model = 256;
  c.pos = nn::PosKind::Alibi;
  c.layers = nn::parse_schedule("full", c.n_layer, nn::LayerConfig{});
  const nn::Model<float> m = nn::init_model<float>(c, 1);
  std::mt19937 rng(7);
  const int W = 64, n = 256;
  std::vector<std::vector<std::int32_t>> windows(W, std::vector<std::int32_t>(n));
  std::vector<std::int32_t> tok, tgt;
  for (auto& w : windows)
    for (auto& t : w) t = static_cast<std::int32_t>(rng() % 256);
  for (const auto& w : windows) {
    tok.insert(tok.end(), w.begin(), w.end());
    for (int j = 0; j < n; ++j) tgt.push_back(j + 1 < n ? w[j + 1] : static_cast<std::int32_t>(rng() % 256));
  }
  std::printf("bench_influence: 4 layers x 256 wide, 4 heads, ALiBi, byte vocabulary; best of %d (interleaved)\n",
              reps);
  // 1. influence vs training passes on the same windows, interleaved
  Timing ti, tt;
  std::vector<float> grad(m.params.size());
  nn::Workspace<float> ws;
  for (int r = 0; r < reps; ++r) {
    time_into(ti, [&] { influence::measure_influence(m, windows, influence::Target::Probability); });
    time_into(tt, [&] {
      std::fill(grad.begin(), grad.end(), 0.f);
      nn::forward_backward<float>(m, tok.data(), tgt.data(), W, n, &grad, ws);
    });
  }
  std::printf("influence, %d windows of n = %d (one batched pass): %.3f s wall (%.3f s CPU)\n", W, n, ti.wall, ti.cpu);
  std::printf("64 training forward+backward passes on the same windows (batch of 64): %.3f s wall (%.3f s CPU)\n",
              tt.wall, tt.cpu);
  std::printf("ratio influence / training: %.3f wall, %.3f CPU (target <= 1.5)\n\n", ti.wall / tt.wall,
              ti.cpu / tt.cpu);

  // 2. Jacobian blocks n = 128 across 4 layers
  const int nj = 128, C = c.d_model;
  const std::vector<std::int32_t> jw(windows[0].begin(), windows[0].begin() + nj);
  std::int64_t total_tokens = 0;
  for (int d = 0; d < nj; ++d) total_tokens += static_cast<std::int64_t>(C) * (d + 1);
  std::printf(
      "Jacobian blocks, n = %d, L = 0, r = 4: %d VJPs (n x d_model) in %d batched passes of B = %d seeds "
      "(prefix d + 1), %lld token-passes in all\n",
      nj, nj * C, nj, C, static_cast<long long>(total_tokens));
  double sample_wall = 0, sample_tokens = 0;
  for (int k = 0; k < std::min(jt, timed); ++k) {
    const int d = (k + 1) * nj / jt - 1;  // evenly spread targets, the last one is n - 1
    // one batched pass for target d through jacobian_blocks on the prefix (its own cost), and a
    // training pass of the same shape (B = C copies of the prefix, T = d + 1)
    const std::vector<std::int32_t> prefix(jw.begin(), jw.begin() + d + 1);
    Timing tj, tr;
    std::vector<std::int32_t> btok, btgt;
    for (int b = 0; b < C; ++b) {
      btok.insert(btok.end(), prefix.begin(), prefix.end());
      for (int j = 0; j <= d; ++j) btgt.push_back(j < d ? prefix[j + 1] : 0);
    }
    nn::Workspace<float> wj;
    std::vector<float> gj(m.params.size());
    std::vector<float> seed(static_cast<std::size_t>(C) * (d + 1), 0.f), dres;
    for (int b = 0; b < C; ++b) seed[(static_cast<std::size_t>(b) * (d + 1) + d) * C + b] = 1.f;
    nn::GradientSeed<float> gs;
    gs.resid_layer = 4;
    gs.resid = seed.data();
    gs.out_layer = 0;
    gs.dresid = &dres;
    for (int r = 0; r < reps; ++r) {
      time_into(tj, [&] {
        nn::forward_backward<float>(m, btok.data(), btgt.data(), C, d + 1, &gj, wj, nullptr, nullptr, &gs);
      });
      time_into(tr, [&] { nn::forward_backward<float>(m, btok.data(), btgt.data(), C, d + 1, &gj, wj); });
    }
    std::printf(
        "  target d = %3d: batched Jacobian pass (B = %d, T = %d) %.3f s, training pass of the same shape "
        "%.3f s, ratio %.3f\n",
        d, C, d + 1, tj.wall, tr.wall, tj.wall / tr.wall);
    sample_wall += tj.wall;
    sample_tokens += static_cast<double>(C) * (d + 1);
  }
  std::printf("extrapolated total for all %d targets: %.1f s (sampled %.0f token-passes in %.2f s)\n", nj,
              sample_wall / sample_tokens * static_cast<double>(total_tokens), sample_tokens, sample_wall);
  // the library path end to end on a small prefix window, to show it matches the per-pass timing
  Timing tl;
  time_into(tl, [&] { influence::jacobian_blocks(m, std::vector<std::int32_t>(jw.begin(), jw.begin() + 16), 0, 4); });
  std::printf("jacobian_blocks end to end, n = 16 (16 passes, norms included): %.3f s\n", tl.wall);
  return 0;
}

// Command line through CLI11 and cf::app::run like the tools: --help exits 0, unknown options and
// bad numbers exit 2.
int main(int argc, char** argv) {
  CLI::App app{"Benchmark of lib/influence (issue 10); not a test", "bench_influence"};
  int reps = 3, jt = 4, timed = -1;
  app.add_option("reps", reps, "best of this many interleaved runs")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("jacobian_targets", jt, "Jacobian targets")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("timed_targets", timed, "targets timed (the first, smallest ones; default all)")
      ->check(CLI::Range(1, 256));
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = bench(reps, jt, timed < 0 ? jt : std::min(timed, jt)); });
  return code != 0 ? code : rc;
}
