#pragma once
// Random geometries for the graph tests: n not a multiple of b, windows clipped at both ends.
#include <random>
#include <vector>

#include "cf/graph/mask.hpp"

namespace cf::graph::test {

/// All six patterns with parameters drawn for block size b (w even, 2 <= w <= 2b; 1 <= e <= b).
inline std::vector<Pattern> random_patterns(std::mt19937_64& rng, Index b) {
  std::uniform_int_distribution<Index> hw(1, b), ee(1, b), sw(1, 3 * b);
  std::vector<Pattern> out;
  for (PatternKind k : {PatternKind::Full, PatternKind::Block, PatternKind::Swa, PatternKind::Bridge, PatternKind::Pbb,
                        PatternKind::SeBridge}) {
    Pattern p;
    p.kind = k;
    p.b = b;
    p.w = (k == PatternKind::Swa) ? sw(rng) : 2 * hw(rng);
    p.e = ee(rng);
    out.push_back(p);
  }
  return out;
}

struct Geometry {
  Index n, b;
};

/// `count` random (n, b) pairs with 1 <= b <= max_b and 1 <= n <= max_n.
inline std::vector<Geometry> random_geometries(std::mt19937_64& rng, int count, Index max_n, Index max_b) {
  std::uniform_int_distribution<Index> nb(1, max_b);
  std::vector<Geometry> g;
  for (int i = 0; i < count; ++i) {
    Index b = nb(rng);
    std::uniform_int_distribution<Index> nn(1, max_n);
    g.push_back({nn(rng), b});
  }
  // Fixed corner cases: n a multiple of b, n < b, n = b + 1, b = 1.
  g.push_back({64, 8});
  g.push_back({5, 8});
  g.push_back({9, 8});
  g.push_back({17, 1});
  return g;
}

}  // namespace cf::graph::test
