// The device kernel products and monotonicity sums of `rollout --matrix`, `jacobian`, `monotonicity`
// and `verify` (cf::gpu::make_product_backend, cf/rollout/product_backend.hpp; issue 30), executed
// on the emulated device (the loops nvcc compiles for sm_90, on the CPU) against lib/rollout's CPU
// functions with no backend: the full rollout matrix, the Runway (Lee & Clark) Theorem 3.3 bound,
// the prefix masses by depth, the monotonicity statistics and the Props. 4.2-4.5 checks.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/rollout_backend.hpp"
#include "cf/rollout/jacobian_bound.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/rollout.hpp"

namespace {

using cf::rollout::RowMatrix;

// Row-stochastic n x n kernels: causal (lower triangular, random positive weights) or full.
RowMatrix random_kernel(std::mt19937& g, long n, bool causal) {
  std::uniform_real_distribution<double> u(0.01, 1.0);
  RowMatrix A = RowMatrix::Zero(n, n);
  for (long i = 0; i < n; ++i) {
    for (long j = 0; j < (causal ? i + 1 : n); ++j) A(i, j) = u(g);
    A.row(i) /= A.row(i).sum();
  }
  return A;
}

// A three-head ALiBi kernel per layer (stochastically monotone, as verify's random kernels).
std::vector<RowMatrix> alibi_kernels(int L, long n) {
  std::vector<RowMatrix> ks;
  for (int l = 0; l < L; ++l) {
    cf::rollout::AlibiModel m;
    m.slopes = {0.01 * (l + 1), 0.3, 2.0};
    m.head_weights = {0.5, 0.3, 0.2};
    ks.push_back(cf::rollout::alibi_kernel_dense(m, 0, n));
  }
  return ks;
}

// Every entry of `dev` within 1e-12 relative of `cpu` (1e-300 absolute: the CPU flushes denormals).
void require_close(const Eigen::MatrixXd& cpu, const Eigen::MatrixXd& dev) {
  REQUIRE(cpu.rows() == dev.rows());
  REQUIRE(cpu.cols() == dev.cols());
  double worst = 0;
  for (long i = 0; i < cpu.rows(); ++i)
    for (long j = 0; j < cpu.cols(); ++j) {
      REQUIRE(std::isfinite(dev(i, j)));
      const double d = std::abs(cpu(i, j) - dev(i, j));
      REQUIRE(d <= 1e-300 + 1e-12 * std::abs(cpu(i, j)));
      if (cpu(i, j) != 0) worst = std::max(worst, d / std::abs(cpu(i, j)));
    }
  INFO("worst relative difference " << worst);
  CHECK(worst <= 1e-12);
}

const auto device = cf::gpu::make_product_backend(cf::gpu::Placement::Emulated);

}  // namespace

TEST_CASE("gpu kernel products (emulated) = cf::rollout::rollout_matrix_dense, entry by entry", "[gpu][products]") {
  REQUIRE(device);
  REQUIRE(cf::gpu::make_product_backend(cf::gpu::Placement::Cpu) == nullptr);
  std::mt19937 g(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (long n : {1L, 2L, 37L, 90L})
    for (bool causal : {true, false}) {
      const int L = 5;
      std::vector<RowMatrix> ks;
      for (int l = 0; l < L; ++l) ks.push_back(random_kernel(g, n, causal));
      Eigen::VectorXd alpha(L);
      alpha << 0.0, 1.0, u(g), u(g), 0.5;  // alpha 0 and 1 at the ends of the residual mix
      const auto kernel = [&](int l) { return ks[static_cast<std::size_t>(l)]; };
      INFO("n = " << n << (causal ? ", causal" : ", full") << " kernels");
      require_close(cf::rollout::rollout_matrix_dense(kernel, alpha, n),
                    cf::rollout::rollout_matrix_dense(kernel, alpha, n, device.get()));
    }
}

TEST_CASE("gpu kernel products (emulated): left products over each row's support = Eigen products", "[gpu][products]") {
  // the device skips the columns outside each row's first and last nonzero entries: rows with
  // zeros inside, at both ends, a zero row and a sliding-window ALiBi kernel, against Eigen
  std::mt19937 g(5);
  const long n = 12;
  RowMatrix A = random_kernel(g, n, false);
  A.row(3).setZero();
  A.block(5, 0, 1, 4).setZero();
  A.block(5, 8, 1, 4).setZero();
  A(7, 6) = 0;
  cf::rollout::AlibiModel w;
  w.slopes = {0.2, 1.0};
  w.head_weights = {0.5, 0.5};
  w.mask.window = 4;
  const RowMatrix W = cf::rollout::alibi_kernel_dense(w, 0, n), X0 = random_kernel(g, n, false);
  const std::vector<RowMatrix> ks = {A, W, A};
  const std::vector<cf::rollout::LeftStep> steps = {{0.3, 0.7}, {1, 1}, {0, 1}};
  RowMatrix expect = X0;
  Eigen::MatrixXd rows_expect(4, n);
  rows_expect.row(0) = expect.row(n - 1);
  for (std::size_t t = 0; t < steps.size(); ++t) {
    expect = (steps[t].keep * expect + steps[t].mix * (ks[t] * expect)).eval();
    rows_expect.row(static_cast<long>(t) + 1) = expect.row(n - 1);
  }
  Eigen::MatrixXd rows;
  const RowMatrix got =
      device->left_product([&](int t) { return ks[static_cast<std::size_t>(t)]; }, steps, X0, n - 1, &rows);
  require_close(expect, got);
  require_close(rows_expect, rows);
}

TEST_CASE("gpu kernel products (emulated) refuse what the CPU refuses, with its message", "[gpu][products]") {
  const RowMatrix small = RowMatrix::Identity(3, 3);
  const auto wrong = [&](int) { return small; };
  const Eigen::VectorXd alpha = Eigen::VectorXd::Constant(2, 0.5);
  const std::string message = "rollout: kernel of layer 1 is 3 x 3, expected n x n with n = 4";
  REQUIRE_THROWS_WITH(cf::rollout::rollout_matrix_dense(wrong, alpha, 4), message);
  REQUIRE_THROWS_WITH(cf::rollout::rollout_matrix_dense(wrong, alpha, 4, device.get()), message);
  const Eigen::VectorXd bad = Eigen::VectorXd::Constant(2, 1.5);  // alpha outside [0, 1]
  REQUIRE_THROWS_AS(cf::rollout::rollout_matrix_dense(wrong, bad, 3, device.get()), cf::InvalidArgument);
  std::vector<RowMatrix> upper = {RowMatrix::Constant(3, 3, 1.0 / 3)};  // not lower triangular
  REQUIRE_THROWS_AS(cf::rollout::jacobian_bound(upper, 1.0, device.get()), cf::InvalidArgument);
}

TEST_CASE("gpu kernel products (emulated) = cf::rollout::jacobian_bound, bound self and gate terms",
          "[gpu][products]") {
  std::mt19937 g(11);
  for (long n : {1L, 2L, 23L, 64L})
    for (int r : {1, 2, 6}) {
      std::vector<RowMatrix> A;
      for (int t = 0; t < r; ++t) A.push_back(random_kernel(g, n, true));
      for (double C : {1.0, 0.7}) {
        INFO("n = " << n << ", r = " << r << ", C = " << C);
        const auto cpu = cf::rollout::jacobian_bound(A, C), dev = cf::rollout::jacobian_bound(A, C, device.get());
        require_close(cpu.self_term, dev.self_term);
        require_close(cpu.gate_term, dev.gate_term);
        require_close(cpu.bound, dev.bound);
      }
    }
}

TEST_CASE("gpu kernel products (emulated) = cf::rollout::prefix_mass_by_depth at every depth", "[gpu][products]") {
  std::mt19937 g(13);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (long n : {1L, 2L, 30L}) {
    const int L = 7;
    const auto ks = alibi_kernels(L, n);
    Eigen::VectorXd alpha(L);
    for (int l = 0; l < L; ++l) alpha(l) = l == 2 ? 0.0 : u(g);
    INFO("n = " << n);
    const Eigen::MatrixXd cpu = cf::rollout::prefix_mass_by_depth(ks, alpha),
                          dev = cf::rollout::prefix_mass_by_depth(ks, alpha, device.get());
    REQUIRE(dev.rows() == L + 1);
    require_close(cpu, dev);
  }
}

TEST_CASE("gpu monotonicity triple sums (emulated) = cf::rollout::monotonicity_stats", "[gpu][products]") {
  std::mt19937 g(17);
  std::vector<RowMatrix> kernels = {RowMatrix::Identity(1, 1), RowMatrix::Identity(2, 2)};
  for (long n : {3L, 17L, 60L}) {
    kernels.push_back(random_kernel(g, n, true));    // violates Definition A.1 at many triples
    kernels.push_back(random_kernel(g, n, false));   // full rows: violations too
    kernels.push_back(alibi_kernels(1, n).front());  // monotone: no violation, max gap <= 0
  }
  for (const RowMatrix& K : kernels)
    for (double tol : {1e-10, 0.0, 0.05}) {
      INFO("n = " << K.rows() << ", tol = " << tol);
      const auto cpu = cf::rollout::monotonicity_stats(K, tol),
                 dev = cf::rollout::monotonicity_stats(K, tol, device.get());
      CHECK(dev.triples == cpu.triples);
      CHECK(dev.violations == cpu.violations);  // the same F bit for bit: the same triples
      CHECK(dev.max_gap == cpu.max_gap);
      CHECK(dev.violation_rate == cpu.violation_rate);
      CHECK(std::abs(dev.mean_gap - cpu.mean_gap) <= 1e-12 * std::abs(cpu.mean_gap));
      CHECK(std::abs(dev.expected_shortfall - cpu.expected_shortfall) <= 1e-12 * std::abs(cpu.expected_shortfall));
    }
  // by hand: rows (0, 0, 1), (0.5, 0.5, 0), (1, 0, 0), whose later rows sit earlier, have prefix
  // masses (0, 0, 1), (0.5, 1, 1), (1, 1, 1): gaps 0.5, 1 (rows 0, 1), 1, 1 (rows 0, 2), 0.5, 0
  // (rows 1, 2) at k = 0, 1 and 0 at k = 2: five violations summing to 4, the largest 1
  RowMatrix K(3, 3);
  K << 0, 0, 1, 0.5, 0.5, 0, 1, 0, 0;
  const auto st = cf::rollout::monotonicity_stats(K, 1e-10, device.get());
  CHECK(st.triples == 9);
  CHECK(st.violations == 5);
  CHECK(st.max_gap == 1.0);
  CHECK(st.mean_gap == Approx(4.0 / 5).epsilon(1e-15));
  CHECK(st.expected_shortfall == Approx(4.0 / 9).epsilon(1e-15));
}

TEST_CASE("gpu kernel products (emulated) = the CPU's Props. 4.2-4.5 checks", "[gpu][products]") {
  std::mt19937 g(19);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const long n = 24;
  const int L = 6;
  const auto ks = alibi_kernels(L, n);
  std::vector<RowMatrix> flat, content;
  for (int l = 0; l < L; ++l) {
    cf::rollout::AlibiModel m;
    m.slopes = {0.0, 0.0, 0.0};
    m.head_weights = {0.5, 0.3, 0.2};
    flat.push_back(cf::rollout::alibi_kernel_dense(m, 0, n));
    m.slopes = {0.01 * (l + 1), 0.3, 2.0};
    m.delta = Eigen::MatrixXd::Constant(1, 3, 2.0);
    content.push_back(cf::rollout::alibi_kernel_dense(m, 0, n));
  }
  Eigen::VectorXd a(L), a2(L);
  for (int l = 0; l < L; ++l) a(l) = u(g), a2(l) = a(l) + (1 - a(l)) * u(g);
  // the violations are differences of prefix masses <= 1: round-off 1e-16 absolute on either side
  const auto same = [](const cf::rollout::PropositionCheck& cpu, const cf::rollout::PropositionCheck& dev) {
    CHECK(dev.hypotheses_hold == cpu.hypotheses_hold);
    CHECK(std::abs(dev.max_violation - cpu.max_violation) <= 1e-14);
  };
  const auto* d = device.get();
  same(cf::rollout::check_primacy_drift(ks, a), cf::rollout::check_primacy_drift(ks, a, d));
  same(cf::rollout::check_residual_recency(ks, a, a2), cf::rollout::check_residual_recency(ks, a, a2, d));
  same(cf::rollout::check_bias_recency(ks, flat, a), cf::rollout::check_bias_recency(ks, flat, a, d));
  same(cf::rollout::check_diagonal_content(content, ks, a, 1),
       cf::rollout::check_diagonal_content(content, ks, a, 1, d));
}
