// Runway (Lee & Clark) on trained models (issue 10): exact Jacobian blocks against the Theorem 3.3 bound
// (C* <= max C_1, exact zeros outside the mask, Spearman(J, B) reported) and Lemma 3.4 /
// Theorem 3.5 (a common-mode key shift leaves the attention weights unchanged and passes through
// as delta_c W_V).
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>
#include <random>

#include "cf/influence/bound_check.hpp"
#include "cf/influence/jacobian.hpp"
#include "cf/rollout/agreement.hpp"
#include "trained.hpp"

using namespace cf;
using namespace cf::influence;

namespace {

std::vector<std::int32_t> corpus_window(int n, int offset) {
  const nn::TrainData d = nn::load_text_bytes(CF_TEST_CORPUS, 0.2);
  return std::vector<std::int32_t>(d.val.begin() + offset, d.val.begin() + offset + n);
}

}  // namespace

TEST_CASE("Theorem 3.3 (Runway (Lee & Clark)): C* <= max C_1 and exact zeros outside the mask on two trained models",
          "[influence][runway]") {
  struct Variant {
    std::string name, attn;
    nn::PosKind pos;
  };
  for (const Variant& v : {Variant{"standard", "full,full", nn::PosKind::Learned},
                           Variant{"alibi_swa_bridge", "swa,bridge,full", nn::PosKind::Alibi}}) {
    const nn::Model<float> mf =
        test::train_tiny("bound_" + v.name, v.attn, v.pos, v.pos == nn::PosKind::Alibi ? 3 : 2, 40);
    const nn::Model<double> md = nn::cast_model<double>(mf);
    const int n = 16, Ln = mf.config.n_layer;
    const auto w = corpus_window(n, 3);
    const LayerAttention la = layer_attention(mf, w);
    std::vector<double> c1;
    long outside = 0;
    for (int l = 0; l < Ln; ++l) {
      const JacobianBlocks j1 = jacobian_blocks(md, w, l, 1);
      const OneLayerCheck oc = one_layer_check(j1.frobenius, la.A[l]);
      INFO(v.name << " layer " << l);
      CHECK(oc.outside_mask_nonzero == 0);
      outside += oc.outside_mask_pairs;
      c1.push_back(oc.c1);
    }
    if (v.pos == nn::PosKind::Alibi) {
      CHECK(outside > 0);           // the SWA and bridge layers do have pairs outside their masks
      CHECK(la.row_normalised[1]);  // branch-fused bridge rows sum to 2 before the normalisation
      CHECK_FALSE(la.row_normalised[0]);
    }
    const JacobianBlocks J = jacobian_blocks(md, w, 0, Ln);
    const std::vector<rollout::RowMatrix> A(la.A.begin(), la.A.end());
    const BoundCheck bc = check_bound(J.frobenius, A, c1, 1e-9);
    const BoundCheck bs = check_bound(J.spectral, A, c1, 1e-9);
    std::cout << "[Runway (Lee & Clark) Theorem 3.3] " << v.name << " (" << v.attn << "), n = " << n << ", r = " << Ln
              << ": C* = " << bc.c_star << " <= max C_1 = " << bc.c1_max << ", Spearman(J, B) off-diagonal "
              << bc.spearman_offdiag << ", diagonal " << bc.spearman_diag << ", gate > self share " << bc.gate_share
              << ", tightness median " << bc.tightness.median << "\n";
    CHECK(bc.c_star_within_c1);
    CHECK(bc.zero_bound_nonzero_j == 0);
    CHECK(bc.c_star > 0);
    // the spectral norm is at most the Frobenius norm, so its C* is at most the Frobenius C_1
    CHECK(bs.c_star <= bc.c1_max * (1 + 1e-9));
    CHECK(bc.tightness.max == Approx(1.0));
  }
}

TEST_CASE("check_bound: C* and C_1 against a brute-force computation on a hand-built example", "[influence][runway]") {
  // two layers, n = 3: A(0) uniform causal, A(1) attends to the previous token (self at 0)
  rollout::RowMatrix A0 = rollout::RowMatrix::Zero(3, 3), A1 = rollout::RowMatrix::Zero(3, 3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j <= i; ++j) A0(i, j) = 1.0 / (i + 1);
  A1(0, 0) = 1, A1(1, 0) = 1, A1(2, 1) = 1;
  Eigen::MatrixXd J(3, 3);
  J << 2, 0, 0, 1, 3, 0, 0.5, 2, 1;
  const BoundCheck bc = check_bound(J, {A0, A1}, {2.0, 3.0}, 1e-12);
  // brute force: B = (I + A1)(I + A0), C*^2 = max J/B
  const Eigen::MatrixXd I = Eigen::MatrixXd::Identity(3, 3);
  const Eigen::MatrixXd B = (I + Eigen::MatrixXd(A1)) * (I + Eigen::MatrixXd(A0));
  double cr = 0;
  for (int d = 0; d < 3; ++d)
    for (int s = 0; s <= d; ++s) cr = std::max(cr, J(d, s) / B(d, s));
  CHECK(bc.c_star == Approx(std::sqrt(cr)).epsilon(1e-14));
  CHECK(bc.c1_max == 3.0);
  CHECK(bc.pairs == 6);
  // one-layer: pair (2, 0) of A1 is outside the mask
  Eigen::MatrixXd J1(3, 3);
  J1 << 1, 0, 0, 4, 1, 0, 0, 1, 2;
  const OneLayerCheck oc = one_layer_check(J1, A1);
  CHECK(oc.outside_mask_pairs == 1);
  CHECK(oc.outside_mask_nonzero == 0);
  CHECK(oc.c1 == Approx(4.0));  // ratios 1/2, 4/1, 1/1, 1/1, 2/1: the largest is (1, 0)
}
