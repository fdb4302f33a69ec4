// Rollout paths (Position bias (Herasimchyk et al.), docs/spec.md section 2): the published BLOOM-176B curve, and the
// structured O(L H n) path against the dense O(L n^2) oracle on random configurations.
#include <catch2/catch.hpp>
#include <random>

#include "cf/core/error.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

using namespace cf::rollout;

namespace {
double rel_err(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  return (a - b).cwiseAbs().maxCoeff() / b.cwiseAbs().maxCoeff();
}
AlibiModel preset_model(const Preset& p, bool content) {
  AlibiModel m;
  m.slopes = p.slopes;
  if (content) m.delta = p.content_delta;
  return m;
}
}  // namespace

TEST_CASE("Published BLOOM-176B residual-aware rollout at n 256 (variant b)", "[rollout][position_bias]") {
  // Published fact (Position bias (Herasimchyk et al.), Fig. bloom; reference figure
  // data/position-bias/figures/bloom.png and docs/spec.md section 2 "Check"): BLOOM-176B, 70 layers, 112 heads,
  // measured FineWeb-Edu alpha, n = 256: p_0 ~ 0.0203, p_255 ~ 0.0252, minimum ~ 0.0025 near position 61.
  const Preset p = load_preset("bloom");
  REQUIRE(p.layers == 70);
  REQUIRE(p.heads == 112);
  const Eigen::VectorXd pb = rollout_last_row_alibi(preset_model(p, false), p.alpha_measured, 256);
  const auto s = summarize(pb);
  CHECK(pb.sum() == Approx(1.0).epsilon(1e-12));
  CHECK(s.first == Approx(0.0203).margin(0.00005));
  CHECK(s.last == Approx(0.0252).margin(0.00005));
  CHECK(s.min == Approx(0.0025).margin(0.00005));
  CHECK(std::abs(s.argmin - 61) <= 3);
}

TEST_CASE("Structured ALiBi path agrees with dense path on BLOOM-176B at n 96", "[rollout]") {
  const Preset p = load_preset("bloom-176b");
  for (bool content : {false, true}) {
    const AlibiModel m = preset_model(p, content);
    const Eigen::VectorXd fast = rollout_last_row_alibi(m, p.alpha_measured, 96);
    const Eigen::VectorXd dense = rollout_last_row_alibi_dense(m, p.alpha_measured, 96);
    INFO("content " << content);
    CHECK(rel_err(fast, dense) < 1e-12);
  }
}

TEST_CASE("Structured ALiBi path agrees with dense path on random configurations", "[rollout]") {
  std::mt19937_64 rng(20260);
  std::uniform_real_distribution<double> U(0, 1);
  for (int trial = 0; trial < 40; ++trial) {
    const int H = 1 + static_cast<int>(U(rng) * 6);
    const int L = 1 + static_cast<int>(U(rng) * 6);
    const long n = 1 + static_cast<long>(U(rng) * 120);
    AlibiModel m;
    for (int h = 0; h < H; ++h) m.slopes.push_back(trial % 7 == 0 && h == 0 ? 0.0 : std::pow(10.0, -3 + 3.5 * U(rng)));
    if (trial % 2) {
      m.delta = Eigen::MatrixXd(L, H);
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) m.delta(l, h) = (U(rng) - 0.5) * (trial % 4 == 1 ? 600 : 10);
    }
    if (trial % 3 == 1)
      for (int h = 0; h < H; ++h) m.head_weights.push_back(U(rng) + 0.01);
    if (trial % 5 >= 3) m.mask.window = 1 + static_cast<long>(U(rng) * n);
    Eigen::VectorXd alpha(L);
    for (int l = 0; l < L; ++l) alpha(l) = U(rng);
    const Eigen::VectorXd fast = rollout_last_row_alibi(m, alpha, n);
    const Eigen::VectorXd dense = rollout_last_row_alibi_dense(m, alpha, n);
    INFO("trial " << trial << " H " << H << " L " << L << " n " << n << " window " << m.mask.window);
    CHECK(rel_err(fast, dense) < 1e-12);
    CHECK(fast.sum() == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("Dense last row equals the last row of the full rollout matrix", "[rollout]") {
  AlibiModel m;
  m.slopes = alibi_slopes_simple(4);
  m.delta = Eigen::MatrixXd::Constant(1, 1, 1.5);
  Eigen::VectorXd alpha(3);
  alpha << 0.3, 0.9, 0.5;
  const long n = 17;
  auto k = [&](int l) { return alibi_kernel_dense(m, l, n); };
  const RowMatrix P = rollout_matrix_dense(k, alpha, n);
  const Eigen::VectorXd row = rollout_last_row_dense(k, alpha, n);
  CHECK((P.row(n - 1).transpose() - row).cwiseAbs().maxCoeff() < 1e-15);
  CHECK((P.rowwise().sum().array() - 1.0).abs().maxCoeff() < 1e-13);
  // Brute force: explicit product R(3) R(2) R(1) (newest layer on the left).
  RowMatrix R = RowMatrix::Identity(n, n);
  for (int l = 0; l < 3; ++l) R = ((1 - alpha(l)) * RowMatrix::Identity(n, n) + alpha(l) * k(l)) * R;
  CHECK((R - P).cwiseAbs().maxCoeff() < 1e-14);
}

TEST_CASE("Structured path is stable at n 65536 with slopes near 1 and near 0", "[rollout]") {
  AlibiModel m;
  m.slopes = {std::exp2(-0.07), 1e-5};
  Eigen::VectorXd alpha = Eigen::VectorXd::Constant(4, 0.5);
  const Eigen::VectorXd p = rollout_last_row_alibi(m, alpha, 65536);
  CHECK(p.allFinite());
  CHECK(p.minCoeff() >= 0);
  CHECK(p.sum() == Approx(1.0).epsilon(1e-10));
}

TEST_CASE("Published BLOOM-176B rollout with content at n 256 (variant c)", "[rollout][position_bias]") {
  // Published figure (Position bias (Herasimchyk et al.), Fig. bloom_content;
  // data/position-bias/figures/bloom_content.png), values read off the plot: p_0 ~ 0.0137, p_254 ~ 0.022, p_255 ~
  // 0.0445, flat minimum ~ 0.002 between positions 30 and 80. Content = per layer and head diagonal scores
  // (FineWeb-Edu, raw q.k).
  const Preset p = load_preset("bloom");
  AlibiModel m = preset_model(p, true);
  const Eigen::VectorXd pc = rollout_last_row_alibi(m, p.alpha_measured, 256);
  const auto s = summarize(pc);
  CHECK(s.first == Approx(0.0137).margin(0.0005));
  CHECK(s.last == Approx(0.0445).margin(0.001));
  CHECK(pc(254) == Approx(0.022).margin(0.001));
  CHECK(s.min == Approx(0.002).margin(0.0003));
  CHECK(s.argmin >= 30);
  CHECK(s.argmin <= 80);
}

TEST_CASE("Only the simple slope recipe reproduces the published BLOOM-176B curve", "[rollout][position_bias]") {
  // docs/spec.md section 2: the reference code used 2^(-8h/H) for every H, also H = 112. BLOOM's own
  // recipe (hf) gives different slopes for 112 heads and misses the published p_0 ~ 0.0203.
  const Preset p = load_preset("bloom");
  AlibiModel simple, hf;
  simple.slopes = alibi_slopes_simple(112);
  hf.slopes = alibi_slopes_hf(112);
  const auto s = summarize(rollout_last_row_alibi(simple, p.alpha_measured, 256));
  const auto h = summarize(rollout_last_row_alibi(hf, p.alpha_measured, 256));
  CHECK(s.first == Approx(0.0203).margin(0.00005));
  CHECK(std::abs(h.first - 0.0203) > 0.005);
  CHECK(p.slope_recipe == "simple");
}

TEST_CASE("Sliding-window structured path with measured content at n 1500 matches the dense path", "[rollout]") {
  const Preset p = load_preset("mpt-7b");
  AlibiModel m;
  m.slopes = p.slopes;
  m.mask.window = 300;
  m.delta = p.content_delta;
  // A content matrix for 32 layers with a 4-layer schedule is a shape error, not a silent crop.
  CHECK_THROWS_AS(rollout_last_row_alibi(m, p.alpha_measured.head(4), 1500), cf::InvalidArgument);
  AlibiModel m4 = m;
  m4.delta = p.content_delta.topRows(4);
  const Eigen::VectorXd f4 = rollout_last_row_alibi(m4, p.alpha_measured.head(4), 1500);
  const Eigen::VectorXd d = rollout_last_row_alibi_dense(m4, p.alpha_measured.head(4), 1500);
  CHECK(rel_err(f4, d) < 1e-12);
}

namespace {
// Entrywise relative error where the reference entry is above 1e-280; entries at or below it must
// be (near) zero in both.
double entrywise_rel_err(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  double worst = 0;
  for (long j = 0; j < a.size(); ++j) {
    if (b(j) > 1e-280)
      worst = std::max(worst, std::abs(a(j) - b(j)) / b(j));
    else if (std::abs(a(j)) > 1e-270)
      worst = std::max(worst, 1.0);
  }
  return worst;
}
}  // namespace

TEST_CASE("Sliding-window structured path has no negative entry and exact zeros where the window cuts every path",
          "[rollout][swa]") {
  // Issue 9: at W = 4, n = 1,024 the subtractive recurrence returned negative values at positions
  // the last token cannot reach. With w keys per row, L mixing layers reach back L (w - 1)
  // positions: p_j = 0 exactly for j < n - 1 - L (w - 1), and only there.
  const Preset p = load_preset("mpt-7b");
  AlibiModel m;
  m.slopes = p.slopes;
  m.mask.window = 4;
  const long n = 1024;
  for (bool content : {false, true}) {
    m.delta = content ? p.content_delta : Eigen::MatrixXd();
    const Eigen::VectorXd f = rollout_last_row_alibi(m, p.alpha_measured, n);
    const Eigen::VectorXd d = rollout_last_row_alibi_dense(m, p.alpha_measured, n);
    const long reach = n - 1 - p.layers * (m.mask.window - 1);  // first reachable position
    INFO("content " << content);
    CHECK(f.minCoeff() >= 0.0);
    long zeros = 0;
    for (long j = 0; j < n; ++j) zeros += f(j) == 0.0;
    CHECK(zeros == reach);  // 927 = 1024 - 1 - 32 * 3
    CHECK(f.head(reach).isZero(0));
    CHECK(d.head(reach).isZero(0));
    CHECK((f.tail(n - reach).array() > 0).all());
    CHECK(entrywise_rel_err(f, d) < 1e-11);
  }
}

TEST_CASE("Structured path agrees entry by entry with the dense path (windows, negative content, tiny masses)",
          "[rollout][swa]") {
  std::mt19937_64 rng(4242);
  std::uniform_real_distribution<double> U(0, 1);
  double worst = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int H = 1 + static_cast<int>(U(rng) * 5);
    const int L = 1 + static_cast<int>(U(rng) * 12);
    const long n = 2 + static_cast<long>(U(rng) * 200);
    AlibiModel m;
    for (int h = 0; h < H; ++h) m.slopes.push_back(trial % 9 == 0 && h == 0 ? 0.0 : std::pow(10.0, -3 + 3.5 * U(rng)));
    if (trial % 2) {
      m.delta = Eigen::MatrixXd(L, H);
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) m.delta(l, h) = (U(rng) - 0.6) * (trial % 4 == 1 ? 200 : 10);
    }
    if (trial % 3 == 1)
      for (int h = 0; h < H; ++h) m.head_weights.push_back(U(rng) + 0.01);
    if (trial % 4 != 3) m.mask.window = 1 + static_cast<long>(U(rng) * std::min<long>(n, 12));
    Eigen::VectorXd alpha(L);
    for (int l = 0; l < L; ++l) alpha(l) = trial % 5 == 0 ? 1.0 : U(rng);
    const Eigen::VectorXd f = rollout_last_row_alibi(m, alpha, n);
    const Eigen::VectorXd d = rollout_last_row_alibi_dense(m, alpha, n);
    INFO("trial " << trial << " H " << H << " L " << L << " n " << n << " window " << m.mask.window);
    CHECK(f.minCoeff() >= 0.0);
    if (m.mask.window > 0) {
      long active = 0;
      for (int l = 0; l < L; ++l) active += alpha(l) > 0;
      const long reach = std::max(0L, n - 1 - active * (m.mask.window - 1));
      CHECK(f.head(reach).isZero(0));
    }
    const double e = entrywise_rel_err(f, d);
    worst = std::max(worst, e);
    CHECK(e < 1e-10);
  }
  INFO("worst entrywise relative error " << worst);
  CHECK(worst < 1e-10);
}

TEST_CASE("Windowed structured path in head chunks equals the unchunked one and the dense path", "[rollout][swa]") {
  const Preset p = load_preset("bloom-7b1");
  AlibiModel m;
  m.slopes = p.slopes;
  m.delta = p.content_delta;
  m.mask.window = 17;
  const Eigen::VectorXd whole = rollout_last_row_alibi(m, p.alpha_measured, 300);
  RolloutOptions o;
  o.window_buffer_doubles = 16 * 5;  // B = 16: chunks of 5 heads (32 heads: 7 chunks)
  const Eigen::VectorXd chunked = rollout_last_row_alibi(m, p.alpha_measured, 300, o);
  o.window_buffer_doubles = 1;  // one head per chunk
  const Eigen::VectorXd single = rollout_last_row_alibi(m, p.alpha_measured, 300, o);
  const Eigen::VectorXd dense = rollout_last_row_alibi_dense(m, p.alpha_measured, 300);
  CHECK(entrywise_rel_err(chunked, whole) < 1e-13);
  CHECK(entrywise_rel_err(single, whole) < 1e-13);
  CHECK(entrywise_rel_err(whole, dense) < 1e-11);
  CHECK(whole.minCoeff() >= 0);
}

namespace {
// A kernel kind the library does not have: the uniform causal kernel A[i, j] = 1/(i+1) for j <= i,
// applied in O(n) by a suffix sum, (v A)_j = sum_{i >= j} v_i / (i+1).
class UniformCausal final : public KernelOperator {
 public:
  explicit UniformCausal(long n) : n_(n) {}
  void check(const Eigen::VectorXd&) const override {}
  long size() const override { return n_; }
  void apply_left(int, const Eigen::VectorXd& v, Eigen::VectorXd& out) override {
    out.resize(n_);
    double s = 0;
    for (long j = n_ - 1; j >= 0; --j) out(j) = s += v(j) / static_cast<double>(j + 1);
  }

 private:
  long n_;
};
}  // namespace

TEST_CASE("Rollout over a new kernel operator: uniform causal kernels, closed form and the stored dense kernel",
          "[rollout][operator]") {
  const long n = 40;
  UniformCausal op(n);
  // two full layers: p_j = (1/n) sum_{i >= j} 1/(i+1) = (H_n - H_j) / n (harmonic numbers)
  const Eigen::VectorXd p = rollout_last_row(op, Eigen::VectorXd::Ones(2));
  double tail = 0;  // H_n - H_j, built from the top
  for (long j = n - 1; j >= 0; --j) {
    tail += 1.0 / static_cast<double>(j + 1);
    CHECK(p(j) == Approx(tail / n).epsilon(1e-14));
  }
  // with a residual schedule, the same as the dense kernel through StoredKernels
  RowMatrix A = RowMatrix::Zero(n, n);
  for (long i = 0; i < n; ++i) A.row(i).head(i + 1).setConstant(1.0 / static_cast<double>(i + 1));
  const std::vector<RowMatrix> ks{A};
  StoredKernels stored(ks);
  const Eigen::VectorXd alpha = Eigen::VectorXd::LinSpaced(5, 0.0, 1.0);
  CHECK(rel_err(rollout_last_row(op, alpha), rollout_last_row(stored, alpha)) < 1e-14);
}
