#pragma once
// Attention-score accounting per head (Boundary repair (Yang) Table 2 and §6.9; docs/spec.md §1): how many causal
// query-key scores a pattern computes before the softmax. Exact integers.
#include <cstdint>
#include <vector>

#include "cf/graph/mask.hpp"
#include "cf/graph/schedule.hpp"

namespace cf::graph {

/// Branch accounting (Boundary repair (Yang) Table 2): every softmax branch's causal triangle counted.
/// Block = Σ_blocks m(m+1)/2; SWA = Σ_t min(t+1, w); Bridge = PBB = Block + Σ_boundaries
/// m(m+1)/2 with m = |[p-h, p+h) ∩ [0,n)|; SE = Block + Σ_boundaries m(m+1)/2 with
/// m = |[p-b, p+e) ∩ [0,n)|; Full = n(n+1)/2.
std::int64_t scores_branch(const Mask& m);

/// Union accounting (Boundary repair (Yang) §6.9): the number of distinct edges (s, t), i.e. Σ_t |sources(t)|.
std::int64_t scores_union(const Mask& m);

/// Write-back coverage: number of positions that receive a bridge residual, |⋃_j R_j|.
std::int64_t write_back(const Mask& m);

/// Score totals of a schedule: each layer's count summed (e.g. the 3:1 "pbb,pbb,pbb,full").
struct ScheduleScores {
  std::int64_t branch = 0, unions = 0;
  std::vector<std::int64_t> branch_per_layer, union_per_layer;
};
ScheduleScores scores_schedule(const Schedule& s, Index n);

}  // namespace cf::graph
