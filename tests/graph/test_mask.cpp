// Mask graphs (docs/spec.md §1): the interval form agrees with the set definitions, and bad parameters
// are rejected with the violated constraint named.
#include <catch2/catch.hpp>
#include <random>

#include "cf/core/error.hpp"
#include "cf/graph/mask.hpp"
#include "cf/graph/schedule.hpp"
#include "geometry.hpp"

using namespace cf::graph;

TEST_CASE("mask: interval sources equal the set definitions on random geometries", "[graph][boundary]") {
  std::mt19937_64 rng(7);
  for (const auto& g : test::random_geometries(rng, 40, 160, 24)) {
    for (const auto& p : test::random_patterns(rng, g.b)) {
      const Mask m = make_mask(p, g.n);
      for (Index t = 0; t < g.n; ++t) {
        const IntervalSet src = sources(m, t);
        for (Index s = 0; s < g.n; ++s) {
          INFO(describe(p) << " n=" << g.n << " s=" << s << " t=" << t);
          REQUIRE(contains(src, s) == has_edge_brute_force(m, s, t));
        }
      }
    }
  }
}

TEST_CASE("mask: dense export is causal, has self edges, and matches the edge predicate", "[graph]") {
  Pattern p;
  p.kind = PatternKind::SeBridge;
  p.b = 8;
  p.e = 3;
  const Mask m = make_mask(p, 37);
  const auto A = dense_mask(m);
  for (Index t = 0; t < 37; ++t) {
    REQUIRE(A(t, t) == 1);
    for (Index s = t + 1; s < 37; ++s) REQUIRE(A(t, s) == 0);
    for (Index s = 0; s <= t; ++s) REQUIRE((A(t, s) == 1) == has_edge_brute_force(m, s, t));
  }
  REQUIRE_THROWS_AS(dense_mask(make_mask(p, 100000)), cf::InvalidArgument);
}

TEST_CASE("mask: bridge windows follow docs/spec.md §1 (one per boundary, clipped)", "[graph][boundary]") {
  Pattern p;
  p.kind = PatternKind::SeBridge;
  p.b = 128;
  p.e = 64;
  auto W = bridge_windows(make_mask(p, 1000));  // 8 blocks, last cropped to 104
  REQUIRE(W.size() == 7);
  REQUIRE(W.back().p == 896);
  REQUIRE(W.back().s_lo == 768);
  REQUIRE(W.back().r_hi == 960);
  p.kind = PatternKind::Pbb;
  p.w = 128;
  W = bridge_windows(make_mask(p, 900));
  REQUIRE(W.back().p == 896);
  REQUIRE(W.back().r_hi == 900);  // clipped to n
}

TEST_CASE("mask: invalid parameters name the violated constraint", "[graph]") {
  Pattern p;
  p.kind = PatternKind::Block;
  p.b = 0;
  REQUIRE_THROWS_WITH(validate(p, 10), Catch::Contains("b must be >= 1"));
  p.b = 8;
  REQUIRE_THROWS_WITH(validate(p, 0), Catch::Contains("n must be >= 1"));
  p.kind = PatternKind::Pbb;
  p.w = 7;
  REQUIRE_THROWS_WITH(validate(p, 10), Catch::Contains("even"));
  p.w = 18;
  REQUIRE_THROWS_WITH(validate(p, 10), Catch::Contains("<= b"));
  p.kind = PatternKind::SeBridge;
  p.e = 9;
  REQUIRE_THROWS_WITH(validate(p, 10), Catch::Contains("e <= b"));
  REQUIRE_THROWS_WITH(parse_pattern_kind("dilated"), Catch::Contains("known patterns"));
}

TEST_CASE("schedule: parsing lists and repeats", "[graph]") {
  Pattern base;
  base.b = 16;
  base.w = 16;
  auto s = parse_schedule("pbb,pbb,pbb,full", base);
  REQUIRE(s.layers.size() == 4);
  REQUIRE(s.layers[3].kind == PatternKind::Full);
  REQUIRE(describe(parse_schedule("swa*3,full", base)) == "swa,swa,swa,full");
  REQUIRE_THROWS_AS(parse_schedule("", base), cf::InvalidArgument);
  REQUIRE_THROWS_AS(parse_schedule("pbb,,full", base), cf::InvalidArgument);
  REQUIRE_THROWS_AS(parse_schedule("pbb,nope", base), cf::InvalidArgument);
}
