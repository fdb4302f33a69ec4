// Benchmark (not a test) of the tiled attention (issue 12): (1) attention-only time of one layer's
// heads, forward + backward, for an attention kind against full attention at the same T, printed
// beside the ratio of admitted scores (lib/graph accounting) — cost should follow the score count;
// (2) a training step of a 4-layer, 256-wide byte model at long T with its peak resident memory
// against the O(T) theory of what the step must hold.
// (3) ELU+1 linear attention heads, forward + backward, in the prefix-sum form or the dense T x T
// oracle form, with the process's peak resident memory (run each form in its own process).
// Usage: bench_long_context attn  KIND T [B=1] [REPS=3]   e.g. attn swa:128 4096
//        bench_long_context train KIND T [B=1] [STEPS=2]  e.g. train swa:128 32768
//        bench_long_context linear prefix|dense T [B=1] [REPS=3]  e.g. linear prefix 16384
//        bench_long_context --help
// KIND: full | swa:W | se-bridge:B[:E] | block:B | bridge:B:W | pbb:B:W
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/nn/context.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_linear.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/attention_tiled.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/optim.hpp"

using namespace cf::nn;

namespace {

const char* kUsage =
    "usage: bench_long_context attn|train KIND T [B] [REPS|STEPS]\n"
    "  attn:  forward+backward time of one layer's heads (H 4, d_head 64) for KIND and for full\n"
    "         attention at length T, and the admitted-score ratio\n"
    "  train: training steps of a 4-layer, 256-wide byte model with KIND at every layer; peak RSS\n"
    "         against the O(T) theory\n"
    "  linear prefix|dense: forward+backward time of H 4 ELU+1 linear heads (d_head 64) at length T,\n"
    "         prefix-sum form or dense T x T form, and peak RSS of the process\n"
    "  KIND: full | swa:W | block:B | bridge:B:W | pbb:B:W | se-bridge:B:E\n"
    "  attn reads CF_SUB_ROWS (rows per group of a partial tile, default 16), CF_TILE_MERGE\n"
    "  (none | adjacent | bridging, default bridging) and CF_TILE_GEMM (tile | eigen, default tile);\n"
    "  kind and full attention repetitions alternate, best of each\n";

LayerConfig parse_kind(const std::string& s) {
  LayerConfig lc;
  const auto c1 = s.find(':');
  lc.attn = parse_attn_kind(s.substr(0, c1));
  std::vector<int> v;
  for (std::size_t p = c1; p != std::string::npos;) {
    const auto q = s.find(':', p + 1);
    v.push_back(std::atoi(s.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1).c_str()));
    p = q;
  }
  if (lc.attn == AttnKind::Swa && !v.empty()) lc.w = v[0];
  if ((lc.attn == AttnKind::Block || lc.attn == AttnKind::SeBridge || lc.attn == AttnKind::Bridge ||
       lc.attn == AttnKind::Pbb) &&
      !v.empty())
    lc.b = v[0];
  if ((lc.attn == AttnKind::Bridge || lc.attn == AttnKind::Pbb) && v.size() > 1) lc.w = v[1];
  if (lc.attn == AttnKind::SeBridge) lc.e = v.size() > 1 ? v[1] : lc.b / 2;
  return lc;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Forward + backward of H heads of B sequences for one attention kind: the buffers, plan and
// transposed keys are made once; run() times one repetition.
struct HeadsBench {
  static constexpr int H = 4, dh = 64, HD = H * dh;
  using AVec = std::vector<float, Eigen::aligned_allocator<float>>;
  int Tn, B;
  detail::TilePlan plan;
  std::int64_t admitted = 0;
  AVec qkv, dqkv, y, dy, lse, obr;
  std::vector<detail::KeysT<float>> keys_t;
  HeadsBench(const LayerConfig& lc, int Tn_, int B_);
  double run();
};

HeadsBench::HeadsBench(const LayerConfig& lc, int Tn_, int B_) : Tn(Tn_), B(B_) {
  // env CF_SUB_ROWS: rows per group of a partial tile (detail::make_tile_plan; default kSubRows)
  // env CF_TILE_GEMM: tile (default: packing-free products, cf/nn/detail/tile_gemm.hpp) | eigen
  const char* gemm_env = std::getenv("CF_TILE_GEMM");
  const std::string gemm_s = gemm_env ? gemm_env : "tile";
  if (gemm_s != "tile" && gemm_s != "eigen")
    throw cf::InvalidArgument("CF_TILE_GEMM must be tile or eigen, got '" + gemm_s + "'");
  Context ctx = context();
  ctx.tile_products = gemm_s == "tile";
  set_context(ctx);
  // env CF_TILE_MERGE: none | adjacent | bridging (detail::TileMerge; default bridging)
  const char* sub = std::getenv("CF_SUB_ROWS");
  const char* merge_env = std::getenv("CF_TILE_MERGE");
  const std::string merge_s = merge_env ? merge_env : "bridging";
  if (merge_s != "none" && merge_s != "adjacent" && merge_s != "bridging")
    throw cf::InvalidArgument("CF_TILE_MERGE must be none, adjacent or bridging, got '" + merge_s + "'");
  const detail::TileMerge merge = merge_s == "none"       ? detail::TileMerge::None
                                  : merge_s == "adjacent" ? detail::TileMerge::Adjacent
                                                          : detail::TileMerge::Bridging;
  int sub_rows = detail::kSubRows;
  if (sub) {
    const std::string v = sub;
    if (v.empty() || v.size() > 2 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) < 1 ||
        std::stoi(v) > detail::kTile)
      throw cf::InvalidArgument("CF_SUB_ROWS must be an integer from 1 to 64, got '" + v + "'");
    sub_rows = std::stoi(v);
  }
  plan = detail::make_tile_plan(detail::layer_branches(lc, Tn), Tn, sub_rows, merge);
  for (const auto& br : plan.branches) admitted += detail::admitted(br);
  std::fprintf(stderr,
               "plan %s: %zu branches, visited %lld scores for %lld admitted (%.3f), %lld of them in rectangles "
               "another branch computed (shared logits)\n",
               attn_name(lc.attn).c_str(), plan.branches.size(), static_cast<long long>(plan.visited_scores),
               static_cast<long long>(admitted), double(plan.visited_scores) / double(admitted),
               static_cast<long long>(plan.shared_scores));
  const std::size_t nb = plan.branches.size();
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  // 64-byte aligned like the trainer's Eigen activations (a vector's heap alignment varies from
  // run to run and moved full attention by 15%)
  qkv.resize(static_cast<std::size_t>(B) * Tn * 3 * HD);
  dqkv.resize(qkv.size());
  y.resize(static_cast<std::size_t>(B) * Tn * HD);
  dy.resize(y.size());
  lse.resize(static_cast<std::size_t>(B) * H * nb * Tn);
  obr.resize(nb > 1 ? static_cast<std::size_t>(B) * H * (nb - 1) * Tn * dh : 0);
  for (auto& x : qkv) x = nd(rng);
  for (auto& x : dy) x = nd(rng);
  keys_t.resize(static_cast<std::size_t>(B) * H);
}

double HeadsBench::run() {
  const std::size_t nb = plan.branches.size();
  const int nt = plan.n_tiles;
  std::fill(dqkv.begin(), dqkv.end(), 0.f);
  const double t0 = now();
  // as the trainer (heads_forward_tiled): every head's keys transposed once for the packing-free
  // tile products
  const bool fast = detail::tile_gemm_enabled() && detail::tile_gemm_ok<float>(dh);
  cf::OmpExceptions omp_errors_kt;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < (fast ? B * H : 0); ++bh)
    omp_errors_kt.run([&] {
      const float* k = qkv.data() + static_cast<std::size_t>(bh / H) * Tn * 3 * HD + HD + (bh % H) * dh;
      keys_t[static_cast<std::size_t>(bh)].build(k, 3 * HD, dh, {{0, Tn}});
    });
  omp_errors_kt.rethrow();
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
  for (int task = 0; task < B * H * nt; ++task)
    omp_errors.run([&] {
      const int bh = task / nt, qt = task % nt, b = bh / H, h = bh % H;
      detail::HeadQKV<float> th;
      th.Tn = Tn, th.dh = dh, th.q = qkv.data() + static_cast<std::size_t>(b) * Tn * 3 * HD + h * dh;
      th.k = th.q + HD, th.v = th.q + 2 * HD, th.ld = 3 * HD;
      if (fast) th.kt = &keys_t[static_cast<std::size_t>(bh)];
      detail::DotScores<float> sc;
      sc.scale = 1.f / 8.f;
      detail::tiled_forward_qtile(th, sc, plan, qt, y.data() + static_cast<std::size_t>(b) * Tn * HD + h * dh, HD,
                                  nb > 1 ? obr.data() + static_cast<std::size_t>(bh) * (nb - 1) * Tn * dh : nullptr,
                                  lse.data() + static_cast<std::size_t>(bh) * nb * Tn);
    });
  omp_errors.rethrow();
  cf::OmpExceptions omp_errors_bwd;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < B * H; ++bh)
    omp_errors_bwd.run([&] {
      const int b = bh / H, h = bh % H;
      detail::HeadQKV<float> th;
      th.Tn = Tn, th.dh = dh, th.q = qkv.data() + static_cast<std::size_t>(b) * Tn * 3 * HD + h * dh;
      th.k = th.q + HD, th.v = th.q + 2 * HD, th.ld = 3 * HD;
      detail::DotScores<float> sc;
      sc.scale = 1.f / 8.f;
      detail::HeadQKVGrads<float> g;
      g.dq = dqkv.data() + static_cast<std::size_t>(b) * Tn * 3 * HD + h * dh, g.dk = g.dq + HD, g.dv = g.dq + 2 * HD;
      g.ld = 3 * HD;
      const std::size_t yo = static_cast<std::size_t>(b) * Tn * HD + h * dh;
      detail::tiled_backward_head(th, sc, plan, dy.data() + yo, HD, y.data() + yo,
                                  nb > 1 ? obr.data() + static_cast<std::size_t>(bh) * (nb - 1) * Tn * dh : nullptr,
                                  lse.data() + static_cast<std::size_t>(bh) * nb * Tn, g);
    });
  omp_errors_bwd.rethrow();
  return now() - t0;
}

int attn_mode(const LayerConfig& lc, int Tn, int B, int reps, int tile) {
  LayerConfig full;
  full.attn = AttnKind::Full;
  HeadsBench kind_b(lc, Tn, B), full_b(full, Tn, B);
  // repetitions alternate between the two kinds (best of each): a drift of the machine's speed over
  // the run moves both sides alike
  double t_kind = 1e30, t_full = 1e30;
  for (int r = 0; r < reps; ++r) {
    t_kind = std::min(t_kind, kind_b.run());
    t_full = std::min(t_full, full_b.run());
  }
  const std::int64_t a_kind = kind_b.admitted, a_full = full_b.admitted;
  (void)tile;  // the tile size is detail::kTile
  const double ratio = static_cast<double>(a_kind) / a_full;
  std::printf(
      "attn T=%d B=%d H=4 dh=64 tile=%d sub_rows=%s merge=%s gemm=%s kind_s=%.4f full_s=%.4f admitted_kind=%lld "
      "admitted_full=%lld "
      "score_ratio=%.4f "
      "time_ratio=%.4f time_over_score_ratio=%.3f\n",
      Tn, B, tile, std::getenv("CF_SUB_ROWS") ? std::getenv("CF_SUB_ROWS") : "default",
      std::getenv("CF_TILE_MERGE") ? std::getenv("CF_TILE_MERGE") : "bridging",
      std::getenv("CF_TILE_GEMM") ? std::getenv("CF_TILE_GEMM") : "tile", t_kind, t_full,
      static_cast<long long>(a_kind), static_cast<long long>(a_full), ratio, t_kind / t_full, t_kind / t_full / ratio);
  return 0;
}

// ELU+1 linear heads (H 4, d_head 64), forward + backward per rep, prefix-sum or dense form; the
// heads run one after another (one thread: the dense form's T x T scratch is per thread).
int linear_mode(bool prefix, int Tn, int B, int reps) {
  const int H = 4, dh = 64, HD = H * dh;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> qkv(static_cast<std::size_t>(B) * Tn * 3 * HD), dqkv(qkv.size()),
      y(static_cast<std::size_t>(B) * Tn * HD), dy(y.size()), den(static_cast<std::size_t>(B) * H * Tn);
  for (auto& x : qkv) x = nd(rng);
  for (auto& x : dy) x = nd(rng);
  std::vector<float> P(prefix ? 0 : static_cast<std::size_t>(Tn) * Tn);  // dense: one head's probabilities
  detail::HeadSpec spec;
  spec.linear = true;
  double best = 1e30, checksum = 0;
  for (int r = 0; r < reps; ++r) {
    std::fill(dqkv.begin(), dqkv.end(), 0.f);
    const double t0 = now();
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const float* q = qkv.data() + static_cast<std::size_t>(b) * Tn * 3 * HD + h * dh;
      float* dq = dqkv.data() + static_cast<std::size_t>(b) * Tn * 3 * HD + h * dh;
      const std::size_t yo = static_cast<std::size_t>(b) * Tn * HD + h * dh;
      float* dn = den.data() + static_cast<std::size_t>(bh) * Tn;
      if (prefix) {
        detail::linear_head_forward<float>(Tn, dh, q, q + HD, q + 2 * HD, 3 * HD, y.data() + yo, HD, dn);
        detail::linear_head_backward<float>(Tn, dh, q, q + HD, q + 2 * HD, 3 * HD, y.data() + yo, dy.data() + yo, HD,
                                            dn, dq, dq + HD, dq + 2 * HD);
      } else {
        detail::attention_head_forward<float>(spec, Tn, dh, q, q + HD, q + 2 * HD, 3 * HD, y.data() + yo, HD, nullptr,
                                              nullptr, P.data(), dn, nullptr);
        detail::attention_head_backward<float>(spec, Tn, dh, q, q + HD, q + 2 * HD, 3 * HD, dq, dq + HD, dq + 2 * HD,
                                               dy.data() + yo, HD, P.data(), dn, nullptr, nullptr);
      }
    }
    best = std::min(best, now() - t0);
  }
  for (float x : dqkv) checksum += x;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double buffers_mb = (qkv.size() + dqkv.size() + y.size() + dy.size() + den.size()) * 4 / 1048576.0;
  std::printf(
      "linear form=%s T=%d B=%d H=4 dh=64 fwd_bwd_s=%.4f peak_rss_mb=%.1f io_buffers_mb=%.1f grad_checksum=%.6g\n",
      prefix ? "prefix" : "dense", Tn, B, best, ru.ru_maxrss / 1024.0, buffers_mb, checksum);
  return 0;
}

int train_mode(const LayerConfig& lc, int Tn, int B, int steps) {
  ModelConfig c;
  c.vocab_size = 256;
  c.n_layer = 4;
  c.n_head = 4;
  c.d_model = 256;
  c.block_size = Tn;
  c.layers.assign(4, lc);
  Model<float> m = init_model<float>(c, 1);
  std::vector<float> g(m.params.size());
  AdamWState st;
  Workspace<float> ws;
  std::mt19937 rng(1);
  std::vector<std::int32_t> x(static_cast<std::size_t>(B) * Tn), y(x.size());
  for (auto& t : x) t = static_cast<std::int32_t>(rng() % 256);
  for (auto& t : y) t = static_cast<std::int32_t>(rng() % 256);
  double secs = 0;
  float first = 0, loss = 0;
  for (int s = 0; s < steps; ++s) {
    const double t0 = now();
    std::fill(g.begin(), g.end(), 0.f);
    loss = forward_backward<float>(m, x.data(), y.data(), B, Tn, &g, ws);
    if (s == 0) first = loss;
    clip_grad_norm(g, 1.0);
    adamw_step(m.params, g, st, m.layout, 1e-3, AdamWConfig{});
    secs += now() - t0;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  // O(T) theory, float32: params, grads, AdamW m and v; per layer the saved activations resid, ln1,
  // ln2, qkv (3), atty, resid_mid (N x C each) and fch, fcg (N x 4C each), the row statistics and
  // linear-attention normalisers
  // (H x nbranch per token); resid_L, ln_f, logits (N x V) and the losses; backward scratch dres,
  // dn, datty (N x C), dqkv (N x 3C), dfc, dfch (N x 4C).
  const double N = static_cast<double>(B) * Tn, C = 256, V = 256, P = static_cast<double>(m.params.size());
  const double nb = static_cast<double>(detail::layer_branches(lc, std::min(Tn, 4 * 1024)).size());
  const double floats = 4 * P + 4 * (N * C * 16 + N * 4 * nb + N * 4) + N * C * 2 + N * V + N + N * C * (3 + 3 + 8);
  const double theory_mb = floats * 4 / 1048576.0;
  std::printf(
      "train T=%d B=%d steps=%d step_s=%.2f loss_first=%.4f loss_last=%.4f peak_rss_mb=%.1f "
      "workspace_mb=%.1f theory_mb=%.1f rss_over_theory=%.3f\n",
      Tn, B, steps, secs / steps, first, loss, ru.ru_maxrss / 1024.0, ws.bytes() / 1048576.0, theory_mb,
      ru.ru_maxrss / 1024.0 / theory_mb);
  return 0;
}

}  // namespace

// Command line through CLI11 and cf::app::run like the tools: --help exits 0, unknown options and
// bad numbers exit 2 with a message naming them.
int main(int argc, char** argv) {
  CLI::App app{kUsage, "bench_long_context"};
  std::string mode, kind;
  int Tn = 0, B = 1, n = 0;
  app.add_option("mode", mode, "attn | train | linear")->check(CLI::IsMember({"attn", "train", "linear"}));
  app.add_option("kind", kind, "attention kind (attn, train) or prefix|dense (linear)");
  app.add_option("T", Tn, "sequence length")->check(CLI::Range(1, 1 << 24));
  app.add_option("B", B, "batch")->check(CLI::Range(1, 1 << 16));
  app.add_option("n", n, "REPS (attn, linear; default 3) or STEPS (train; default 2)")->check(CLI::Range(1, 1 << 20));
  int rc = 0;
  // MODE KIND T are checked here, not with CLI11's required(): CLI11 reports a missing positional
  // before an unknown option, and the unknown option is the more useful message.
  const int code = cf::app::run(app, argc, argv, [&] {
    if (mode.empty() || kind.empty() || Tn < 1)
      throw cf::InvalidArgument(std::string("MODE KIND T are required\n") + kUsage);
    if (mode == "linear") {
      if (kind != "prefix" && kind != "dense")
        throw cf::InvalidArgument("linear needs prefix|dense, got '" + kind + "'");
      rc = linear_mode(kind == "prefix", Tn, B, n > 0 ? n : 3);
      return;
    }
    const LayerConfig lc = parse_kind(kind);
    rc = mode == "attn" ? attn_mode(lc, Tn, B, n > 0 ? n : 3, detail::kTile) : train_mode(lc, Tn, B, n > 0 ? n : 2);
  });
  return code != 0 ? code : rc;
}
