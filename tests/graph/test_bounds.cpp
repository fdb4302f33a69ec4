// Accuracy bounds (Boundary repair (Yang) §3.3, §3.8-3.9): checked against the best accuracy achievable on a
// random masked stack, observed numerically (tests/graph/network.hpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/core/error.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/graph/coverage.hpp"
#include "network.hpp"

using namespace cf::graph;

TEST_CASE("Theorem 2 (boundary-copy lower bound): a fixed-block stack reaches accuracy 1/K and CE >= log K",
          "[graph][boundary]") {
  std::mt19937_64 rng(61);
  std::normal_distribution<double> N(0, 1);
  for (int K : {2, 3, 7}) {
    const Index b = 6, n = 3 * b, p = b;
    Pattern blk;
    blk.kind = PatternKind::Block;
    blk.b = b;
    const Schedule s = uniform_schedule(blk, 3);
    test::RandomStack net(s, n, 4, 1234 + K);
    Eigen::MatrixXd x = Eigen::MatrixXd::NullaryExpr(4, n, [&] { return N(rng); });
    std::vector<Eigen::VectorXd> hp;
    for (int c = 0; c < K; ++c) {
      x.col(p - 1) = Eigen::Vector4d::NullaryExpr([&] { return N(rng); });  // class c's token
      hp.push_back(net.forward(x).col(p));
    }
    for (int c = 1; c < K; ++c) REQUIRE((hp[c] - hp[0]).norm() == 0.0);  // Lemma 1 + Theorem 1
    // Any readout then gives one distribution q for every class.
    for (int trial = 0; trial < 5; ++trial) {
      Eigen::MatrixXd W = Eigen::MatrixXd::NullaryExpr(K, 4, [&] { return 3 * N(rng); });
      Eigen::VectorXd logits = W * hp[0];
      Eigen::VectorXd q = (logits.array() - logits.maxCoeff()).exp();
      q /= q.sum();
      int correct = 0;
      double ce = 0;
      for (int c = 0; c < K; ++c) {
        Eigen::Index arg;
        (W * hp[c]).maxCoeff(&arg);
        correct += (arg == c);
        ce += -std::log(q(c)) / K;
      }
      const AccuracyBound bound = boundary_copy_bound(K);
      REQUIRE(double(correct) / K <= bound.accuracy_max + 1e-15);
      REQUIRE(ce >= bound.cross_entropy_min - 1e-12);
    }
  }
}

TEST_CASE("Proposition 3 (coverage-limited accuracy): best accuracy = pi + (1-pi)/K on mixed probes",
          "[graph][boundary]") {
  std::mt19937_64 rng(71);
  std::normal_distribution<double> N(0, 1);
  const Index b = 8, n = 40;
  const int K = 4;
  for (PatternKind k : {PatternKind::Block, PatternKind::Pbb, PatternKind::SeBridge, PatternKind::Swa}) {
    Pattern p;
    p.kind = k;
    p.b = b;
    p.w = 8;
    p.e = 4;
    const Mask m = make_mask(p, n);
    test::RandomStack net(uniform_schedule(p, 1), n, 3, 77);
    Eigen::MatrixXd x = Eigen::MatrixXd::NullaryExpr(3, n, [&] { return N(rng); });
    std::vector<PairProbe> probes;
    std::uniform_int_distribution<Index> T(b, n - 1), D(1, 2 * b);
    double best = 0;
    for (int i = 0; i < 60; ++i) {
      const Index t = T(rng), u = std::max<Index>(0, t - D(rng));
      probes.push_back({u, t, 1.0});
      // Observed: do the K class tokens at u give K distinct h_t? Then a readout can decode them
      // all; if they give one h_t, every readout is right for one class in K.
      std::vector<Eigen::VectorXd> ht;
      for (int c = 0; c < K; ++c) {
        Eigen::MatrixXd xc = x;
        xc.col(u) = Eigen::Vector3d::Constant(0.5 * c - 0.7);
        ht.push_back(net.forward(xc).col(t));
      }
      bool distinct = true, identical = true;
      for (int c = 1; c < K; ++c) {
        const double dn = (ht[c] - ht[0]).norm();
        distinct &= dn > 1e-12;
        identical &= dn == 0.0;
      }
      REQUIRE((distinct || identical));
      best += distinct ? 1.0 : 1.0 / K;
    }
    best /= probes.size();
    const double pi = covered_fraction(m, probes);
    INFO(describe(p) << " pi=" << pi);
    REQUIRE(best == Approx(coverage_limited_bound(pi, K).accuracy_max).margin(1e-12));
    REQUIRE(coverage_limited_bound(pi, K).cross_entropy_min == Approx((1 - pi) * std::log(4.0)));
  }
}

TEST_CASE("pi_D from phase probes equals the covered fraction of (u, t) pairs on a sequence", "[graph][boundary]") {
  Pattern p;
  p.kind = PatternKind::SeBridge;
  p.b = 16;
  p.e = 8;
  const Index n = 16 * 5;
  const Mask m = make_mask(p, n);
  std::vector<PhaseProbe> phase;
  std::vector<PairProbe> pairs;
  std::mt19937_64 rng(81);
  std::uniform_int_distribution<Index> D(0, 31), R(0, 15);
  std::uniform_real_distribution<double> W(0.0, 2.0);
  for (int i = 0; i < 200; ++i) {
    const Index d = D(rng), r = R(rng);
    const double w = W(rng);
    phase.push_back({d, r, w});
    pairs.push_back({3 * 16 + r - d, 3 * 16 + r, w});  // the same cell at block j = 3
  }
  REQUIRE(covered_fraction(p, phase) == Approx(covered_fraction(m, pairs)).margin(1e-14));
  REQUIRE(covered_fraction(closure(uniform_schedule(p, 1), n), pairs) == Approx(covered_fraction(m, pairs)));
}

TEST_CASE("U_D and rho_D (Boundary repair (Yang) Eq. 33) and bound preconditions", "[graph][boundary]") {
  // U_D: accuracy gain per added score; rho_D: share of the SWA-over-Block gap recovered.
  REQUIRE(cost_normalised_gain(0.6, 0.4, 195744, 66048) == Approx(0.2 / (195744 - 66048)));
  REQUIRE(swa_gap_recovery(0.55, 0.4, 0.7) == Approx(0.5));
  REQUIRE_THROWS_AS(cost_normalised_gain(0.5, 0.4, 10, 10), cf::InvalidArgument);
  REQUIRE_THROWS_AS(swa_gap_recovery(0.5, 0.4, 0.4), cf::InvalidArgument);
  REQUIRE_THROWS_AS(boundary_copy_bound(1), cf::InvalidArgument);
  REQUIRE_THROWS_AS(coverage_limited_bound(1.5, 4), cf::InvalidArgument);
  REQUIRE_THROWS_AS(covered_fraction(Pattern{}, std::vector<PhaseProbe>{}), cf::InvalidArgument);
}

TEST_CASE("probe CSV: phase and pair forms, weights, and errors with line numbers", "[graph]") {
  const ProbeSet a = parse_probe_csv("d,r\n1,0\n# comment\n5,3\n", "a.csv");
  REQUIRE(a.phase.size() == 2);
  REQUIRE(a.phase[1].d == 5);
  REQUIRE(a.phase[1].weight == 1.0);
  const ProbeSet b = parse_probe_csv("u,t,weight\n3,10,0.5\n", "b.csv");
  REQUIRE(b.pairs.size() == 1);
  REQUIRE(b.pairs[0].weight == 0.5);
  REQUIRE_THROWS_WITH(parse_probe_csv("", "e.csv"), Catch::Contains("empty"));
  REQUIRE_THROWS_WITH(parse_probe_csv("x,y\n1,2\n", "h.csv"), Catch::Contains("header"));
  REQUIRE_THROWS_WITH(parse_probe_csv("d,r\n1,2\n3\n", "f.csv"), Catch::Contains("f.csv:3"));
  REQUIRE_THROWS_WITH(parse_probe_csv("d,r\n1,zz\n", "g.csv"), Catch::Contains("not a number"));
  REQUIRE_THROWS_WITH(parse_probe_csv("d,r\n", "n.csv"), Catch::Contains("no probes"));
}
