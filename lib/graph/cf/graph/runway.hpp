#pragma once
// Runway path counts of Runway (Lee & Clark) (Def. 3.1, docs/spec.md §1): the runway of (s, d) is the set of paths
// s -> d of length >= 2 with distinct vertices in a mask graph. Counts overflow 64 bits quickly
// (2^(d-s-1) - 1 in the complete causal graph), so they are exact big integers.
#include <boost/multiprecision/cpp_int.hpp>
#include <vector>

#include "cf/graph/mask.hpp"

namespace cf::graph {

using BigInt = boost::multiprecision::cpp_int;

/// Path counts from source s to destination d (s < d) in one layer's mask graph (self edges
/// excluded: distinct vertices means strictly increasing positions).
struct RunwayCount {
  Index s = 0, d = 0;
  bool direct_edge = false;       ///< whether (s, d) itself is an edge (the length-1 path)
  BigInt paths = 0;               ///< all paths s -> d, any length >= 1
  BigInt runway = 0;              ///< paths of length >= 2 (Def. 3.1)
  double log2_runway = 0;         ///< log2(runway), -inf if zero
  std::vector<BigInt> by_length;  ///< by_length[l] = paths of length l (l = 0..d-s), if requested
};

/// Count paths by dynamic programming over positions s..d with prefix sums over the mask's
/// source intervals: O((d-s) * intervals) big-integer additions; the per-length table costs
/// O((d-s)^2) and is computed only when by_length is set and d - s <= max_gap_by_length.
/// Throws cf::InvalidArgument unless 0 <= s < d < n and d - s <= 1,000,000.
RunwayCount runway_count(const Mask& m, Index s, Index d, bool by_length = false, Index max_gap_by_length = 2048);

/// Closed form for the complete causal graph: C(d-s-1, l-1) paths of length l (Runway (Lee & Clark)).
BigInt complete_graph_paths_of_length(Index s, Index d, Index l);

/// Closed form for the complete causal graph: runway size 2^(d-s-1) - 1 (Runway (Lee & Clark)).
BigInt complete_graph_runway(Index s, Index d);

/// log2 of a positive big integer (for display and plots).
double log2_big(const BigInt& x);

}  // namespace cf::graph
