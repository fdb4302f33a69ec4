// Runway path counts (Runway (Lee & Clark) Def. 3.1, docs/spec.md §1).
#include <catch2/catch.hpp>
#include <functional>

#include "cf/graph/runway.hpp"

using namespace cf::graph;

// Independent count: depth-first enumeration of strictly increasing paths using the edge predicate.
static std::vector<long long> enumerate_paths(const Mask& m, Index s, Index d) {
  std::vector<long long> by_len(d - s + 1, 0);
  std::function<void(Index, Index)> dfs = [&](Index v, Index len) {
    if (v == d) {
      ++by_len[len];
      return;
    }
    for (Index w = v + 1; w <= d; ++w)
      if (has_edge_brute_force(m, v, w)) dfs(w, len + 1);
  };
  dfs(s, 0);
  return by_len;
}

TEST_CASE("Runway counts in the complete causal graph: C(d-s-1, l-1) per length and 2^(d-s-1) - 1 in all",
          "[graph][runway]") {
  Pattern full;
  const Mask m = make_mask(full, 40);
  for (Index s : {0, 3}) {
    for (Index d = s + 1; d < s + 16; ++d) {
      const RunwayCount rc = runway_count(m, s, d, true);
      const auto brute = enumerate_paths(m, s, d);
      REQUIRE(rc.runway == complete_graph_runway(s, d));
      for (Index l = 1; l <= d - s; ++l) {
        REQUIRE(rc.by_length[l] == complete_graph_paths_of_length(s, d, l));
        REQUIRE(rc.by_length[l] == brute[l]);
      }
    }
  }
  // Far past 64 bits: exact big integers.
  const RunwayCount big = runway_count(make_mask(full, 600), 0, 500);
  REQUIRE(big.runway == complete_graph_runway(0, 500));
  REQUIRE(big.log2_runway == Approx(499.0));
}

TEST_CASE("Runway counts in masked graphs equal brute-force path enumeration", "[graph][runway]") {
  for (PatternKind k :
       {PatternKind::Block, PatternKind::Swa, PatternKind::Pbb, PatternKind::SeBridge, PatternKind::Bridge}) {
    Pattern p;
    p.kind = k;
    p.b = 5;
    p.w = k == PatternKind::Swa ? 4 : 4;
    p.e = 3;
    const Mask m = make_mask(p, 23);
    for (Index s = 0; s < 8; s += 3)
      for (Index d = s + 1; d < 20; d += 2) {
        const RunwayCount rc = runway_count(m, s, d, true);
        const auto brute = enumerate_paths(m, s, d);
        long long total = 0;
        for (Index l = 2; l < static_cast<Index>(brute.size()); ++l) total += brute[l];
        INFO(describe(p) << " s=" << s << " d=" << d);
        REQUIRE(rc.runway == total);
        REQUIRE(rc.direct_edge == (brute[1] == 1));
        for (Index l = 1; l < static_cast<Index>(brute.size()); ++l) REQUIRE(rc.by_length[l] == brute[l]);
      }
  }
}
