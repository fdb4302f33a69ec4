// Lemma 3.4 / Theorem 3.5 of Runway (Lee & Clark) (docs/spec.md section 2) on a trained model: adding a common-mode
// shift delta_c to the representation every key and value is computed from (k_j -> k_j + delta_c W_K,
// v_j -> v_j + delta_c W_V for every j) leaves the attention weights unchanged (softmax translation
// invariance: the score of query i moves by the row constant q_i . delta_c W_K / sqrt(d_head)) and
// shifts the head output by exactly delta_c W_V (rows of the weights sum to 1).
// Two independent routes: (1) the trained model itself, with the shift injected into its scores
// through the score hook (cf::nn::ForwardHooks::on_scores), compared with its unshifted run;
// (2) a double-precision recomputation from the captured Q, K and residual stream.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/nn/ops.hpp"
#include "trained.hpp"

using namespace cf;

TEST_CASE(
    "Lemma 3.4 / Theorem 3.5 (Runway (Lee & Clark)): a common-mode key shift leaves attention unchanged and passes "
    "through as delta_c W_V",
    "[influence][runway]") {
  const nn::Model<float> m = test::train_tiny("lemma34", "full,swa", nn::PosKind::Alibi, 2, 30);
  const auto& cfg = m.config;
  const int n = 20, C = cfg.d_model, H = cfg.n_head, dh = nn::head_dim(cfg, 0), HD = H * dh;
  const nn::TrainData d = nn::load_text_bytes(CF_TEST_CORPUS, 0.2);
  const std::vector<std::int32_t> w(d.val.begin(), d.val.begin() + n);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0, 1);
  Eigen::VectorXd delta(C);
  for (int c = 0; c < C; ++c) delta(c) = 2.0 * g(rng);  // a large shift: the invariance is exact

  for (int layer = 0; layer < cfg.n_layer; ++layer) {
    const nn::LayerOffsets& o = m.layout.layer[layer];
    // W_K, W_V rows of c_attn ([3 HD, C], PyTorch layout: out x in)
    Eigen::MatrixXd Wk(HD, C), Wv(HD, C);
    for (int r = 0; r < HD; ++r)
      for (int c = 0; c < C; ++c) {
        Wk(r, c) = m.params[o.attn_w + static_cast<std::int64_t>(HD + r) * C + c];
        Wv(r, c) = m.params[o.attn_w + static_cast<std::int64_t>(2 * HD + r) * C + c];
      }
    const Eigen::VectorXd dk = Wk * delta, dv = Wv * delta;  // delta_c W_K, delta_c W_V per head slice

    std::vector<float> probs0, q0, k0;
    nn::ForwardHooks cap;
    cap.on_layer = [&](const nn::LayerActivations& a) {
      if (a.layer != layer) return;
      probs0.assign(a.attn_probs, a.attn_probs + static_cast<std::size_t>(H) * n * n);
      q0.assign(a.q, a.q + static_cast<std::size_t>(H) * n * dh);
      k0.assign(a.k, a.k + static_cast<std::size_t>(H) * n * dh);
    };
    nn::forward_logits(m, w, &cap);
    REQUIRE(probs0.size() == static_cast<std::size_t>(H) * n * n);

    // (1) the model with every key shifted: score M_ij += q_i . dk_h / sqrt(dh)
    std::vector<float> probs1;
    nn::ForwardHooks shifted;
    shifted.on_scores = [&](int l, int h, Eigen::Ref<Eigen::MatrixXf> M) {
      if (l != layer) return;
      for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int e = 0; e < dh; ++e) s += q0[(static_cast<std::size_t>(h) * n + i) * dh + e] * dk(h * dh + e);
        M.row(i).array() += static_cast<float>(s / std::sqrt(double(dh)));
      }
    };
    shifted.on_layer = [&](const nn::LayerActivations& a) {
      if (a.layer == layer) probs1.assign(a.attn_probs, a.attn_probs + static_cast<std::size_t>(H) * n * n);
    };
    nn::forward_logits(m, w, &shifted);
    double maxdiff = 0;
    for (std::size_t i = 0; i < probs0.size(); ++i)
      maxdiff = std::max(maxdiff, std::abs(double(probs0[i]) - probs1[i]));
    // float softmax of scores shifted by O(10): a few ulps of the row maximum
    CHECK(maxdiff < 2e-5);

    // (2) double recomputation from the captured Q, K: masked ALiBi softmax with and without the shift
    const std::vector<std::uint8_t> mask = [&] {
      std::vector<std::uint8_t> mk(static_cast<std::size_t>(n) * n, 0);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j)
          mk[static_cast<std::size_t>(i) * n + j] = probs0[static_cast<std::size_t>(i) * n + j] > 0;
      return mk;
    }();
    for (int h = 0; h < H; ++h) {
      Eigen::MatrixXd P(n, n), Ps(n, n);
      for (int pass = 0; pass < 2; ++pass) {
        Eigen::MatrixXd& out = pass == 0 ? P : Ps;
        for (int i = 0; i < n; ++i) {
          std::vector<double> z(i + 1);
          double mx = -1e300;
          for (int j = 0; j <= i; ++j) {
            double s = 0;
            for (int e = 0; e < dh; ++e) {
              const double kk = k0[(static_cast<std::size_t>(h) * n + j) * dh + e] + (pass ? dk(h * dh + e) : 0.0);
              s += q0[(static_cast<std::size_t>(h) * n + i) * dh + e] * kk;
            }
            z[j] = s / std::sqrt(double(dh)) - nn::alibi_slope(h, H) * (i - j);
            if (mask[static_cast<std::size_t>(i) * n + j]) mx = std::max(mx, z[j]);
          }
          double sum = 0;
          out.row(i).setZero();
          for (int j = 0; j <= i; ++j)
            if (mask[static_cast<std::size_t>(i) * n + j]) sum += (out(i, j) = std::exp(z[j] - mx));
          out.row(i) /= sum;
        }
      }
      CHECK((P - Ps).cwiseAbs().maxCoeff() < 1e-12);
      // recomputed weights are the model's (float) weights
      double dm = 0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          dm = std::max(dm, std::abs(P(i, j) - probs0[(static_cast<std::size_t>(h) * n + i) * n + j]));
      CHECK(dm < 1e-5);
      // output shift: Ps (V + 1 dv_h^T) - P V = (Ps - P) V + (Ps 1) dv_h^T = dv_h in every row
      Eigen::MatrixXd V = Eigen::MatrixXd::Random(n, dh);  // any values: the identity is linear in V
      const Eigen::MatrixXd shift = Ps * (V.rowwise() + dv.segment(h * dh, dh).transpose()) - P * V;
      for (int i = 0; i < n; ++i)
        CHECK((shift.row(i).transpose() - dv.segment(h * dh, dh)).cwiseAbs().maxCoeff() <
              1e-12 * (1 + dv.cwiseAbs().maxCoeff()));
    }
  }
}
