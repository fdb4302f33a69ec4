// Attention branches from lib/graph's masks (cf/nn/detail/attention_masks.hpp).
#include "cf/nn/detail/attention_masks.hpp"

#include <algorithm>

#include "cf/graph/mask.hpp"

namespace cf::nn::detail {

namespace {

bool bridged(AttnKind k) { return k == AttnKind::Bridge || k == AttnKind::Pbb || k == AttnKind::SeBridge; }

bool empty(const BranchRows& br) {
  for (const auto& r : br.rows)
    if (!r.empty()) return false;
  return true;
}

}  // namespace

std::vector<BranchRows> layer_branches(const LayerConfig& lc, int Tn) {
  const graph::Pattern p = mask_pattern(lc);
  const graph::Mask mask = graph::make_mask(p, Tn);
  BranchRows base;
  base.rows.resize(static_cast<std::size_t>(Tn));
  const bool branch_fusion = bridged(lc.attn) && lc.fusion == graph::Fusion::Branch;
  for (int t = 0; t < Tn; ++t) {
    if (branch_fusion)
      base.rows[static_cast<std::size_t>(t)] = {{(t / lc.b) * static_cast<graph::Index>(lc.b), t}};
    else
      base.rows[static_cast<std::size_t>(t)] = graph::sources(mask, t);
  }
  std::vector<BranchRows> out{std::move(base)};
  if (!branch_fusion) return out;
  // one softmax per bridge window j (seed 002 Eq. 35), windows packed into branches whose
  // write-back sets are disjoint
  std::vector<BranchRows> bridges;
  std::vector<graph::Index> last_r_hi;
  for (const graph::BridgeWindow& W : graph::bridge_windows(mask)) {
    std::size_t g = 0;
    while (g < bridges.size() && last_r_hi[g] > W.r_lo) ++g;
    if (g == bridges.size()) {
      bridges.push_back(BranchRows{std::vector<graph::IntervalSet>(static_cast<std::size_t>(Tn))});
      last_r_hi.push_back(0);
    }
    last_r_hi[g] = std::max(last_r_hi[g], W.r_hi);
    for (graph::Index t = W.r_lo; t < W.r_hi; ++t) {
      const graph::Index hi = std::min(W.s_hi - 1, t);  // causal: s <= t
      if (W.s_lo <= hi) bridges[g].rows[static_cast<std::size_t>(t)].push_back({W.s_lo, hi});
    }
  }
  for (auto& b : bridges)
    if (!empty(b)) out.push_back(std::move(b));
  return out;
}

std::vector<std::uint8_t> dense_mask(const BranchRows& br, int Tn) {
  std::vector<std::uint8_t> m(static_cast<std::size_t>(Tn) * Tn, 0);
  for (int t = 0; t < Tn; ++t)
    for (const auto& iv : br.rows[static_cast<std::size_t>(t)])
      for (graph::Index s = iv.lo; s <= iv.hi && s <= t; ++s) m[static_cast<std::size_t>(t) * Tn + s] = 1;
  return m;
}

std::int64_t admitted(const BranchRows& br) {
  std::int64_t n = 0;
  for (const auto& r : br.rows) n += graph::count(r);
  return n;
}

TilePlan make_tile_plan(std::vector<BranchRows> branches, int Tn, int sub_rows) {
  sub_rows = std::max(1, std::min(sub_rows, kTile));
  TilePlan plan;
  plan.Tn = Tn;
  plan.n_tiles = (Tn + kTile - 1) / kTile;
  plan.branches = std::move(branches);
  for (const BranchRows& br : plan.branches) {
    std::vector<std::vector<KeyTile>> per_q(static_cast<std::size_t>(plan.n_tiles));
    std::vector<int> hits(static_cast<std::size_t>(plan.n_tiles));  // rows admitting the whole key tile
    std::vector<char> touched(static_cast<std::size_t>(plan.n_tiles));
    for (int qt = 0; qt < plan.n_tiles; ++qt) {
      const int i0 = qt * kTile, i1 = std::min(Tn, i0 + kTile);
      std::fill(hits.begin(), hits.end(), 0);
      std::fill(touched.begin(), touched.end(), 0);
      for (int t = i0; t < i1; ++t)
        for (const auto& iv : br.rows[static_cast<std::size_t>(t)]) {
          const int k0 = static_cast<int>(iv.lo / kTile), k1 = static_cast<int>(iv.hi / kTile);
          for (int kt = k0; kt <= k1; ++kt) {
            touched[static_cast<std::size_t>(kt)] = 1;
            const graph::Index j0 = static_cast<graph::Index>(kt) * kTile,
                               j1 = std::min<graph::Index>(Tn, j0 + kTile) - 1;
            if (iv.lo <= j0 && iv.hi >= j1) ++hits[static_cast<std::size_t>(kt)];
          }
        }
      for (int kt = 0; kt < plan.n_tiles; ++kt) {
        if (!touched[static_cast<std::size_t>(kt)]) continue;
        const int J0 = kt * kTile, J1 = std::min(Tn, J0 + kTile) - 1;
        auto& rects = per_q[static_cast<std::size_t>(qt)];
        if (hits[static_cast<std::size_t>(kt)] == i1 - i0) {  // whole tile admitted by every row
          rects.push_back({kt, true, 0, i1 - i0, J0, J1 - J0 + 1});
          plan.visited_scores += static_cast<std::int64_t>(i1 - i0) * (J1 - J0 + 1);
          continue;
        }
        // partial tile: row groups, each restricted to the keys its rows admit inside the tile
        for (int g0 = i0; g0 < i1; g0 += sub_rows) {
          const int g1 = std::min(i1, g0 + sub_rows);
          graph::Index lo = J1 + 1, hi = J0 - 1;
          std::int64_t n_adm = 0;
          for (int t = g0; t < g1; ++t)
            for (const auto& iv : br.rows[static_cast<std::size_t>(t)]) {
              const graph::Index a = std::max<graph::Index>(iv.lo, J0), b = std::min<graph::Index>(iv.hi, J1);
              if (a > b) continue;
              lo = std::min(lo, a);
              hi = std::max(hi, b);
              n_adm += b - a + 1;
            }
          if (lo > hi) continue;
          const int nj = static_cast<int>(hi - lo + 1);
          rects.push_back(
              {kt, n_adm == static_cast<std::int64_t>(g1 - g0) * nj, g0 - i0, g1 - g0, static_cast<int>(lo), nj});
          plan.visited_scores += static_cast<std::int64_t>(g1 - g0) * nj;
        }
      }
    }
    plan.tiles.push_back(std::move(per_q));
  }
  return plan;
}

}  // namespace cf::nn::detail
