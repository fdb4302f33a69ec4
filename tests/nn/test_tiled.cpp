// Tiled attention (issue 12) against the dense oracle, and bridge branch fusion per Boundary repair (Yang)
// Eq. 35 (issue 9). The dense path computes and masks T x T scores per head; the tiled path visits
// only admitted 64 x 64 key tiles with an online softmax and recomputes the probabilities in the
// backward. Both run the same model on the same batch; every output is compared.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <tuple>

#include "cf/graph/mask.hpp"
#include "cf/graph/scores.hpp"
#include "cf/nn/context.hpp"
#include "cf/nn/detail/activations.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/attention_tiled.hpp"
#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/model.hpp"

using namespace cf::nn;

namespace {

ModelConfig cfg_of(const std::string& schedule, int n_layer, PosKind pos, cf::graph::Fusion fusion, int b, int w, int e,
                   int block, int d_model = 16) {
  ModelConfig c;
  c.vocab_size = 19;
  c.block_size = block;
  c.n_layer = n_layer;
  c.n_head = 2;
  c.d_model = d_model;
  c.pos = pos;
  LayerConfig proto;
  proto.b = b;
  proto.w = w;
  proto.e = e;
  proto.fusion = fusion;
  c.layers = parse_schedule(schedule, n_layer, proto);
  return c;
}

template <class T>
struct Run {
  T loss = 0;
  std::vector<T> logprobs, grad;
  std::vector<std::vector<T>> atty, lse;
  std::vector<int> nbranch;
};

template <class T>
Run<T> run(const Model<T>& m, AttentionPath path, int B, int Tn, std::uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<std::int32_t> tok(static_cast<std::size_t>(B) * Tn), tgt(tok.size());
  for (auto& t : tok) t = static_cast<std::int32_t>(rng() % m.config.vocab_size);
  for (auto& t : tgt) t = static_cast<std::int32_t>(rng() % m.config.vocab_size);
  Workspace<T> ws;
  ws.set_attention_path(path);
  Run<T> r;
  r.grad.assign(m.params.size(), T(0));
  r.loss = forward_backward<T>(m, tok.data(), tgt.data(), B, Tn, &r.grad, ws, nullptr, &r.logprobs);
  const Activations<T>& a = ws.get();
  for (int l = 0; l < m.config.n_layer; ++l) {
    r.atty.emplace_back(a.atty[l].data(), a.atty[l].data() + a.atty[l].size());
    r.lse.push_back(a.lse[l]);
    r.nbranch.push_back(a.nbranch[l]);
  }
  return r;
}

template <class T>
double max_rel(const std::vector<T>& x, const std::vector<T>& y) {
  REQUIRE(x.size() == y.size());
  double scale = 1e-30, err = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(x[i]) || std::isinf(y[i])) {
      CHECK(x[i] == y[i]);  // -inf log-sum-exp: a row with no admitted key in a branch
      continue;
    }
    scale = std::max(scale, std::abs(double(x[i])));
    err = std::max(err, std::abs(double(x[i]) - double(y[i])));
  }
  return err / scale;
}

template <class T>
void compare(const ModelConfig& c, int B, int Tn, double tol) {
  Model<T> m = init_model<T>(c, 5);
  std::mt19937_64 g(9);
  std::uniform_real_distribution<double> u(-0.25, 0.25);
  for (auto& x : m.params) x += T(u(g));  // larger logits than at initialisation
  const Run<T> d = run(m, AttentionPath::Dense, B, Tn, 3), t = run(m, AttentionPath::Tiled, B, Tn, 3);
  CHECK(std::abs(double(d.loss - t.loss)) <= tol * std::abs(double(d.loss)));
  CHECK(max_rel(d.logprobs, t.logprobs) < tol);
  CHECK(max_rel(d.grad, t.grad) < tol);
  for (int l = 0; l < c.n_layer; ++l) {
    INFO("layer " << l);
    CHECK(d.nbranch[l] == t.nbranch[l]);
    CHECK(max_rel(d.atty[l], t.atty[l]) < tol);
    if (c.layers[l].attn != AttnKind::Linear) CHECK(max_rel(d.lse[l], t.lse[l]) < tol);
  }
}

}  // namespace

TEST_CASE(
    "Tiled attention equals the dense oracle (outputs, row log-sum-exp, every gradient) for every variant at "
    "ragged T",
    "[nn][tiled]") {
  // T = 150: not a multiple of the 64-tile nor of b = 24; w = 40 > b: centered bridges overlap
  // (two bridge branches); SWA w = 40 and 100 cut tiles in the middle
  using cf::graph::Fusion;
  struct Case {
    const char* schedule;
    PosKind pos;
    Fusion fusion;
    int w;
  };
  const Case cases[] = {
      {"full", PosKind::Learned, Fusion::Branch, 40},
      {"block", PosKind::Learned, Fusion::Branch, 40},
      {"swa", PosKind::Learned, Fusion::Branch, 40},
      {"swa", PosKind::Rope, Fusion::Branch, 100},
      {"bridge", PosKind::Learned, Fusion::Branch, 40},
      {"bridge", PosKind::Learned, Fusion::Union, 40},
      {"bridge", PosKind::Alibi, Fusion::Branch, 12},
      {"pbb", PosKind::Learned, Fusion::Branch, 40},
      {"pbb", PosKind::Rope, Fusion::Union, 40},
      {"se-bridge", PosKind::Learned, Fusion::Branch, 40},
      {"se-bridge", PosKind::Alibi, Fusion::Union, 40},
      {"runway-dot", PosKind::Learned, Fusion::Branch, 40},
      {"runway-bilinear", PosKind::Rope, Fusion::Branch, 40},
      {"sd", PosKind::Learned, Fusion::Branch, 40},
      {"sd", PosKind::Alibi, Fusion::Branch, 40},
      {"full", PosKind::Alibi, Fusion::Branch, 40},
      {"full", PosKind::Rope, Fusion::Branch, 40},
      {"linear", PosKind::Learned, Fusion::Branch, 40},  // prefix-sum form (64-row chunks) vs dense T x T
      {"linear", PosKind::Rope, Fusion::Branch, 40},
      {"linear", PosKind::Alibi, Fusion::Branch, 40},  // ALiBi does not apply to linear layers (both paths)
  };
  for (const Case& k : cases) {
    const ModelConfig c = cfg_of(k.schedule, 1, k.pos, k.fusion, 24, k.w, 10, 160);
    INFO(k.schedule << " pos " << pos_name(k.pos) << " fusion " << (k.fusion == Fusion::Branch ? "branch" : "union")
                    << " w " << k.w);
    compare<double>(c, 2, 150, 1e-11);
    compare<float>(c, 1, 150, 2e-4);
  }
  // a mixed 3-layer model, so gradients flow through tiled layers into earlier ones
  compare<double>(cfg_of("swa,se-bridge,full", 3, PosKind::Rope, Fusion::Branch, 24, 40, 10, 160), 2, 131, 1e-11);
  compare<double>(cfg_of("linear,swa,linear", 3, PosKind::Rope, Fusion::Branch, 24, 40, 10, 160), 2, 131, 1e-11);
  compare<float>(cfg_of("linear,swa,linear", 3, PosKind::Rope, Fusion::Branch, 24, 40, 10, 160), 1, 131, 2e-4);
}

TEST_CASE(
    "Tiled attention with the packing-free tile products (float, d_head 16) and with Eigen's products (double) "
    "equals the dense oracle",
    "[nn][tiled][tile_gemm]") {
  // d_head 16 is one float vector: the register-blocked products of cf/nn/detail/tile_gemm.hpp
  // run (d_head 8 above keeps Eigen's for floats); double d_head 8 runs them in the case above, so
  // here double runs with them switched off
  using cf::graph::Fusion;
  const char* schedules[] = {"full", "swa", "se-bridge", "bridge", "pbb", "runway-dot", "sd"};
  for (const char* sch : schedules)
    for (PosKind pos : {PosKind::Learned, PosKind::Alibi, PosKind::Rope}) {
      INFO(sch << " pos " << static_cast<int>(pos));
      compare<float>(cfg_of(sch, 2, pos, Fusion::Branch, 24, 40, 10, 150, 32), 2, 150, 2e-4);
      compare<float>(cfg_of(sch, 1, pos, Fusion::Union, 48, 80, 10, 150, 32), 1, 131, 2e-4);
    }
  // b = 64: the bridge branch of SE-Bridge admits no key in query tile 0 (rows 0-63), which the
  // forward skips (lse -inf, branch output 0) and the backward's D leaves out
  for (int Tn : {200, 300}) {
    INFO("se-bridge b 64, T " << Tn);
    compare<float>(cfg_of("se-bridge", 1, PosKind::Learned, Fusion::Branch, 64, 64, 32, 300, 32), 1, Tn, 2e-4);
    compare<double>(cfg_of("se-bridge", 2, PosKind::Alibi, Fusion::Branch, 64, 64, 32, 300, 32), 1, Tn, 1e-11);
  }
  const cf::nn::Context saved = cf::nn::context();
  cf::nn::Context eigen_products = saved;
  eigen_products.tile_products = false;
  cf::nn::set_context(eigen_products);
  for (const char* sch : schedules) {
    INFO(sch << " (Eigen products)");
    compare<double>(cfg_of(sch, 2, PosKind::Alibi, Fusion::Branch, 24, 40, 10, 150), 2, 150, 1e-11);
  }
  cf::nn::set_context(saved);
}

TEST_CASE("Tile plan: visited tiles cover every admitted score, and SWA visits O(T w) of them", "[nn][tiled]") {
  LayerConfig lc;
  lc.attn = AttnKind::Swa;
  lc.w = 128;
  const int Tn = 4096;
  const detail::TilePlan plan = detail::make_tile_plan(detail::layer_branches(lc, Tn), Tn);
  REQUIRE(plan.branches.size() == 1);
  std::int64_t admitted = detail::admitted(plan.branches[0]);
  // Σ_t min(t+1, w) (Boundary repair (Yang) Table 2 accounting, via lib/graph)
  cf::graph::Pattern p;
  p.kind = cf::graph::PatternKind::Swa;
  p.w = 128;
  CHECK(admitted == cf::graph::scores_branch(cf::graph::make_mask(p, Tn)));
  // each 64-row query tile reaches back w - 1 = 127 keys: 3 key tiles (2 for the first). The middle
  // one is admitted whole; it lies between the window edge and the diagonal of every 16-row group,
  // so each group visits one rectangle of keys [g0 - 127, g0 + 15], widened to whole 16-key blocks:
  // [g0 - 128, g0 + 15], 144 keys (TileMerge::Bridging, kColAlign = 16). The first two query tiles:
  // the causal diagonal as 16-row groups of 16, 32, 48, 64 keys, and for the second the whole tile 0.
  const std::int64_t diag = 16 * (16 + 32 + 48 + 64);
  const detail::TilePlan p16 = detail::make_tile_plan(detail::layer_branches(lc, Tn), Tn, 16);
  CHECK(p16.visited_scores == diag + (64 * 64 + diag) + (Tn / 64 - 2) * 4 * 16 * 144);
  CHECK(double(p16.visited_scores) / double(admitted) < 1.125);  // whole 64 x 64 tiles: 1.5
  // whole 64-row groups: one 64 x 192 rectangle [i0 - 128, i0 + 63] per query tile
  const detail::TilePlan p64 = detail::make_tile_plan(detail::layer_branches(lc, Tn), Tn, 64);
  CHECK(plan.visited_scores == p16.visited_scores);  // the default is 16-row groups
  CHECK(p64.visited_scores == 64 * 64 + 2 * 64 * 64 + (Tn / 64 - 2) * 64 * 192);
  // without merging: per group the window-edge piece (widened to 16-key blocks: 64, 48, 32, 16
  // keys), the whole middle tile once, the diagonal piece: the same visited count, more rectangles
  const detail::TilePlan p16n = detail::make_tile_plan(detail::layer_branches(lc, Tn), Tn, 16, detail::TileMerge::None);
  CHECK(p16n.visited_scores == diag + (64 * 64 + diag) + (Tn / 64 - 2) * (diag + 64 * 64 + diag));
  CHECK(p16n.tiles[0][10].size() == 9);
  CHECK(p16.tiles[0][10].size() == 4);
  // partial tiles are masked exactly: the visited rectangles hold every admitted score of every
  // row exactly once, and partial rectangles start and end on kColAlign blocks
  for (const detail::TilePlan* pl : {&p64, &p16, &p16n}) {
    std::vector<std::int64_t> covered(static_cast<std::size_t>(Tn), 0);
    for (int qt = 0; qt < pl->n_tiles; ++qt)
      for (const auto& kt : pl->tiles[0][static_cast<std::size_t>(qt)]) {
        CHECK(kt.j0 >= 0);
        CHECK(kt.j0 + kt.nj <= Tn);
        CHECK(kt.kt == kt.j0 / 64);
        if (!kt.full) CHECK(kt.j0 % detail::kColAlign == 0);
        for (int t = qt * 64 + kt.r0; t < qt * 64 + kt.r0 + kt.nr; ++t) {
          std::vector<int> row(static_cast<std::size_t>(kt.nj));
          detail::admitted_row(pl->branches[0], t, kt.j0, kt.nj, row.data());
          for (int v : row) covered[static_cast<std::size_t>(t)] += v;
          if (kt.full) CHECK(std::count(row.begin(), row.end(), 1) == kt.nj);
        }
      }
    for (int t = 0; t < Tn; ++t) REQUIRE(covered[static_cast<std::size_t>(t)] == std::min(t + 1, 128));
  }
}

TEST_CASE("Tile plan: a rectangle several branches visit is one share slot (first and last holder marked)",
          "[nn][tiled]") {
  // the tiled loops compute such a rectangle's logits (and in the backward dP and the products) once
  // (KeyTile::share_off); the tiled = dense cases above run SE-Bridge, bridge and PBB plans with slots
  struct Case {
    AttnKind kind;
    int b, w, e, Tn;
    bool expect_shared;
  };
  // SE-Bridge b 128: the bridge branch and the local branch both hold the causal diagonal of each
  // block's first query tile (at T 4,096, the benchmark: 31 diagonals of 16 x 160 keys); b 64,
  // e 32: the bridge branch's rows merge the previous block's keys with their diagonal piece
  // (16 x 80, 16 x 96), so no shape agrees; the b 24 plans of the tiled = dense cases above share
  const Case cases[] = {{AttnKind::SeBridge, 64, 64, 32, 300, false}, {AttnKind::SeBridge, 128, 128, 64, 4096, true},
                        {AttnKind::SeBridge, 24, 40, 10, 150, true},  {AttnKind::Bridge, 24, 40, 10, 150, true},
                        {AttnKind::Pbb, 24, 40, 10, 150, true},       {AttnKind::Swa, 24, 40, 10, 150, false}};
  for (const Case& c : cases) {
    LayerConfig lc;
    lc.attn = c.kind;
    lc.b = c.b;
    lc.w = c.w;
    lc.e = c.e;
    INFO(attn_name(c.kind) << " b " << c.b << " T " << c.Tn);
    const detail::TilePlan plan = detail::make_tile_plan(detail::layer_branches(lc, c.Tn), c.Tn);
    REQUIRE(plan.share_size.size() == static_cast<std::size_t>(plan.n_tiles));
    std::int64_t shared = 0;
    for (int qt = 0; qt < plan.n_tiles; ++qt) {
      // every (branch, rectangle) of this query tile, by shape
      std::map<std::tuple<int, int, int, int>, std::vector<std::pair<std::size_t, const detail::KeyTile*>>> by_shape;
      for (std::size_t br = 0; br < plan.branches.size(); ++br)
        for (const auto& k : plan.tiles[br][static_cast<std::size_t>(qt)])
          by_shape[{k.r0, k.nr, k.j0, k.nj}].push_back({br, &k});
      std::vector<char> used(static_cast<std::size_t>(plan.share_size[static_cast<std::size_t>(qt)]), 0);
      for (const auto& [shape, hs] : by_shape) {
        const detail::KeyTile& f = *hs.front().second;
        if (hs.size() == 1) {  // no other branch has it
          CHECK(f.share_off == -1);
          CHECK_FALSE(f.share_first);
          CHECK_FALSE(f.share_last);
          continue;
        }
        const int n = f.nr * f.nj;
        shared += static_cast<std::int64_t>(hs.size() - 1) * n;
        REQUIRE(f.share_off >= 0);
        REQUIRE(f.share_off + n <= plan.share_size[static_cast<std::size_t>(qt)]);
        for (int x = f.share_off; x < f.share_off + n; ++x)
          CHECK(used[static_cast<std::size_t>(x)]++ == 0);  // disjoint
        for (std::size_t a = 0; a < hs.size(); ++a) {
          const detail::KeyTile& k = *hs[a].second;
          CHECK(k.share_off == f.share_off);
          CHECK(k.share_first == (a == 0));             // the earliest branch fills the slot
          CHECK(k.share_last == (a + 1 == hs.size()));  // the latest runs the products
          if (a > 0) CHECK(hs[a].first > hs[a - 1].first);
        }
      }
    }
    CHECK(plan.shared_scores == shared);
    CHECK((shared > 0) == c.expect_shared);
    if (c.kind == AttnKind::SeBridge && c.Tn == 4096) CHECK(shared == 31 * 16 * (16 + 32 + 48 + 64));
  }
}

TEST_CASE(
    "Boundary repair (Yang) Eq. 35: branch fusion sums one softmax per bridge (b = 8, w = 12: rows 10-13 sum to 3), "
    "consistent with lib/graph's branch score count",
    "[nn][tiled][boundary]") {
  using cf::graph::Fusion;
  for (AttentionPath path : {AttentionPath::Tiled, AttentionPath::Dense}) {
    INFO((path == AttentionPath::Tiled ? "tiled" : "dense"));
    const ModelConfig c = cfg_of("bridge", 1, PosKind::Learned, Fusion::Branch, 8, 12, 4, 32);
    const Model<float> m = init_model<float>(c, 3);
    std::vector<std::int32_t> tok(32), tgt(32);
    for (int i = 0; i < 32; ++i) tok[i] = tgt[i] = (i * 7) % 19;
    std::vector<double> rows(32, 0);
    ForwardHooks hooks;
    hooks.on_layer = [&](const LayerActivations& la) {
      for (int i = 0; i < 32; ++i)
        for (int j = 0; j < 32; ++j) rows[i] += la.attn_probs[i * 32 + j];  // head 0
    };
    Workspace<float> ws;
    ws.set_attention_path(path);
    forward_backward<float>(m, tok.data(), tgt.data(), 1, 32, nullptr, ws, &hooks);
    // bridge j at p = 8j: sources and write-back [p - 6, p + 6); rows 10..13 lie in R_1 = [2, 14)
    // and R_2 = [10, 22): block softmax + two bridge softmaxes
    const cf::graph::Mask mask = cf::graph::make_mask({cf::graph::PatternKind::Bridge, 8, 12, 4}, 32);
    for (int i = 0; i < 32; ++i) {
      int n_bridges = 0;
      for (const auto& W : cf::graph::bridge_windows(mask))
        if (i >= W.r_lo && i < W.r_hi && W.s_lo <= std::min<cf::graph::Index>(W.s_hi - 1, i)) ++n_bridges;
      INFO("row " << i);
      CHECK(rows[i] == Approx(1 + n_bridges).epsilon(1e-5));
      if (i >= 10 && i <= 13) CHECK(n_bridges == 2);
    }
    // the branches' admitted (query, key) pairs are exactly lib/graph's branch score count
    const auto branches = detail::layer_branches(c.layers[0], 32);
    std::int64_t admitted = 0;
    for (const auto& br : branches) admitted += detail::admitted(br);
    CHECK(branches.size() == 3);  // block, odd bridges, even bridges
    CHECK(admitted == cf::graph::scores_branch(mask));
  }
  // the same count for centered bridges (S_j = R_j, so each bridge softmax is a causal triangle
  // over S_j) at a few shapes, b < w <= 2b included. For pbb and se-bridge lib/graph's branch
  // accounting counts the whole triangle over S_j (Boundary repair (Yang) Table 2: the bridge attention runs on
  // its window) while only the rows of R_j are written back; the trainer computes those rows
  // only, so its count is smaller (checked: <=, and equal to the rows-of-R_j count)
  for (auto kind : {AttnKind::Bridge, AttnKind::Pbb, AttnKind::SeBridge})
    for (int w : {6, 12, 16}) {
      LayerConfig lc;
      lc.attn = kind;
      lc.b = 8;
      lc.w = w;
      lc.e = 5;
      const int n = 61;
      std::int64_t admitted = 0;
      for (const auto& br : detail::layer_branches(lc, n)) admitted += detail::admitted(br);
      cf::graph::Pattern p;
      p.kind = kind == AttnKind::Bridge ? cf::graph::PatternKind::Bridge
               : kind == AttnKind::Pbb  ? cf::graph::PatternKind::Pbb
                                        : cf::graph::PatternKind::SeBridge;
      p.b = 8, p.w = w, p.e = 5;
      INFO(attn_name(kind) << " w " << w);
      const cf::graph::Mask mk = cf::graph::make_mask(p, n);
      std::int64_t rows_of_R = 0;  // block triangles + for each bridge, sum over t in R_j of |S_j ∩ [0, t]|
      for (cf::graph::Index t = 0; t < n; ++t) rows_of_R += t % 8 + 1;
      for (const auto& W : cf::graph::bridge_windows(mk))
        for (cf::graph::Index t = W.r_lo; t < W.r_hi; ++t)
          rows_of_R += std::max<cf::graph::Index>(0, std::min(W.s_hi - 1, t) - W.s_lo + 1);
      CHECK(admitted == rows_of_R);
      if (kind == AttnKind::Bridge)
        CHECK(admitted == cf::graph::scores_branch(mk));
      else
        CHECK(admitted < cf::graph::scores_branch(mk));
    }
}

TEST_CASE(
    "Boundary repair (Yang) Eq. 35 gradients: branch-fused centered bridge with b < w <= 2b matches finite "
    "differences, "
    "tiled and dense",
    "[nn][grad][boundary]") {
  for (AttentionPath path : {AttentionPath::Tiled, AttentionPath::Dense}) {
    INFO((path == AttentionPath::Tiled ? "tiled" : "dense"));
    const ModelConfig c = cfg_of("bridge,bridge", 2, PosKind::Learned, cf::graph::Fusion::Branch, 8, 12, 4, 30);
    Model<double> m = init_model<double>(c, 7);
    std::mt19937_64 g(11);
    std::uniform_real_distribution<double> u(-0.3, 0.3);
    for (auto& x : m.params) x += u(g);
    std::mt19937 rng(3);
    std::vector<std::int32_t> tok(2 * 29), tgt(tok.size());
    for (auto& t : tok) t = static_cast<std::int32_t>(rng() % c.vocab_size);
    for (auto& t : tgt) t = static_cast<std::int32_t>(rng() % c.vocab_size);
    Workspace<double> ws;
    ws.set_attention_path(path);
    std::vector<double> grad(m.params.size(), 0.0);
    forward_backward<double>(m, tok.data(), tgt.data(), 2, 29, &grad, ws);
    double gmax = 1e-12, err = 0;
    for (double x : grad) gmax = std::max(gmax, std::abs(x));
    const double h = 1e-5;
    // every attention weight of both layers and a sample of the rest
    std::vector<std::size_t> idx;
    for (const auto& t : m.layout.tensors) {
      const bool attn = t.name.find("attn") != std::string::npos;
      for (std::int64_t i = 0; i < t.size; i += attn ? 7 : 53) idx.push_back(static_cast<std::size_t>(t.offset + i));
    }
    for (std::size_t i : idx) {
      const double x0 = m.params[i];
      m.params[i] = x0 + h;
      const double lp = forward_backward<double>(m, tok.data(), tgt.data(), 2, 29, nullptr, ws);
      m.params[i] = x0 - h;
      const double lm = forward_backward<double>(m, tok.data(), tgt.data(), 2, 29, nullptr, ws);
      m.params[i] = x0;
      err = std::max(err, std::abs((lp - lm) / (2 * h) - grad[i]));
    }
    CHECK(idx.size() > 100);
    CHECK(err / gmax < 1e-6);
  }
}

TEST_CASE("Online-softmax row kernels (packet max, shifted exp with exact zeros) equal their scalar definitions",
          "[nn][tiled]") {
  // the forward's and the backward's rows run through these (cf/nn/detail/attention_tiled.hpp);
  // lengths around the packet width (16 floats / 8 doubles with AVX-512, less without)
  auto check = [](auto zero) {
    using T = decltype(zero);
    std::mt19937 rng(4);
    std::normal_distribution<double> nd(0.0, 3.0);
    const T ninf = -std::numeric_limits<T>::infinity();
    for (int n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 64, 144}) {
      INFO("n " << n << " sizeof " << sizeof(T));
      std::vector<T> s(static_cast<std::size_t>(n)), p(s.size(), T(-1));
      for (auto& x : s) x = T(nd(rng));
      for (int c = 0; c < n; c += 3) s[static_cast<std::size_t>(c)] = ninf;  // masked scores
      T m = ninf;
      for (T x : s) m = std::max(m, x);
      CHECK(detail::row_max(s.data(), n) == m);
      const T shift = m == ninf ? T(0.5) : m;
      const T sum = detail::exp_shift_row(s.data(), shift, n, p.data());
      long double ref_sum = 0;
      for (int c = 0; c < n; ++c) {
        const T x = s[static_cast<std::size_t>(c)], got = p[static_cast<std::size_t>(c)];
        if (x == ninf) {
          CHECK(got == T(0));  // exactly 0, not exp's clamped tiny value
          continue;
        }
        const long double want = std::exp(static_cast<long double>(T(x - shift)));  // same rounded argument
        ref_sum += want;
        CHECK(std::abs(static_cast<long double>(got) - want) <= 4 * std::numeric_limits<T>::epsilon() * want);
      }
      CHECK(std::abs(static_cast<long double>(sum) - ref_sum) <= 8 * std::numeric_limits<T>::epsilon() * (ref_sum + 1));
    }
    std::vector<T> all_masked(20, ninf);
    CHECK(detail::row_max(all_masked.data(), 20) == ninf);
  };
  check(0.0f);
  check(0.0);
}
