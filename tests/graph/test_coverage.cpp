// Phase-conditioned coverage functions (Boundary repair (Yang) §3.5-3.6, docs/spec.md §1), each checked against the
// edge sets built straight from the set definitions, on random geometries (n not a multiple of b,
// windows clipped at both ends).
#include <catch2/catch.hpp>
#include <random>

#include "cf/graph/coverage.hpp"
#include "geometry.hpp"

using namespace cf::graph;

static void check_pattern_kind(PatternKind kind, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const auto& g : test::random_geometries(rng, 40, 200, 24)) {
    for (auto p : test::random_patterns(rng, g.b)) {
      if (p.kind != kind) continue;
      const Mask m = make_mask(p, g.n);
      const CoverageCheck chk = verify_coverage_closed_form(m, 3 * g.b);
      INFO(describe(p) << " n=" << g.n);
      REQUIRE(chk.checked > 0);
      REQUIRE(chk.ok());
    }
  }
}

TEST_CASE("C_Block (Eq. 18) equals direct coverage of the block edge set", "[graph][boundary]") {
  check_pattern_kind(PatternKind::Block, 21);
}
TEST_CASE("C_SWA (Eq. 22) equals direct coverage of the sliding-window edge set", "[graph][boundary]") {
  check_pattern_kind(PatternKind::Swa, 22);
}
TEST_CASE("C_PBB (Eq. 23) equals direct coverage of the PBB edge set", "[graph][boundary]") {
  check_pattern_kind(PatternKind::Pbb, 23);
}
TEST_CASE("C_Bridge = C_PBB (Eq. 23, Prop. 2) equals direct coverage of the centered Bridge edge set",
          "[graph][boundary]") {
  check_pattern_kind(PatternKind::Bridge, 24);
}
TEST_CASE("C_SE (Eq. 24) equals direct coverage of the SE-Bridge edge set", "[graph][boundary]") {
  check_pattern_kind(PatternKind::SeBridge, 25);
}
TEST_CASE("C_Full equals direct coverage of the full causal edge set", "[graph]") {
  check_pattern_kind(PatternKind::Full, 26);
}

TEST_CASE("Theorem 3 (coverage-conditioned direct repair): a bridge window gives (u,t) iff u∈S_j, t∈R_j, u<=t",
          "[graph][boundary]") {
  std::mt19937_64 rng(31);
  for (const auto& g : test::random_geometries(rng, 30, 150, 20)) {
    for (auto p : test::random_patterns(rng, g.b)) {
      if (p.kind != PatternKind::Bridge && p.kind != PatternKind::Pbb && p.kind != PatternKind::SeBridge) continue;
      const Mask m = make_mask(p, g.n);
      const auto W = bridge_windows(m);
      for (Index t = 0; t < g.n; ++t) {
        const IntervalSet br = bridge_sources(m, t);
        for (Index u = 0; u < g.n; ++u) {
          bool by_theorem = false;
          for (const auto& w : W) by_theorem |= (u >= w.s_lo && u < w.s_hi && t >= w.r_lo && t < w.r_hi && u <= t);
          INFO(describe(p) << " n=" << g.n << " u=" << u << " t=" << t);
          REQUIRE(contains(br, u) == by_theorem);
        }
      }
    }
  }
}

TEST_CASE("Proposition 2 (redundant pre-boundary write-back): A_bridge(t) ⊆ A_block(t) for p-h <= t < p",
          "[graph][boundary]") {
  std::mt19937_64 rng(41);
  for (const auto& g : test::random_geometries(rng, 30, 150, 20)) {
    Pattern p = test::random_patterns(rng, g.b)[3];  // centered Bridge, h <= b
    const Mask m = make_mask(p, g.n);
    for (const auto& w : bridge_windows(m))
      for (Index t = w.r_lo; t < std::min(w.p, m.n); ++t)
        for (Index s = 0; s <= t; ++s)
          if (s >= w.s_lo && s < w.s_hi) REQUIRE(s / g.b == t / g.b);  // the block edge exists already
    // Hence Bridge and PBB have the same union edge set.
    Pattern q = p;
    q.kind = PatternKind::Pbb;
    for (Index t = 0; t < g.n; ++t) REQUIRE(sources(m, t) == sources(make_mask(q, g.n), t));
  }
}

TEST_CASE("Proposition 4 (coverage non-equivalence): with b = w and 0 < e < b-1, SWA and SE are not nested",
          "[graph][boundary]") {
  for (Index b : {3, 4, 8, 32, 128}) {
    for (Index e = 1; e < b - 1; ++e) {
      Pattern swa, se;
      swa.kind = PatternKind::Swa;
      swa.b = b;
      swa.w = b;
      se.kind = PatternKind::SeBridge;
      se.b = b;
      se.e = e;
      // The paper's witnesses, checked on the edge sets of a real sequence (t in block 2).
      const Index n = 4 * b;
      const Mask mswa = make_mask(swa, n), mse = make_mask(se, n);
      const Index t1 = 2 * b + e, t0 = 2 * b;
      REQUIRE(coverage_direct(mswa, t1, e + 1));
      REQUIRE_FALSE(coverage_direct(mse, t1, e + 1));
      REQUIRE(coverage_direct(mse, t0, b));
      REQUIRE_FALSE(coverage_direct(mswa, t0, b));
      const auto rep = compare_coverage(swa, se, 2 * b);
      REQUIRE(rep.only_a > 0);
      REQUIRE(rep.only_b > 0);
    }
  }
  // Outside the hypothesis the sets can be nested: e = b-1 makes SWA ⊆ SE.
  Pattern swa, se;
  swa.kind = PatternKind::Swa;
  swa.b = swa.w = 8;
  se.kind = PatternKind::SeBridge;
  se.b = 8;
  se.e = 7;
  REQUIRE(compare_coverage(swa, se, 16).only_a == 0);
}

TEST_CASE("coverage: one-layer closure map equals the closed form, and Block closure at depth equals C_Block",
          "[graph][boundary]") {
  for (PatternKind k : {PatternKind::Block, PatternKind::Swa, PatternKind::Pbb, PatternKind::SeBridge}) {
    Pattern p;
    p.kind = k;
    p.b = 16;
    p.w = 16;
    p.e = 8;
    const Index n = 16 * 6 + 5;
    const CoverageMatrix cf = coverage_matrix_closed_form(p, 32);
    const CoverageMatrix c1 = coverage_matrix_closure(closure(uniform_schedule(p, 1), n), 16, 3, 32);
    REQUIRE(c1 == cf);
    if (k == PatternKind::Block) {
      const CoverageMatrix c9 = coverage_matrix_closure(closure(uniform_schedule(p, 9), n), 16, 3, 32);
      REQUIRE(c9 == cf);
    }
  }
}
