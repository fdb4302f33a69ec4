#pragma once
// Structural dependency sets R_l(t) of Boundary repair (Yang) Lemma 1 (docs/spec.md §1):
//   R_0(t) = {t};  R_{l+1}(t) = R_l(t) ∪ ⋃_{(s,t) ∈ E(l+1)} R_l(s).
// R_L(t) holds exactly the input positions that can influence h_t after L layers.
#include <cstdint>
#include <vector>

#include "cf/graph/interval.hpp"
#include "cf/graph/schedule.hpp"

namespace cf::graph {

/// R_L(t) for every target t, stored compactly (CSR): intervals of t are
/// intervals[offsets[t] .. offsets[t+1]).
struct Closure {
  Index n = 0;
  int layers = 0;
  std::vector<std::int64_t> offsets;  ///< size n + 1
  std::vector<Interval> intervals;

  /// R_L(t) as a normalised interval set.
  IntervalSet set(Index t) const;
  /// |R_L(t)|.
  Index size(Index t) const;
  /// Whether u ∈ R_L(t).
  bool contains(Index t, Index u) const;
};

/// Closure of a schedule on n positions (layer 1 = schedule.layers[0]).
/// Fast path: when every source set and every R_l(s) is a single interval [lo(s), s] (true for all
/// patterns of docs/spec.md §1), R_{l+1}(t) = [min_{s ∈ sources(t)} lo_l(s), t] via a sparse-table range
/// minimum, O(n log n) per layer; otherwise a general interval-merge path. Throws
/// cf::InvalidArgument if the schedule is invalid for n.
Closure closure(const Schedule& schedule, Index n);

/// |R_L(t)| for t = 0..n-1.
std::vector<Index> closure_sizes(const Closure& c);

/// Brute-force closure on dense boolean sets using has_edge_brute_force only (the oracle for
/// tests and --verify). R[t][u] = u ∈ R_L(t). Throws cf::InvalidArgument if n > max_n.
std::vector<std::vector<std::uint8_t>> closure_brute_force(const Schedule& schedule, Index n, Index max_n = 4096);

}  // namespace cf::graph
