#pragma once
// The admitted keys of every attention branch of a layer, from lib/graph's interval representation
// (Boundary repair (Yang) §3, docs/spec.md §1), in the two forms the attention kernels use: per-row interval lists (the
// tiled kernels: which key tiles a query tile visits, and the exact mask inside partial tiles) and
// dense T x T 0/1 masks (the dense oracle path). Internal to lib/nn.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cf/graph/interval.hpp"
#include "cf/nn/config.hpp"

namespace cf::nn::detail {

/// One softmax branch: for every query row t (0..T-1) the admitted keys as sorted, disjoint closed
/// intervals, all <= t (causal). A row with no interval gets no probability mass from the branch.
struct BranchRows {
  std::vector<graph::IntervalSet> rows;
};

/// The softmax branches of layer `lc` at length Tn. Full, runway, S-D and linear layers: one causal
/// branch. Block and SWA, and bridges with fusion = union: one branch over graph::sources (Boundary repair (Yang)
/// Eq. 36 for union). Bridges with fusion = branch (Boundary repair (Yang) Eq. 35: the block softmax plus ONE
/// softmax per bridge j over its sources S_j, for the queries in its write-back set R_j): the block
/// branch, then the bridges packed greedily into as few branches as possible such that no query row
/// lies in two write-back sets of the same branch (a row's softmax in a branch is then exactly its
/// bridge's softmax). Write-back sets of one pattern overlap only for centered bridges with
/// b < w <= 2b (R_j and R_{j+1}), so there are at most two bridge branches (odd and even j);
/// branches with no admitted key at all are dropped.
std::vector<BranchRows> layer_branches(const LayerConfig& lc, int Tn);

/// Dense 0/1 mask of one branch, row-major T x T (row = query).
std::vector<std::uint8_t> dense_mask(const BranchRows& br, int Tn);

/// Number of admitted (query, key) pairs of a branch: the scores it computes.
std::int64_t admitted(const BranchRows& br);

/// Key tiles visited by the tiled kernels. Tiles are kTile x kTile; query tile qt covers rows
/// [qt kTile, min(T, (qt+1) kTile)). A key tile that every row of the query tile admits in full is
/// visited whole; a partial one (the causal diagonal, the edge of a window) is visited as row
/// groups of `sub_rows` rows (make_tile_plan), each restricted to the key columns its rows admit
/// inside the tile; a group's pieces are then merged across key tiles (TileMerge) and widened to
/// kColAlign blocks. Smaller groups visit fewer masked scores (SWA(128) at T = 4,096: 1.125x the
/// admitted scores with 16-row groups, 1.24x with 32, 1.5x with whole 64-row tiles) but run
/// smaller products; 16-row groups were as fast or faster in every measurement
/// (docs/benchmarks.md), so kSubRows = 16 (CF_SUB_ROWS in bench_long_context compares others).
constexpr int kTile = 64;
constexpr int kSubRows = 16;
/// Partial rectangles start and end on multiples of kColAlign keys (a multiple of the 64-byte
/// vector width of floats and doubles): the transposed-key loads of cf/nn/detail/tile_gemm.hpp are
/// then aligned. SWA(128) groups become 144 instead of 143 keys wide (+0.7% visited) and ran 15%
/// faster than unaligned (docs/benchmarks.md).
constexpr int kColAlign = 16;
/// One visited rectangle: rows [qt kTile + r0, + nr) of the query tile, keys [j0, j0 + nj)
/// starting in key tile kt (a merged rectangle may run on into the following key tiles).
struct KeyTile {
  int kt;     ///< key tile index of j0
  bool full;  ///< every row of the rectangle admits every key of it (no masking needed)
  int r0 = 0, nr = 0, j0 = 0, nj = 0;
  /// Branches of a fused layer often visit the same rectangle (SE-Bridge: both branches hold the
  /// causal diagonal of a block's first query tile). Its logits do not depend on the branch, so
  /// the tile loop computes them once: share_off is the rectangle's slot (nr x nj values) in the
  /// query tile's share buffer (TilePlan::share_size), -1 when no other branch has it; the first
  /// branch holding it fills the slot, the last one runs the backward products for all of them.
  int share_off = -1;
  bool share_first = false, share_last = false;
};
/// How make_tile_plan shapes the rectangles of a query tile (the visited scores are the same):
/// None: one rectangle per (row group, partial key tile), full key tiles whole. Adjacent: a row
/// group's pieces in adjacent partial key tiles merge into one rectangle. Bridging (default):
/// also a full key tile lying between partial pieces of every row group is split into the groups
/// and merged with them (SWA(128): one 16 x 143 rectangle per group instead of an edge piece, a
/// whole middle tile and a diagonal piece; fewer, larger GEMMs, measured in docs/benchmarks.md).
enum class TileMerge { None, Adjacent, Bridging };
/// tiles[br][qt]: the rectangles holding the admitted keys of the rows of query tile qt; they cover
/// every admitted (query, key) pair of the branch exactly once.
struct TilePlan {
  int Tn = 0, n_tiles = 0;
  std::vector<BranchRows> branches;
  std::vector<std::vector<std::vector<KeyTile>>> tiles;
  std::int64_t visited_scores = 0;  ///< sum over visited rectangles of their area (the work done)
  std::vector<int> share_size;      ///< per query tile: values in its share buffer (KeyTile::share_off)
  std::int64_t shared_scores = 0;   ///< visited scores whose logits another branch already computed
};
TilePlan make_tile_plan(std::vector<BranchRows> branches, int Tn, int sub_rows = kSubRows,
                        TileMerge merge = TileMerge::Bridging);

/// Admission row of query `t` of a branch restricted to keys [j0, j0 + nj): out[c] = 1 where
/// key j0 + c is admitted, 0 elsewhere.
template <class T>
void admitted_row(const BranchRows& br, int t, int j0, int nj, T* out) {
  for (int c = 0; c < nj; ++c) out[c] = T(0);
  for (const auto& iv : br.rows[static_cast<std::size_t>(t)]) {
    const std::int64_t lo = std::max<std::int64_t>(iv.lo, j0), hi = std::min<std::int64_t>(iv.hi, j0 + nj - 1);
    for (std::int64_t j = lo; j <= hi; ++j) out[j - j0] = T(1);
  }
}

/// Writes `fill` into the entries of s (keys [j0, j0 + nj) of query t) that the branch does not
/// admit: the masking of a partial rectangle, as gap fills between the row's sorted intervals.
template <class T>
void fill_unadmitted(const BranchRows& br, int t, int j0, int nj, T* s, T fill) {
  std::int64_t c = 0;
  for (const auto& iv : br.rows[static_cast<std::size_t>(t)]) {
    const std::int64_t lo = std::max<std::int64_t>(iv.lo, j0) - j0,
                       hi = std::min<std::int64_t>(iv.hi, j0 + nj - 1) - j0;
    if (lo > hi) continue;
    std::fill(s + c, s + lo, fill);
    c = hi + 1;
  }
  std::fill(s + c, s + nj, fill);
}

}  // namespace cf::nn::detail
