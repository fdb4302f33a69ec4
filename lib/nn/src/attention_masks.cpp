// Attention branches from lib/graph's masks (cf/nn/detail/attention_masks.hpp).
#include "cf/nn/detail/attention_masks.hpp"

#include <algorithm>
#include <map>
#include <tuple>

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
  // one softmax per bridge window j (Boundary repair (Yang) Eq. 35), windows packed into branches whose
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

TilePlan make_tile_plan(std::vector<BranchRows> branches, int Tn, int sub_rows, TileMerge merge) {
  sub_rows = std::max(1, std::min(sub_rows, kTile));
  TilePlan plan;
  plan.Tn = Tn;
  plan.n_tiles = (Tn + kTile - 1) / kTile;
  plan.branches = std::move(branches);
  // a column piece of one row group: keys [lo, hi] inside key tile kt, n_adm admitted scores
  struct Piece {
    int kt;
    graph::Index lo, hi;
    std::int64_t n_adm;
  };
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
      auto& rects = per_q[static_cast<std::size_t>(qt)];
      const int n_groups = (i1 - i0 + sub_rows - 1) / sub_rows;
      // pieces[g]: the column pieces of row group g in key order (partial tiles restricted to the
      // keys the group admits; full tiles dissolved into the groups as whole columns)
      std::vector<std::vector<Piece>> pieces(static_cast<std::size_t>(n_groups));
      std::vector<int> full_tiles;
      for (int kt = 0; kt < plan.n_tiles; ++kt) {
        if (!touched[static_cast<std::size_t>(kt)]) continue;
        const int J0 = kt * kTile, J1 = std::min(Tn, J0 + kTile) - 1;
        if (hits[static_cast<std::size_t>(kt)] == i1 - i0) {  // whole tile admitted by every row
          full_tiles.push_back(kt);
          continue;
        }
        for (int g = 0; g < n_groups; ++g) {
          const int g0 = i0 + g * sub_rows, g1 = std::min(i1, g0 + sub_rows);
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
          if (lo <= hi) pieces[static_cast<std::size_t>(g)].push_back({kt, lo, hi, n_adm});
        }
      }
      // A full tile stays a whole kTile x kTile rectangle (the most efficient GEMMs), unless
      // merge == Bridging and it joins two partial pieces of every row group (SWA's middle tile
      // between the window edge and the diagonal): then each group visits one contiguous
      // rectangle, fewer and larger GEMMs for the same visited scores.
      auto ends_at = [](const std::vector<Piece>& v, graph::Index j) {
        for (const Piece& p : v)
          if (p.hi == j) return true;
        return false;
      };
      auto starts_at = [](const std::vector<Piece>& v, graph::Index j) {
        for (const Piece& p : v)
          if (p.lo == j) return true;
        return false;
      };
      for (int kt : full_tiles) {
        const int J0 = kt * kTile, J1 = std::min(Tn, J0 + kTile) - 1;
        bool dissolve = merge == TileMerge::Bridging;
        for (int g = 0; g < n_groups && dissolve; ++g)
          dissolve = ends_at(pieces[static_cast<std::size_t>(g)], J0 - 1) &&
                     starts_at(pieces[static_cast<std::size_t>(g)], J1 + 1);
        if (!dissolve) {
          rects.push_back({kt, true, 0, i1 - i0, J0, J1 - J0 + 1});
          plan.visited_scores += static_cast<std::int64_t>(i1 - i0) * (J1 - J0 + 1);
          continue;
        }
        for (int g = 0; g < n_groups; ++g) {
          const int g0 = i0 + g * sub_rows, g1 = std::min(i1, g0 + sub_rows);
          auto& v = pieces[static_cast<std::size_t>(g)];
          v.push_back({kt, J0, J1, static_cast<std::int64_t>(g1 - g0) * (J1 - J0 + 1)});
        }
      }
      // each group's pieces: contiguous runs become one rectangle (merge != None), its key columns
      // widened to whole kColAlign blocks (aligned vector loads of the transposed keys; the extra
      // columns are masked), runs that then touch merged again
      for (int g = 0; g < n_groups; ++g) {
        const int g0 = i0 + g * sub_rows, g1 = std::min(i1, g0 + sub_rows), nr = g1 - g0;
        auto& v = pieces[static_cast<std::size_t>(g)];
        std::sort(v.begin(), v.end(), [](const Piece& a, const Piece& b) { return a.lo < b.lo; });
        std::vector<Piece> runs;
        for (std::size_t a = 0; a < v.size();) {
          std::size_t b = a + 1;
          Piece run = v[a];
          while (merge != TileMerge::None && b < v.size() && v[b].lo == run.hi + 1) {
            run.hi = v[b].hi;
            run.n_adm += v[b].n_adm;
            ++b;
          }
          run.lo = run.lo / kColAlign * kColAlign;
          run.hi = std::min<graph::Index>(Tn - 1, (run.hi / kColAlign + 1) * kColAlign - 1);
          if (!runs.empty() && run.lo <= runs.back().hi) {  // widened into the previous run: one rectangle
            runs.back().hi = std::max(runs.back().hi, run.hi);
            runs.back().n_adm += run.n_adm;
          } else {
            runs.push_back(run);
          }
          a = b;
        }
        for (const Piece& run : runs) {
          const int nj = static_cast<int>(run.hi - run.lo + 1);
          rects.push_back({static_cast<int>(run.lo / kTile), run.n_adm == static_cast<std::int64_t>(nr) * nj, g0 - i0,
                           nr, static_cast<int>(run.lo), nj});
          plan.visited_scores += static_cast<std::int64_t>(nr) * nj;
        }
      }
    }
    plan.tiles.push_back(std::move(per_q));
  }
  // rectangles that several branches visit (same rows and keys): one share slot per rectangle,
  // first and last holder marked (KeyTile::share_off)
  plan.share_size.assign(static_cast<std::size_t>(plan.n_tiles), 0);
  for (int qt = 0; qt < plan.n_tiles && plan.branches.size() > 1; ++qt) {
    std::map<std::tuple<int, int, int, int>, std::vector<KeyTile*>> holders;
    for (auto& per_q : plan.tiles)
      for (KeyTile& k : per_q[static_cast<std::size_t>(qt)]) holders[{k.r0, k.nr, k.j0, k.nj}].push_back(&k);
    int off = 0;
    for (auto& [shape, ks] : holders) {
      if (ks.size() < 2) continue;
      for (KeyTile* k : ks) k->share_off = off;
      ks.front()->share_first = true;
      ks.back()->share_last = true;
      off += ks.front()->nr * ks.front()->nj;
      plan.shared_scores += static_cast<std::int64_t>(ks.size() - 1) * ks.front()->nr * ks.front()->nj;
    }
    plan.share_size[static_cast<std::size_t>(qt)] = off;
  }
  return plan;
}

}  // namespace cf::nn::detail
