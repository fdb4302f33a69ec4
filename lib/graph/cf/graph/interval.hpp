#pragma once
// Sets of positions as sorted, disjoint, non-adjacent closed intervals [lo, hi]. Every mask of
// docs/spec.md §1 gives each target a union of a few intervals of sources, and every dependency set
// R_l(t) of those masks stays a short interval list, so closures scale to n = 65,536 and beyond
// without n x n bitsets (issue 2).
#include <cstdint>
#include <vector>

namespace cf::graph {

using Index = std::int64_t;

/// Closed interval of positions lo..hi (lo <= hi).
struct Interval {
  Index lo, hi;
  Index size() const { return hi - lo + 1; }
  bool operator==(const Interval& o) const { return lo == o.lo && hi == o.hi; }
};

/// Sorted, disjoint, non-adjacent intervals.
using IntervalSet = std::vector<Interval>;

/// Sort and merge overlapping or adjacent intervals in place; drops empty ones (lo > hi).
void normalize(IntervalSet& s);

/// Number of positions in a normalised set.
Index count(const IntervalSet& s);

/// Whether position x lies in a normalised set (binary search).
bool contains(const IntervalSet& s, Index x);

/// Intersection of a normalised set with [lo, hi].
IntervalSet clip(const IntervalSet& s, Index lo, Index hi);

}  // namespace cf::graph
