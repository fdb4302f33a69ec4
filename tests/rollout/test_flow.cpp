// Attention flow (cf/rollout/flow.hpp): max-flow min-cut certificates recomputed on the FULL
// layered graph from the returned source side, closed forms for one layer and n = 2, the layered
// solver and the two Boost solvers against each other, the rollout lower bound and the trivial-cut upper bounds.
// The networkx oracle (flow values) is tests/rollout/flow_networkx.py.
#include <catch2/catch.hpp>
#include <random>

#include "cf/core/error.hpp"
#include "cf/rollout/flow.hpp"

using namespace cf::rollout;

namespace {

/// L random causal row-stochastic kernels; a share of the causal entries is exactly 0 (sparsity
/// exercises the pruning of nodes that cannot reach the sink).
std::vector<RowMatrix> random_kernels(std::mt19937_64& rng, int L, long n, double zero_share) {
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<RowMatrix> ks;
  for (int l = 0; l < L; ++l) {
    RowMatrix K = RowMatrix::Zero(n, n);
    for (long i = 0; i < n; ++i) {
      for (long j = 0; j <= i; ++j) K(i, j) = U(rng) < zero_share ? 0.0 : std::pow(U(rng), 3);
      if (K.row(i).sum() == 0) K(i, i) = 1;
      K.row(i) /= K.row(i).sum();
    }
    ks.push_back(K);
  }
  return ks;
}

Eigen::VectorXd random_alpha(std::mt19937_64& rng, int L) {
  std::uniform_real_distribution<double> U(0, 1);
  Eigen::VectorXd a(L);
  for (int l = 0; l < L; ++l) a(l) = U(rng) < 0.15 ? 1.0 : U(rng);  // alpha = 1: no residual at all
  return a;
}

/// Capacity of the cut (S, not S) in the full layered graph: every edge (l-1, k) -> (l, i), k <= i,
/// with R_l[i, k] > 0, k in S and i not in S. The sink is (L, t).
double full_cut(const std::vector<RowMatrix>& R, const std::vector<std::vector<char>>& S) {
  double c = 0;
  const long n = R[0].rows();
  for (std::size_t l = 1; l <= R.size(); ++l)
    for (long i = 0; i < n; ++i)
      for (long k = 0; k <= i; ++k)
        if (S[l - 1][k] && !S[l][i]) c += R[l - 1](i, k);
  return c;
}

/// P(L) = R_L ... R_1 by plain products (the rollout of variant (b) on these kernels).
RowMatrix product(const std::vector<RowMatrix>& R) {
  RowMatrix P = RowMatrix::Identity(R[0].rows(), R[0].rows());
  for (const auto& M : R) P = (M * P).eval();
  return P;
}

}  // namespace

TEST_CASE(
    "Attention flow: max-flow min-cut certificate, cut of S in the full graph = flow, 60 random graphs L 1-6 n 2-24",
    "[flow]") {
  std::mt19937_64 rng(34);
  std::uniform_int_distribution<int> Ld(1, 6);
  std::uniform_int_distribution<long> nd(2, 24);
  long checked = 0;
  for (int g = 0; g < 60; ++g) {
    const int L = Ld(rng);
    const long n = nd(rng);
    const auto R = residual_mixed_kernels(random_kernels(rng, L, n, g % 3 == 0 ? 0.6 : 0.1), random_alpha(rng, L));
    const long t = g % 4 == 0 ? n / 2 : n - 1;
    for (auto alg : {FlowAlgorithm::Layered, FlowAlgorithm::BoykovKolmogorov, FlowAlgorithm::PushRelabel})
      for (long j = 0; j <= t; ++j) {
        const SingleFlow f = max_flow_single(R, j, t, alg, true);
        const auto& S = f.source_side;
        REQUIRE(S.size() == static_cast<std::size_t>(L + 1));
        REQUIRE(S[0][j] == 1);  // the source is in S
        REQUIRE(S[L][t] == 0);  // the sink is not
        const double cut = full_cut(R, S);
        INFO("graph " << g << " L = " << L << " n = " << n << " t = " << t << " source " << j << " "
                      << flow_algorithm_name(alg) << ": flow " << f.value << " cut " << cut);
        REQUIRE(std::abs(cut - f.value) <= 1e-12 * std::max(1.0, f.value));
        REQUIRE(std::abs(f.cut_capacity - f.value) <= 1e-12 * std::max(1.0, f.value));
        ++checked;
      }
  }
  CHECK(checked > 1500);
}

TEST_CASE("Attention flow: layered, Boykov-Kolmogorov and push-relabel agree to 1e-12, 30 random graphs", "[flow]") {
  std::mt19937_64 rng(7);
  for (int g = 0; g < 30; ++g) {
    const int L = 1 + g % 6;
    const long n = 2 + (g * 7) % 30;
    const auto R = residual_mixed_kernels(random_kernels(rng, L, n, 0.3), random_alpha(rng, L));
    FlowOptions a, b, c;
    a.algorithm = FlowAlgorithm::BoykovKolmogorov;
    b.algorithm = FlowAlgorithm::PushRelabel;
    c.algorithm = FlowAlgorithm::Layered;
    const FlowResult fa = attention_flow(R, a), fb = attention_flow(R, b), fc = attention_flow(R, c);
    for (long j = 0; j < n; ++j) {
      REQUIRE(std::abs(fa.flow(j) - fb.flow(j)) <= 1e-12 * std::max(1.0, fa.flow(j)));
      REQUIRE(std::abs(fa.flow(j) - fc.flow(j)) <= 1e-12 * std::max(1.0, fa.flow(j)));
    }
    CHECK(fa.max_cut_gap <= 1e-12);
    CHECK(fc.max_cut_gap <= 1e-12);
    CHECK(std::abs(fa.profile.sum() - 1) < 1e-12);
  }
}

TEST_CASE("Attention flow: the layered solver equals Boost push-relabel on larger random graphs (L 2-12, n 40-160)",
          "[flow]") {
  // larger and sparser than the networkx oracle's graphs; sparse kernels and alpha = 1 layers make
  // the first blocking flow fall short, so the later Dinic phases (residual BFS, reverse arcs) run
  std::mt19937_64 rng(3434);
  long multi_phase = 0;
  for (int g = 0; g < 12; ++g) {
    const int L = 2 + g % 11;
    const long n = 40 + (g * 37) % 121;
    const double zero = g % 3 == 0 ? 0.0 : (g % 3 == 1 ? 0.7 : 0.95);
    const auto R = residual_mixed_kernels(random_kernels(rng, L, n, zero), random_alpha(rng, L));
    FlowOptions pr, ly;
    pr.algorithm = FlowAlgorithm::PushRelabel;
    ly.algorithm = FlowAlgorithm::Layered;
    const FlowResult a = attention_flow(R, pr), b = attention_flow(R, ly);
    INFO("graph " << g << " L = " << L << " n = " << n << " zeros " << zero);
    for (long j = 0; j < n; ++j) REQUIRE(std::abs(a.flow(j) - b.flow(j)) <= 1e-12 * std::max(1.0, a.flow(j)));
    REQUIRE(b.max_cut_gap <= 1e-12);
    multi_phase += b.max_phases > 1;
    for (long j = 0; j < n; j += 7) {  // certificates recomputed on the full graph
      const SingleFlow f = max_flow_single(R, j, n - 1, FlowAlgorithm::Layered, true);
      REQUIRE(std::abs(full_cut(R, f.source_side) - f.value) <= 1e-12 * std::max(1.0, f.value));
    }
  }
  CHECK(multi_phase > 0);
}

TEST_CASE("Attention flow: one layer, the flow of j is the single edge R_1[t, j]", "[flow]") {
  std::mt19937_64 rng(11);
  const auto R = residual_mixed_kernels(random_kernels(rng, 1, 9, 0.3), Eigen::VectorXd::Constant(1, 0.7));
  for (long t = 0; t < 9; ++t)
    for (long j = 0; j <= t; ++j) {
      CHECK(max_flow_single(R, j, t).value == R[0](t, j));
      CHECK(max_flow_single(R, j, t, FlowAlgorithm::BoykovKolmogorov).value == R[0](t, j));
    }
}

TEST_CASE("Attention flow: n = 2, L = 2 closed form min(R1[0,0], R2[1,0]) + min(R1[1,0], R2[1,1])", "[flow]") {
  // source (0,0) reaches (1,0) and (1,1); each carries to the sink (2,1) through its own edge
  RowMatrix A(2, 2), B(2, 2);
  A << 1, 0, 0.3, 0.7;
  B << 1, 0, 0.45, 0.55;
  const std::vector<RowMatrix> R = {A, B};
  const double f0 = std::min(1.0, 0.45) + std::min(0.3, 0.55), f1 = std::min(0.7, 0.55);
  for (auto alg : {FlowAlgorithm::Layered, FlowAlgorithm::BoykovKolmogorov, FlowAlgorithm::PushRelabel}) {
    FlowOptions o;
    o.algorithm = alg;
    const FlowResult fr = attention_flow(R, o);
    CHECK(fr.flow(0) == Approx(f0).epsilon(1e-15));
    CHECK(fr.flow(1) == Approx(f1).epsilon(1e-15));
    CHECK(fr.profile(0) == Approx(f0 / (f0 + f1)).epsilon(1e-15));
  }
}

TEST_CASE("Attention flow is at least the rollout P(L)[t, j] (the path-product flow is feasible for stochastic R)",
          "[flow]") {
  // f_l(i, k) = P_{>l}[t, i] R_l[i, k] P_{<l}[k, j] is conserved at every node and below R_l[i, k]
  // (products of row-stochastic matrices have entries <= 1): a feasible flow of value P(L)[t, j].
  std::mt19937_64 rng(5);
  for (int g = 0; g < 25; ++g) {
    const int L = 1 + g % 6;
    const long n = 3 + g;
    const auto R = residual_mixed_kernels(random_kernels(rng, L, n, 0.2), random_alpha(rng, L));
    const RowMatrix P = product(R);
    const FlowResult fr = attention_flow(R);
    for (long j = 0; j < n; ++j) REQUIRE(fr.flow(j) >= P(n - 1, j) * (1 - 1e-12));
  }
}

TEST_CASE("Attention flow is at most the source out-capacity and the sink in-capacity, hence <= 1 for stochastic rows",
          "[flow]") {
  std::mt19937_64 rng(9);
  for (int g = 0; g < 25; ++g) {
    const int L = 2 + g % 5;
    const long n = 4 + g;
    const auto R = residual_mixed_kernels(random_kernels(rng, L, n, 0.2), random_alpha(rng, L));
    const long t = n - 1 - g % 3;
    FlowOptions o;
    o.target = t;
    const FlowResult fr = attention_flow(R, o);
    for (long j = 0; j <= t; ++j) {
      double out = 0, in = 0;  // recomputed here from R
      for (long i = j; i <= t; ++i) out += R[0](i, j);
      for (long k = j; k <= t; ++k) in += R[L - 1](t, k);
      REQUIRE(fr.flow(j) <= std::min(out, in) * (1 + 1e-12));
      REQUIRE(fr.flow(j) <= 1 + 1e-12);
      REQUIRE(flow_upper_bound(R, j, t) == Approx(std::min(out, in)).epsilon(1e-14));
    }
    for (long j = t + 1; j < n; ++j) REQUIRE(fr.flow(j) == 0);
  }
}

TEST_CASE("Attention flow matrix: row t equals the single-target flows to t, zero above the diagonal", "[flow]") {
  std::mt19937_64 rng(3);
  const auto R = residual_mixed_kernels(random_kernels(rng, 3, 12, 0.3), random_alpha(rng, 3));
  const RowMatrix F = attention_flow_matrix(R);
  const RowMatrix G = attention_flow_matrix(R, FlowAlgorithm::PushRelabel);
  for (long t = 0; t < 12; ++t) {
    FlowOptions o;
    o.target = t;
    o.algorithm = FlowAlgorithm::PushRelabel;
    const FlowResult fr = attention_flow(R, o);
    for (long j = 0; j < 12; ++j) {
      CHECK(F(t, j) == Approx(fr.flow(j)).margin(1e-15).epsilon(1e-12));
      CHECK(G(t, j) == Approx(fr.flow(j)).margin(1e-15).epsilon(1e-12));
    }
  }
}

TEST_CASE("Attention flow: a subset of sources gives the same values as all sources", "[flow]") {
  std::mt19937_64 rng(21);
  const auto R = residual_mixed_kernels(random_kernels(rng, 4, 20, 0.2), random_alpha(rng, 4));
  const FlowResult all = attention_flow(R);
  FlowOptions o;
  o.sources = {3, 17, 0};
  const FlowResult some = attention_flow(R, o);
  for (long j : o.sources) CHECK(some.flow(j) == all.flow(j));
  CHECK(some.flow(5) == 0);
  CHECK(std::isnan(some.cut(5)));
}

TEST_CASE("Attention flow: malformed kernels and positions are refused naming the entry", "[flow]") {
  RowMatrix A = RowMatrix::Identity(3, 3);
  std::vector<RowMatrix> R = {A, A};
  CHECK_THROWS_AS(max_flow_single(R, 0, 3), cf::InvalidArgument);
  CHECK_THROWS_AS(max_flow_single(R, 2, 1), cf::InvalidArgument);
  FlowOptions o;
  o.target = -2;
  CHECK_THROWS_AS(attention_flow(R, o), cf::InvalidArgument);
  R[1](2, 0) = -0.1;
  CHECK_THROWS_WITH(attention_flow(R), Catch::Contains("layer 2 entry [2, 0]"));
  R[1](2, 0) = std::nan("");
  CHECK_THROWS_AS(attention_flow(R), cf::InvalidArgument);
  R[1] = RowMatrix::Identity(2, 2);
  CHECK_THROWS_WITH(attention_flow(R), Catch::Contains("layer 2 kernel is 2 x 2"));
  CHECK_THROWS_WITH(residual_mixed_kernels({A}, Eigen::VectorXd::Constant(2, 1.5)), Catch::Contains("alpha_1"));
  CHECK_THROWS_AS(parse_flow_algorithm("dinic"), cf::InvalidArgument);
  CHECK_THROWS_WITH(parse_flow_algorithm("dinic"),
                    "--algorithm: unknown max-flow algorithm 'dinic' (expected layered | push-relabel | bk)");
  CHECK(parse_flow_algorithm("push-relabel") == FlowAlgorithm::PushRelabel);
  CHECK(flow_algorithm_name(FlowAlgorithm::BoykovKolmogorov) == "bk");
  CHECK(parse_flow_algorithm("layered") == FlowAlgorithm::Layered);
  CHECK(flow_algorithm_name(FlowAlgorithm::Layered) == "layered");
}

TEST_CASE("Attention flow: identity kernels carry exactly 1 along the diagonal of the target only", "[flow]") {
  // R_l = I: the only path from (0, j) stays at position j, so only j = t reaches the sink
  const std::vector<RowMatrix> R(4, RowMatrix::Identity(6, 6));
  const FlowResult fr = attention_flow(R);
  for (long j = 0; j < 5; ++j) CHECK(fr.flow(j) == 0);
  CHECK(fr.flow(5) == 1);
  CHECK(fr.max_cut_gap == 0);
}
