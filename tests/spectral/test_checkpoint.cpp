// Checkpoint reading (docs/checkpoint_format.md) and the model-level weight analysis.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "cf/core/error.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/spectral/checkpoint.hpp"
#include "cf/spectral/model.hpp"
#include "cf/spectral/report.hpp"
#include "randn.hpp"

using namespace cf::spectral;
using cf::spectral::test::randn;

namespace {
// Write a checkpoint with only what the weight-level analysis reads: config + c_attn (+ damping).
std::string write_fixture(const std::string& name, int L, int H, int D, const std::string& attn, bool with_attn,
                          std::vector<Eigen::MatrixXd>* c_attn_out) {
  const std::string path = "spectral_test_" + name + ".h5";
  const int dh = D / H;
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < L; ++l) layers.push_back({{"attn", attn}, {"d_head", dh}, {"sd_eps", 0.1}});
  const nlohmann::json cfg = {{"vocab_size", 256}, {"block_size", 32}, {"n_layer", L},   {"n_head", H},
                              {"d_model", D},      {"pos", "learned"}, {"norm", "none"}, {"layers", layers}};
  cf::io::write_hdf5_atomic(path, [&](cf::io::File& f) {
    f.set_attr("format", "causalflow-checkpoint");
    f.set_attr("config", cfg.dump());
    auto g = f.create_group("params");
    for (int l = 0; l < L; ++l) {
      // float32 values so the reader's float -> double conversion is exact.
      const Eigen::MatrixXd w = randn(3 * H * dh, D, 10 + l).cast<float>().cast<double>();
      if (c_attn_out) c_attn_out->push_back(w);
      if (with_attn) g.write_matrix("h." + std::to_string(l) + ".attn.c_attn.weight", w.cast<float>());
      if (attn == "sd") {
        g.write_matrix("h." + std::to_string(l) + ".attn.damp.weight", randn(H, D, 99).cast<float>());
        g.write_vector("h." + std::to_string(l) + ".attn.damp.bias", Eigen::VectorXf::Zero(H));
      }
    }
  });
  return path;
}
}  // namespace

TEST_CASE("Checkpoint reader returns W_Q and W_K as transposed c_attn row blocks, 2 layers x 3 heads", "[routing]") {
  std::vector<Eigen::MatrixXd> raw;
  const std::string path = write_fixture("layout", 2, 3, 12, "full", true, &raw);
  const AttentionWeights w = read_attention_weights(path);
  REQUIRE(w.n_layer == 2);
  REQUIRE(w.layers.size() == 2);
  for (int l = 0; l < 2; ++l) {
    REQUIRE(w.layers[l].n_head == 3);
    for (int h = 0; h < 3; ++h) {
      // Entry (i, c) of W_Q(h) is c_attn.weight[h*4 + c, i] (PyTorch Linear, y = x W^T).
      for (int i = 0; i < 12; ++i)
        for (int c = 0; c < 4; ++c) {
          CHECK(w.layers[l].W_Q(h)(i, c) == raw[l](h * 4 + c, i));
          CHECK(w.layers[l].W_K(h)(i, c) == raw[l](12 + h * 4 + c, i));
        }
    }
  }
  std::remove(path.c_str());
}

TEST_CASE("Model weight analysis equals the per-head dense oracle, 2 layers x 3 heads, d = 12", "[routing]") {
  std::vector<Eigen::MatrixXd> raw;
  const std::string path = write_fixture("model", 2, 3, 12, "sd", true, &raw);
  const AttentionWeights w = read_attention_weights(path);
  CHECK(w.layers[0].attn == "sd");
  CHECK(w.layers[0].damp_w.rows() == 3);
  CHECK(w.layers[0].sd_eps == 0.1);
  const ModelSpectrum m = analyse_weights(w);
  REQUIRE(m.heads.size() == 6);
  REQUIRE(m.layers.size() == 2);
  double erank_sum = 0;
  for (const auto& h : m.heads) {
    const Eigen::MatrixXd Wq = raw[h.layer].middleRows(h.head * 4, 4).transpose();
    const Eigen::MatrixXd Wk = raw[h.layer].middleRows(12 + h.head * 4, 4).transpose();
    const HeadSpectrum d = analyse_dense(Wq * Wk.transpose());
    CHECK(h.erank_R == Approx(d.R.erank_entropy).epsilon(1e-8));
    CHECK(h.rho == Approx(d.rho).epsilon(1e-8));
    CHECK(h.max_re_lambda == Approx(d.max_re_lambda).margin(1e-8 * d.M.sigma[0]));
    if (h.layer == 1) erank_sum += d.R.erank_entropy;
  }
  CHECK(m.layers[1].erank_R == Approx(erank_sum / 3).epsilon(1e-8));
  CHECK(m.summary.heads == 6);
  // Only layer 1.
  CHECK(analyse_weights(w, {1}).heads.size() == 3);
  CHECK_THROWS_AS(analyse_weights(w, {2}), cf::InvalidArgument);
  std::remove(path.c_str());
}

TEST_CASE("Non-finite attention weights are refused naming the checkpoint, layer and head", "[routing]") {
  const std::string path = write_fixture("inf", 2, 2, 8, "full", true, nullptr);
  AttentionWeights w = read_attention_weights(path);
  w.layers[1].qk[0] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(analyse_weights(w), Catch::Contains("checkpoint '" + path +
                                                        "': layer 1 head 0: the attention weights W_Q, W_K of this "
                                                        "head hold inf or NaN"));
  std::remove(path.c_str());
}

TEST_CASE("A head with all-zero W_Q has rho = 0/0: undefined, left out of the layer's rho mean and median",
          "[routing]") {
  const std::string path = write_fixture("zero", 2, 3, 12, "full", true, nullptr);
  AttentionWeights w = read_attention_weights(path);
  // W_Q(0) of layer 1 := 0 (a pruned head): the first d_model x d_head block of its qk buffer
  std::fill(w.layers[1].qk.begin(), w.layers[1].qk.begin() + 12 * 4, 0.f);
  const ModelSpectrum m = analyse_weights(w);
  REQUIRE(m.heads.size() == 6);
  std::vector<double> defined;  // layer 1's other two heads, the independent mean and median
  for (const auto& h : m.heads) {
    if (h.layer == 1 && h.head == 0) {
      CHECK(std::isnan(h.rho));  // ||R|| = ||F|| = 0
      CHECK(h.norm_M == 0);
    } else if (h.layer == 1) {
      REQUIRE(std::isfinite(h.rho));
      defined.push_back(h.rho);
    }
  }
  REQUIRE(defined.size() == 2);
  CHECK(m.layers[1].undefined_rho_heads == 1);
  CHECK(m.layers[0].undefined_rho_heads == 0);
  CHECK(m.summary.undefined_rho_heads == 1);
  CHECK(m.layers[1].rho == Approx((defined[0] + defined[1]) / 2).epsilon(1e-12));
  CHECK(m.layers[1].rho_median == Approx((defined[0] + defined[1]) / 2).epsilon(1e-12));
  CHECK(std::isfinite(m.summary.rho_median));
  // JSON: the head's rho is null, the counts are there
  const nlohmann::json j = to_json(m);
  CHECK(j["heads"][3]["rho"].is_null());
  CHECK(j["layers"][1]["undefined_rho_heads"] == 1);
  CHECK(j["summary"]["undefined_rho_heads"] == 1);
  // the report names the head and says why
  CascadeReport r = begin_cascade_report(ErankForm::Entropy, false);
  add_weight_level(r, m);
  bool noted = false;
  for (const auto& n : r.report.notes)
    noted |= n.find("L1H0") != std::string::npos && n.find("0/0") != std::string::npos;
  CHECK(noted);
  std::remove(path.c_str());
}

TEST_CASE("A checkpoint without attention weights is rejected with a clear message", "[routing]") {
  const std::string path = write_fixture("noattn", 1, 2, 8, "full", false, nullptr);
  try {
    read_attention_weights(path);
    FAIL("no exception");
  } catch (const cf::InvalidArgument& e) {
    CHECK(std::string(e.what()).find("without attention weights") != std::string::npos);
  }
  std::remove(path.c_str());
  CHECK_THROWS_AS(read_attention_weights("/nonexistent/ckpt.h5"), cf::InvalidArgument);
}

TEST_CASE("Layer specs all, single, ranges and lists with out of range rejected", "[routing]") {
  CHECK(parse_layer_spec("all", 3) == std::vector<int>{0, 1, 2});
  CHECK(parse_layer_spec("1", 3) == std::vector<int>{1});
  CHECK(parse_layer_spec("0-2,1", 4) == std::vector<int>{0, 1, 2});
  CHECK(parse_layer_spec("3,0", 4) == std::vector<int>{0, 3});
  CHECK_THROWS_AS(parse_layer_spec("0-5", 4), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_layer_spec("-1", 4), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_layer_spec("2-1", 4), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_layer_spec("a", 4), cf::InvalidArgument);
  // the message quotes the item as typed (not the empty piece before its '-') and what is allowed
  CHECK_THROWS_WITH(parse_layer_spec("-1", 4), Catch::Contains("'-1' is not a layer index or range (allowed: all, L, "
                                                               "A-B or a comma list of them, with 0 <= layer < "
                                                               "n_layer = 4)"));
  CHECK_THROWS_WITH(parse_layer_spec("0,1-", 4), Catch::Contains("'1-' is not a layer index"));
}

TEST_CASE("Weight analysis with a batched eigensolver (Eigen in double) equals the per-head dense oracle",
          "[routing]") {
  // the device path's algebra (issue 30) with an exact solver: sigma(F) = |eig(CF)|, sigma(R) and
  // sigma(M) from the embeddings [[0, X], [X^T, 0]], one batch per matrix size
  std::vector<Eigen::MatrixXd> raw;
  const std::string path = write_fixture("batched", 2, 3, 12, "full", true, &raw);
  const AttentionWeights w = read_attention_weights(path);
  std::vector<long> batch_sizes;
  SymEigenSolver eig;
  eig.solve = [&](const std::vector<Eigen::MatrixXd>& ms) {
    batch_sizes.push_back(static_cast<long>(ms.size()));
    std::vector<Eigen::VectorXd> out;
    for (const auto& A : ms) {
      REQUIRE(A.isApprox(A.transpose(), 0.0));  // symmetric exactly
      out.push_back(Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(A, Eigen::EigenvaluesOnly).eigenvalues());
    }
    return out;
  };
  const ModelSpectrum m = analyse_weights(w, {}, AnalysisOptions{}, eig);
  REQUIRE(m.heads.size() == 6);
  CHECK(batch_sizes == std::vector<long>{6, 6, 6});  // CF (8 x 8), CR and C's rows embedded (16, 12)
  for (const auto& h : m.heads) {
    const Eigen::MatrixXd Wq = raw[h.layer].middleRows(h.head * 4, 4).transpose();
    const Eigen::MatrixXd Wk = raw[h.layer].middleRows(12 + h.head * 4, 4).transpose();
    const HeadSpectrum d = analyse_dense(Wq * Wk.transpose());
    INFO("layer " << h.layer << " head " << h.head);
    CHECK(h.erank_R == Approx(d.R.erank_entropy).epsilon(1e-8));
    CHECK(h.erank_F == Approx(d.F.erank_entropy).epsilon(1e-8));
    CHECK(h.erank_M == Approx(d.M.erank_entropy).epsilon(1e-8));
    CHECK(h.rho == Approx(d.rho).epsilon(1e-8));
    CHECK(h.rank_R == d.R.numerical_rank);
    CHECK(h.rank_F == d.F.numerical_rank);
    CHECK(h.max_re_lambda == Approx(d.max_re_lambda).margin(1e-8 * d.M.sigma[0]));
    for (Index i = 0; i < h.sigma_R.size(); ++i) CHECK(h.sigma_R[i] == Approx(d.R.sigma[i]).margin(1e-10));
  }
  std::remove(path.c_str());
}
