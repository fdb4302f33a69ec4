// Structural dependency sets R_l(t) (Boundary repair (Yang) §3.1-3.2, docs/spec.md §1).
#include <catch2/catch.hpp>
#include <random>

#include "cf/graph/coverage.hpp"
#include "cf/graph/reachability.hpp"
#include "geometry.hpp"
#include "network.hpp"

using namespace cf::graph;

TEST_CASE("closure: fast interval closure equals brute-force closure on random schedules", "[graph][boundary]") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> nl(1, 5);
  for (const auto& g : test::random_geometries(rng, 30, 120, 20)) {
    auto pats = test::random_patterns(rng, g.b);
    std::uniform_int_distribution<size_t> pick(0, pats.size() - 1);
    Schedule s;
    const int L = nl(rng);
    for (int l = 0; l < L; ++l) s.layers.push_back(pats[pick(rng)]);
    INFO(describe(s) << " n=" << g.n << " b=" << g.b);
    const ClosureCheck chk = verify_closure(s, g.n);
    REQUIRE(chk.pairs == g.n * g.n);
    REQUIRE(chk.ok());
  }
}

TEST_CASE("closure: R_l(t) grows with depth and always contains t", "[graph][boundary]") {
  Pattern p;
  p.kind = PatternKind::Pbb;
  p.b = 16;
  p.w = 16;
  std::vector<Index> prev(200, 1);
  for (int L = 1; L <= 6; ++L) {
    const Closure c = closure(uniform_schedule(p, L), 200);
    for (Index t = 0; t < 200; ++t) {
      REQUIRE(c.contains(t, t));
      REQUIRE(c.size(t) >= prev[t]);
      prev[t] = c.size(t);
    }
  }
}

TEST_CASE("Lemma 1 (structural dependency invariance): inputs outside R_L(t) never change h_t", "[graph][boundary]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> N(0, 1);
  for (const auto& g : std::vector<test::Geometry>{{23, 5}, {30, 7}, {17, 4}}) {
    auto pats = test::random_patterns(rng, g.b);
    Schedule s{{pats[4], pats[1], pats[2]}};  // pbb, block, swa
    const Closure c = closure(s, g.n);
    test::RandomStack net(s, g.n, 3, 99);
    Eigen::MatrixXd x = Eigen::MatrixXd::NullaryExpr(3, g.n, [&] { return N(rng); });
    const Eigen::MatrixXd h = net.forward(x);
    for (Index u = 0; u < g.n; ++u) {
      Eigen::MatrixXd x2 = x;
      x2.col(u) += Eigen::Vector3d(0.7, -0.4, 0.9);
      const Eigen::MatrixXd h2 = net.forward(x2);
      for (Index t = 0; t < g.n; ++t) {
        const double diff = (h2.col(t) - h.col(t)).norm();
        INFO(describe(s) << " u=" << u << " t=" << t);
        if (!c.contains(t, u))
          REQUIRE(diff == 0.0);
        else
          REQUIRE(diff > 1e-12);  // generic weights: every structural path carries signal
      }
    }
  }
}

TEST_CASE("Theorem 1 (fixed-block reachability barrier): R_l(t) ⊆ B_j ∩ P_t at every depth", "[graph][boundary]") {
  std::mt19937_64 rng(5);
  for (const auto& g : test::random_geometries(rng, 25, 150, 20)) {
    Pattern p;
    p.kind = PatternKind::Block;
    p.b = g.b;
    for (int L : {1, 2, 7}) {
      const auto R = closure_brute_force(uniform_schedule(p, L), g.n);
      for (Index t = 0; t < g.n; ++t)
        for (Index u = 0; u < g.n; ++u)
          if (R[t][u]) {
            REQUIRE(u <= t);
            REQUIRE(u / g.b == t / g.b);
          }
    }
  }
}

TEST_CASE("Corollary 1 (adjacent boundary unreachable): p-1 ∉ R_l(p) under Block, reachable once repaired",
          "[graph][boundary]") {
  for (Index b : {1, 2, 5, 16}) {
    const Index n = 7 * b + 3;
    Pattern p;
    p.b = b;
    p.w = 2 * ((b + 1) / 2);
    p.e = std::max<Index>(1, b / 2);
    p.kind = PatternKind::Block;
    const auto Rb = closure_brute_force(uniform_schedule(p, 9), n);
    for (Index q = b; q < n; q += b) REQUIRE(Rb[q][q - 1] == 0);
    // Contrast: one PBB or SE-Bridge layer restores the edge (Lemma 2 of Boundary repair (Yang) needs just one).
    for (PatternKind k : {PatternKind::Pbb, PatternKind::SeBridge}) {
      p.kind = k;
      const Closure c = closure(uniform_schedule(p, 1), n);
      for (Index q = b; q < n; q += b) REQUIRE(c.contains(q, q - 1));
    }
  }
}

TEST_CASE("Proposition 1 (boundary-phase reachability): a fraction (b-d)/b of phases reaches d, 0 for d >= b",
          "[graph][boundary]") {
  for (Index b : {1, 3, 8, 13}) {
    const Index n = 5 * b;
    Pattern p;
    p.kind = PatternKind::Block;
    p.b = b;
    const auto R = closure_brute_force(uniform_schedule(p, 6), n);  // "all depths": 6 layers
    for (Index J = 2; J < 5; ++J)                                   // J >= 2 keeps u = t - d >= 0 for d <= 2b
      for (Index d = 0; d <= 2 * b; ++d) {
        Index reach = 0;
        for (Index r = 0; r < b; ++r) reach += R[J * b + r][J * b + r - d];
        const double expected = d < b ? double(b - d) / b : 0.0;
        REQUIRE(double(reach) / b == Approx(expected).margin(1e-15));
        // and exactly the phases with d <= r (Eq. 17)
        for (Index r = 0; r < b; ++r) REQUIRE((R[J * b + r][J * b + r - d] == 1) == (d <= r));
      }
  }
}

TEST_CASE("closure: deep schedules stop at the fixed point and equal a shallower exact closure", "[graph]") {
  Pattern p;
  p.kind = PatternKind::Swa;
  p.w = 5;
  // SWA(5) reaches back 4 positions per layer: 60 positions are covered after 15 layers; any
  // deeper closure must equal the 15-layer one, and a million layers must not take long.
  const Closure c15 = closure(uniform_schedule(p, 15), 60);
  const Closure deep = closure(uniform_schedule(p, 1000000), 60);
  for (Index t = 0; t < 60; ++t) REQUIRE(deep.set(t) == c15.set(t));
  REQUIRE(deep.size(59) == 60);
  Pattern base;
  base.b = 8;
  base.w = 8;
  const Closure mixed = closure(parse_schedule("pbb*5000,full", base), 100);
  REQUIRE(mixed.size(99) == 100);
}
