// Attention-score accounting (Boundary repair (Yang) Table 2 and §6.9, docs/spec.md §1).
#include <catch2/catch.hpp>
#include <random>

#include "cf/graph/scores.hpp"
#include "geometry.hpp"

using namespace cf::graph;

static Pattern pat(PatternKind k, Index b = 128, Index w = 128, Index e = 64) {
  Pattern p;
  p.kind = k;
  p.b = b;
  p.w = w;
  p.e = e;
  return p;
}

TEST_CASE("scores: published branch accounting at n=1024, b=w=128, e=64", "[graph][boundary]") {
  // Published facts: Boundary repair (Yang) Table 2 (attention scores per head at n = 1024), restated in docs/spec.md
  // §1: Block 66,048; SWA 122,944; Bridge 123,840; PBB 123,840; SE 195,744; Full 524,800.
  const Index n = 1024;
  REQUIRE(scores_branch(make_mask(pat(PatternKind::Block), n)) == 66048);
  REQUIRE(scores_branch(make_mask(pat(PatternKind::Swa), n)) == 122944);
  REQUIRE(scores_branch(make_mask(pat(PatternKind::Bridge), n)) == 123840);
  REQUIRE(scores_branch(make_mask(pat(PatternKind::Pbb), n)) == 123840);
  REQUIRE(scores_branch(make_mask(pat(PatternKind::SeBridge), n)) == 195744);
  REQUIRE(scores_branch(make_mask(pat(PatternKind::Full), n)) == 524800);
  // SE / SWA = 1.59x (Boundary repair (Yang) Table 2).
  REQUIRE(195744.0 / 122944.0 == Approx(1.59).margin(0.005));
  // Write-back coverage (Boundary repair (Yang), docs/spec.md §1): Bridge 896, PBB 448, SE 448 of 1024.
  REQUIRE(write_back(make_mask(pat(PatternKind::Bridge), n)) == 896);
  REQUIRE(write_back(make_mask(pat(PatternKind::Pbb), n)) == 448);
  REQUIRE(write_back(make_mask(pat(PatternKind::SeBridge), n)) == 448);
}

TEST_CASE("scores: published union accounting at n=8192, b=128, h=64", "[graph][boundary]") {
  // Published facts: Boundary repair (Yang) §6.9 (unique edges): SWA 1,040,448; PBB union 786,432;
  // Full 33,558,528; 3:1 schedules PBB+Full 35,917,824 and SWA+Full 36,679,872.
  const Index n = 8192;
  REQUIRE(scores_union(make_mask(pat(PatternKind::Swa), n)) == 1040448);
  REQUIRE(scores_union(make_mask(pat(PatternKind::Pbb), n)) == 786432);
  REQUIRE(scores_union(make_mask(pat(PatternKind::Full), n)) == 33558528);
  Pattern base = pat(PatternKind::Full);
  REQUIRE(scores_schedule(parse_schedule("pbb,pbb,pbb,full", base), n).unions == 35917824);
  REQUIRE(scores_schedule(parse_schedule("swa,swa,swa,full", base), n).unions == 36679872);
}

TEST_CASE("scores: union accounting equals counted dense edges, branch accounting equals counted triangles",
          "[graph][boundary]") {
  std::mt19937_64 rng(51);
  for (const auto& g : test::random_geometries(rng, 30, 200, 24)) {
    for (const auto& p : test::random_patterns(rng, g.b)) {
      const Mask m = make_mask(p, g.n);
      std::int64_t edges = 0, branch = 0, wb = 0;
      for (Index t = 0; t < g.n; ++t)
        for (Index s = 0; s <= t; ++s) edges += has_edge_brute_force(m, s, t);
      // Branch: base attention triangle per query + every bridge window's full causal triangle.
      for (Index t = 0; t < g.n; ++t) {
        if (p.kind == PatternKind::Full)
          branch += t + 1;
        else if (p.kind == PatternKind::Swa)
          branch += std::min<Index>(t + 1, p.w);
        else
          branch += t - (t / g.b) * g.b + 1;
      }
      std::vector<char> written(g.n, 0);
      if (p.kind == PatternKind::Bridge || p.kind == PatternKind::Pbb || p.kind == PatternKind::SeBridge)
        for (Index q = g.b; q < g.n; q += g.b) {
          Index lo = p.kind == PatternKind::SeBridge ? q - g.b : q - p.h();
          Index hi = p.kind == PatternKind::SeBridge ? q + p.e : q + p.h();
          lo = std::max<Index>(lo, 0);
          hi = std::min<Index>(hi, g.n);
          for (Index t = lo; t < hi; ++t) branch += t - lo + 1;
          Index rlo = p.kind == PatternKind::Bridge ? q - p.h() : q;
          for (Index t = std::max<Index>(rlo, 0); t < hi; ++t) written[t] = 1;
        }
      for (char c : written) wb += c;
      INFO(describe(p) << " n=" << g.n);
      REQUIRE(scores_union(m) == edges);
      REQUIRE(scores_branch(m) == branch);
      REQUIRE(write_back(m) == wb);
    }
  }
}
