// Benchmark (not a test): tokens/s of one training step (forward + backward + AdamW) of the
// embedded trainer on synthetic tokens, plus peak resident memory against the theoretical
// parameter + gradient + AdamW + activation footprint. Compare with torch_train_step.py (same
// model in PyTorch). Usage: bench_train_step LAYERS D_MODEL HEADS T B VOCAB STEPS [WARMUP]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "cf/nn/context.hpp"
#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/gemm_backend.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/optim.hpp"

int main(int argc, char** argv) {
  // --help prints the usage; options are refused, as are counts that are not positive integers
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: %s LAYERS D_MODEL HEADS T B VOCAB STEPS [WARMUP]\n"
          "Tokens/s of one training step of the embedded trainer (see docs/benchmarks/train.md).\n",
          argv[0]);
      return 0;
    }
    if (a.empty() || a.find_first_not_of("0123456789") != std::string::npos || a.size() > 9 ||
        (std::atoi(a.c_str()) < 1 && i != 8)) {
      std::fprintf(stderr, "bench_train_step: argument %d '%s' is not a positive integer (see --help)\n", i, a.c_str());
      return 2;
    }
  }
  if (argc > 9) {
    std::fprintf(stderr, "bench_train_step: too many arguments (see --help)\n");
    return 2;
  }
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s LAYERS D_MODEL HEADS T B VOCAB STEPS [WARMUP]\n", argv[0]);
    return 2;
  }
  using namespace cf::nn;
  // env CF_TILE_GEMM: tile (default: the tiled attention's packing-free products,
  // cf/nn/detail/tile_gemm.hpp) | eigen (Eigen's products), for side-by-side runs
  const char* tg = std::getenv("CF_TILE_GEMM");
  const std::string tile_gemm = tg ? tg : "tile";
  if (tile_gemm != "tile" && tile_gemm != "eigen") {
    std::fprintf(stderr, "bench_train_step: CF_TILE_GEMM must be tile or eigen, got '%s'\n", tile_gemm.c_str());
    return 2;
  }
  Context ctx = context();
  ctx.tile_products = tile_gemm == "tile";
  set_context(ctx);
  ModelConfig c;
  c.n_layer = std::atoi(argv[1]);
  c.d_model = std::atoi(argv[2]);
  c.n_head = std::atoi(argv[3]);
  const int Tn = std::atoi(argv[4]), B = std::atoi(argv[5]);
  c.vocab_size = std::atoi(argv[6]);
  c.block_size = Tn;
  const int steps = std::atoi(argv[7]), warm = argc > 8 ? std::atoi(argv[8]) : 1;
  c.layers = parse_schedule("full", c.n_layer, LayerConfig{});
  Model<float> m = init_model<float>(c, 1);
  std::vector<float> g(m.params.size());
  AdamWState st;
  Workspace<float> ws;
  std::mt19937 rng(1);
  std::vector<std::int32_t> x(static_cast<std::size_t>(B) * Tn), y(x.size());
  for (auto& t : x) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  for (auto& t : y) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  double secs = 0, best = 1e300;  // best: the fastest step (robust to a VM's drifting speed)
  float loss = 0;
  for (int s = 0; s < warm + steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(g.begin(), g.end(), 0.f);
    loss = forward_backward<float>(m, x.data(), y.data(), B, Tn, &g, ws);
    clip_grad_norm(g, 1.0);
    adamw_step(m.params, g, st, m.layout, 1e-4, AdamWConfig{});
    const auto t1 = std::chrono::steady_clock::now();
    if (s >= warm) {
      secs += std::chrono::duration<double>(t1 - t0).count();
      best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double P = static_cast<double>(m.params.size());
  const double state_mb = 4 * P * 4 / 1048576.0;  // params, grads, m, v in float32
  const double act_mb = static_cast<double>(ws.bytes()) / 1048576.0;
  std::printf(
      "causalflow params=%.0f tokens_per_s=%.1f step_s=%.4f best_tokens_per_s=%.1f loss=%.4f peak_rss_mb=%.1f "
      "theory_state_mb=%.1f "
      "theory_act_mb=%.1f theory_total_mb=%.1f gemm=\"%s\" attention_products=%s\n",
      P, double(B) * Tn * steps / secs, secs / steps, double(B) * Tn / best, loss, ru.ru_maxrss / 1024.0, state_mb,
      act_mb, state_mb + act_mb, cf::nn::gemm_backend_description().c_str(), tile_gemm.c_str());
  return 0;
}
