// Benchmark (issue 11 acceptance 3): probe evaluation throughput (items/s) of boundary copy on a
// 4-layer, 256-wide model against plain forward passes over the same tokens with the same batch
// (nn::forward_backward with no target and no gradient), measured side by side in one run,
// alternating, best of --repeats. The probe adds the reading of K candidate probabilities at the
// scored positions and the closure of the model's mask schedule. Target: ratio <= 1.2.
// Usage: bench_probe [--rows N] [--seq-len T] [--batch B] [--repeats R] [--attn NAME] [--threads N]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cf/nn/model.hpp"
#include "cf/probe/evaluate.hpp"

using namespace cf;

int main(int argc, char** argv) {
  int rows = 64, T = 256, batch = 8, repeats = 3, threads = 0;
  std::string attn = "se-bridge";
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() {
      return i + 1 < argc ? argv[++i] : (std::fprintf(stderr, "missing value\n"), std::exit(2), argv[0]);
    };
    if (!std::strcmp(argv[i], "--rows"))
      rows = std::atoi(next());
    else if (!std::strcmp(argv[i], "--seq-len"))
      T = std::atoi(next());
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoi(next());
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(next());
    else if (!std::strcmp(argv[i], "--attn"))
      attn = next();
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--help")) {
      std::printf(
          "usage: bench_probe [--rows N] [--seq-len T] [--batch B] [--repeats R] [--attn NAME] [--threads N]\n");
      return 0;
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (rows < 1 || T < 8 || batch < 1 || repeats < 1) {
    std::fprintf(stderr, "--rows, --batch, --repeats must be >= 1 and --seq-len >= 8\n");
    return 2;
  }
  if (threads > 0) omp_set_num_threads(threads);
  nn::ModelConfig c;
  c.vocab_size = 256;
  c.block_size = T;
  c.n_layer = 4;
  c.n_head = 4;
  c.d_model = 256;
  nn::LayerConfig lc;
  lc.b = 16;
  lc.w = 16;
  lc.e = 8;
  c.layers = nn::parse_schedule(attn, 4, lc);
  const auto model = nn::init_model<float>(c, 1);
  probe::BoundaryCopySpec s;
  s.K = 8;
  s.b = 16;
  s.seq_len = T;
  for (int k = 0; k < 8; ++k) s.alphabet.push_back(static_cast<data::Token>(65 + k));
  s.vocab_size = 256;
  const auto split = probe::generate_boundary_copy(s, rows, 0);
  std::int64_t readouts = 0;
  for (auto m : split.mask) readouts += m;

  double best_probe = 1e30, best_fwd = 1e30;
  std::size_t sink = 0;
  nn::Workspace<float> ws;
  std::vector<std::int32_t> x, y;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const auto ro = probe::evaluate_boundary_copy(model, s, split, batch, 0);
    auto t1 = std::chrono::steady_clock::now();
    sink += ro.size();
    best_probe = std::min(best_probe, std::chrono::duration<double>(t1 - t0).count());
    t0 = std::chrono::steady_clock::now();
    for (int r0 = 0; r0 < rows; r0 += batch) {
      const int B = std::min(batch, rows - r0);
      x.resize(static_cast<std::size_t>(B) * T);
      y.assign(x.size(), -1);
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) x[b * T + t] = split.tokens[static_cast<std::size_t>((r0 + b) * (T + 1) + t)];
      nn::forward_backward<float>(model, x.data(), y.data(), B, T, nullptr, ws);
    }
    t1 = std::chrono::steady_clock::now();
    best_fwd = std::min(best_fwd, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("model 4 x 256 (%s, b = 16), %d rows x %d tokens, batch %d, %lld readouts, best of %d, %d threads\n",
              attn.c_str(), rows, T, batch, (long long)readouts, repeats, omp_get_max_threads());
  std::printf("probe evaluation : %.3f s  %.1f items/s  %.0f readouts/s\n", best_probe, rows / best_probe,
              readouts / best_probe);
  std::printf("plain forward    : %.3f s  %.1f items/s\n", best_fwd, rows / best_fwd);
  std::printf("ratio probe / forward = %.3f (target <= 1.2)  [%zu]\n", best_probe / best_fwd, sink % 2);
  return 0;
}
