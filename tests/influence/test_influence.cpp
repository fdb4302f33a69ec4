// Tests of lib/influence (issue 10): the measured influence of Position bias (Herasimchyk et al.) Eq. 6 and the exact
// Jacobian blocks of Runway (Lee & Clark) Theorem 3.3 against central finite differences in double precision,
// the chain rule across layers, window placement (capture's rule) and profile files.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "cf/influence/influence.hpp"
#include "cf/influence/jacobian.hpp"
#include "cf/influence/profile_io.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/model.hpp"

using namespace cf;
using namespace cf::influence;

namespace {

// Central differences with h = 1e-5 in double: truncation O(h^2) ~ 1e-10, round-off ~ 1e-16 / h;
// 1e-6 relative to the largest gradient entry leaves a wide margin (as tests/nn/test_gradients.cpp).
constexpr double kStep = 1e-5;
constexpr double kRelTol = 1e-6;

nn::ModelConfig tiny(nn::PosKind pos, const std::string& schedule = "full") {
  nn::ModelConfig c;
  c.vocab_size = 11;
  c.block_size = 10;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 8;
  c.pos = pos;
  nn::LayerConfig proto;
  proto.b = 4;
  proto.w = 4;
  proto.e = 2;
  c.layers = nn::parse_schedule(schedule, c.n_layer, proto);
  return c;
}

// A model whose input vectors e_j can be perturbed one position at a time: random parameters
// (0.3-uniform noise so the nonlinearities are exercised), and, for position schemes without a
// learned table, a zero position table appended to the layout. encoder_forward adds wpe row j to
// position j only (one sequence), so perturbing that row perturbs exactly e_j. The vocabulary gets
// one extra token whose (tied) embedding row is zero: its logit is exactly 0, which makes the raw
// logit z_y = log p_y - log p_extra observable through log-probabilities (never used as input).
nn::Model<double> fd_model(nn::PosKind pos, const std::string& schedule = "full") {
  nn::ModelConfig c = tiny(pos, schedule);
  c.vocab_size += 1;
  nn::Model<double> m = nn::init_model<double>(c, 5);
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-0.3, 0.3);
  for (double& p : m.params) p += u(rng);
  for (int k = 0; k < c.d_model; ++k) m.params[m.layout.wte + (c.vocab_size - 1) * c.d_model + k] = 0;
  if (m.layout.wpe < 0) {
    m.layout.wpe = m.layout.total;
    m.layout.total += static_cast<std::int64_t>(c.block_size) * c.d_model;
    m.params.resize(m.layout.total, 0.0);
  }
  return m;
}

double* e_entry(nn::Model<double>& m, int j, int c) {
  return m.params.data() + m.layout.wpe + static_cast<std::int64_t>(j) * m.config.d_model + c;
}

// log p(token | x) at the last position of one window.
double last_logprob(const nn::Model<double>& m, const std::vector<std::int32_t>& w, int token) {
  std::vector<std::int32_t> tgt(w.size(), -1);
  tgt.back() = token;
  nn::Workspace<double> ws;
  std::vector<double> lp;
  nn::forward_backward<double>(m, w.data(), tgt.data(), 1, static_cast<int>(w.size()), nullptr, ws, nullptr, &lp);
  return lp.back();
}

double target_value(const nn::Model<double>& m, const std::vector<std::int32_t>& w, int y, Target t) {
  const double lp = last_logprob(m, w, y);
  if (t == Target::Probability) return std::exp(lp);
  if (t == Target::LogProbability) return lp;
  return lp - last_logprob(m, w, m.config.vocab_size - 1);  // z_y - z_extra, z_extra = 0
}

std::vector<std::vector<std::int32_t>> random_windows(int W, int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<std::int32_t>> ws(W, std::vector<std::int32_t>(n));
  for (auto& w : ws)
    for (auto& t : w) t = static_cast<std::int32_t>(rng() % vocab);
  return ws;
}

}  // namespace

TEST_CASE(
    "Eq. 6 (Position bias (Herasimchyk et al.)): input gradients equal central differences at every position, every "
    "target",
    "[influence][position_bias][grad]") {
  for (nn::PosKind pos : {nn::PosKind::Alibi, nn::PosKind::Learned}) {
    nn::Model<double> m = fd_model(pos);
    const int n = 7, C = m.config.d_model;
    // three windows in one batched pass; window 1 repeats a token so that the table-row gradient
    // (summed over positions) would differ from the per-position one
    auto windows = random_windows(3, n, m.config.vocab_size - 1, 3);
    windows[1][2] = windows[1][5];
    for (Target t : {Target::Probability, Target::LogProbability, Target::Logit}) {
      const InfluenceGradients g = influence_gradients(m, windows, t, true);
      REQUIRE(g.de.size() == windows.size());
      for (std::size_t b = 0; b < windows.size(); ++b) {
        const int y = g.yhat[b];
        double gmax = 1e-300, err = 0;
        for (int j = 0; j < n; ++j)
          for (int c = 0; c < C; ++c) {
            double* x = e_entry(m, j, c);
            const double x0 = *x;
            *x = x0 + kStep;
            const double fp = target_value(m, windows[b], y, t);
            *x = x0 - kStep;
            const double fm = target_value(m, windows[b], y, t);
            *x = x0;
            err = std::max(err, std::abs((fp - fm) / (2 * kStep) - g.de[b](j, c)));
            gmax = std::max(gmax, std::abs(g.de[b](j, c)));
          }
        INFO("pos " << nn::pos_name(pos) << ", target " << target_name(t) << ", window " << b);
        CHECK(err / gmax < kRelTol);
        for (int j = 0; j < n; ++j) CHECK(g.g(b, j) == Approx(g.de[b].row(j).norm()).epsilon(1e-12));
        // the gradient of the probability is p(yhat) times that of the log-probability
        if (t == Target::Probability) {
          const InfluenceGradients gl = influence_gradients(m, windows, Target::LogProbability, true);
          CHECK((g.de[b] - g.p_yhat(b) * gl.de[b]).cwiseAbs().maxCoeff() <= 1e-12 * gmax);
        }
      }
    }
  }
}

TEST_CASE(
    "Eq. 6 (Position bias (Herasimchyk et al.)): yhat is the argmax next token, one batched pass equals one pass per "
    "window",
    "[influence][position_bias]") {
  nn::Model<double> m = fd_model(nn::PosKind::Learned);
  const auto windows = random_windows(4, 6, m.config.vocab_size - 1, 9);
  const InfluenceGradients all = influence_gradients(m, windows, Target::Probability);
  for (std::size_t b = 0; b < windows.size(); ++b) {
    const InfluenceGradients one = influence_gradients(m, {windows[b]}, Target::Probability);
    CHECK(one.yhat[0] == all.yhat[b]);
    CHECK((one.g.row(0) - all.g.row(static_cast<long>(b))).cwiseAbs().maxCoeff() <= 1e-12 * one.g.maxCoeff());
    // yhat maximises log p over the vocabulary
    double best = -1e300;
    int arg = -1;
    for (int v = 0; v < m.config.vocab_size; ++v) {
      const double lp = last_logprob(m, windows[b], v);
      if (lp > best) best = lp, arg = v;
    }
    CHECK(arg == all.yhat[b]);
    CHECK(std::exp(best) == Approx(all.p_yhat(static_cast<long>(b))).epsilon(1e-12));
  }
}

TEST_CASE("Eq. 6 (Position bias (Herasimchyk et al.)): profile = mean over windows normalised once (not per window)",
          "[influence][position_bias]") {
  nn::Model<float> m = nn::cast_model<float>(fd_model(nn::PosKind::Alibi));
  const auto windows = random_windows(5, 8, m.config.vocab_size - 1, 4);
  const InfluenceResult r = measure_influence(m, windows, Target::Probability, 2);
  CHECK(r.backward_passes == 3);
  CHECK(r.profile.sum() == Approx(1.0).epsilon(1e-12));
  const Eigen::VectorXd mean = r.per_window.g.colwise().mean().transpose();
  CHECK((r.profile - mean / mean.sum()).cwiseAbs().maxCoeff() < 1e-12);
  // batching does not change the result (float: same kernels, tolerance for blocking order)
  const InfluenceResult one = measure_influence(m, windows, Target::Probability);
  CHECK(one.backward_passes == 1);
  CHECK((one.profile - r.profile).cwiseAbs().maxCoeff() < 1e-5);
}

TEST_CASE("influence_batch: all windows in one pass while they fit the memory budget, else the most that fit",
          "[influence]") {
  nn::ModelConfig c;
  c.n_layer = 12;
  c.d_model = 768;
  c.vocab_size = 50257;
  // per window of n = 128: 4 x 128 x (12 x 24 x 768 + 2 x 50257) bytes = 164,724,736
  const double per = 4.0 * 128 * (12.0 * 24 * 768 + 2.0 * 50257);
  CHECK(influence_batch(c, 128, 64, 0, 64 * per) == 64);
  CHECK(influence_batch(c, 128, 64, 0, 64 * per - 1) == 63);
  CHECK(influence_batch(c, 128, 1000000, 0) == static_cast<int>(2.0 * 1024 * 1024 * 1024 / per));  // 13
  CHECK(influence_batch(c, 128, 1000000, 0, 1.0) == 1);                                            // never 0
  CHECK(influence_batch(c, 128, 64, 5) == 5);  // an explicit --batch is kept
  CHECK(influence_batch(c, 128, 3, 5) == 3);
}

TEST_CASE("influence windows follow capture's rule and list their starts", "[influence]") {
  std::vector<std::int32_t> tokens(103);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(i % 50);
  const Windows w = influence_windows(tokens, 16, 5);
  const auto cap = nn::capture_windows(tokens, 16, 5);
  REQUIRE(w.tokens.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(std::vector<std::int32_t>(cap[i].begin(), cap[i].begin() + 16) == w.tokens[i]);
    CHECK(w.tokens[i][0] == tokens[w.starts[i]]);
  }
  CHECK(w.starts.front() == 0);
  CHECK(w.starts.back() == 103 - 17);
  CHECK_THROWS_WITH(influence_windows(tokens, 1, 4), Catch::Contains("n >= 2"));
  CHECK_THROWS_WITH(influence_windows(tokens, 200, 4), Catch::Contains("n + 1 = 201"));
  CHECK_THROWS_WITH(parse_target("prob"), Catch::Contains("unknown influence target 'prob'"));
}

TEST_CASE("profile files: JSON, CSV with a header and plain numbers read back normalised", "[influence]") {
  const auto dir = std::filesystem::temp_directory_path() / "cf_influence_profile_test";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream((dir / name).string()) << text;
    return (dir / name).string();
  };
  const Eigen::Vector3d want(0.25, 0.25, 0.5);
  CHECK((read_profile(write("p.json", "{\"profile\": [1, 1, 2], \"meta\": {}}")) - want).norm() < 1e-15);
  CHECK((read_profile(write("p.csv", "# influence\nposition,influence,mean_g\n0,1,5\n1,1,5\n2,2,9\n")) - want).norm() <
        1e-15);
  CHECK((read_profile(write("p.txt", "1 1 2\n")) - want).norm() < 1e-15);
  CHECK_THROWS_WITH(read_profile(write("bad.json", "{\"x\": 1}")), Catch::Contains("without a \"profile\" array"));
  CHECK_THROWS_WITH(read_profile(write("neg.csv", "position,influence\n0,1\n1,-1\n")), Catch::Contains("negative"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Theorem 3.3 (Runway (Lee & Clark)): exact Jacobian blocks equal central differences",
          "[influence][runway][grad]") {
  for (nn::PosKind pos : {nn::PosKind::Alibi, nn::PosKind::Learned}) {
    nn::Model<double> m = fd_model(pos, "swa,full");
    const int n = 6, C = m.config.d_model;
    const auto w = random_windows(1, n, m.config.vocab_size - 1, 21)[0];
    for (int r : {1, 2}) {
      const JacobianBlocks J = jacobian_blocks(m, w, 0, r, true, 3);
      CHECK(J.vjps == static_cast<std::int64_t>(n) * C);
      // h_d(r)[c] through the residual-seed objective <e_(d,c), h(r)>
      auto h_value = [&](int d, int c) {
        std::vector<std::int32_t> tok(w.begin(), w.begin() + d + 1), tgt(tok.size(), -1);
        std::vector<double> seed(static_cast<std::size_t>(d + 1) * C, 0.0), scratch(m.params.size()), dres;
        seed[static_cast<std::size_t>(d) * C + c] = 1;
        nn::GradientSeed<double> gs;
        gs.resid_layer = r;
        gs.resid = seed.data();
        gs.out_layer = 0;
        gs.dresid = &dres;
        nn::Workspace<double> ws;
        return nn::forward_backward<double>(m, tok.data(), tgt.data(), 1, d + 1, &scratch, ws, nullptr, nullptr, &gs);
      };
      double err = 0, gmax = 1e-300;
      for (int d = 0; d < n; ++d)
        for (int s = 0; s <= d; ++s) {
          const Eigen::MatrixXd& blk = J.blocks[static_cast<std::size_t>(d) * n + s];
          gmax = std::max(gmax, blk.cwiseAbs().maxCoeff());
          for (int c2 = 0; c2 < C; ++c2) {
            double* x = e_entry(m, s, c2);
            const double x0 = *x;
            for (int c = 0; c < C; ++c) {
              *x = x0 + kStep;
              const double fp = h_value(d, c);
              *x = x0 - kStep;
              const double fm = h_value(d, c);
              *x = x0;
              err = std::max(err, std::abs((fp - fm) / (2 * kStep) - blk(c, c2)));
            }
          }
          CHECK(J.frobenius(d, s) == Approx(blk.norm()).epsilon(1e-12));
          Eigen::JacobiSVD<Eigen::MatrixXd> svd(blk);
          CHECK(J.spectral(d, s) == Approx(svd.singularValues()(0)).epsilon(1e-9).margin(1e-14));
        }
      INFO("pos " << nn::pos_name(pos) << ", r = " << r);
      CHECK(err / gmax < kRelTol);
    }
  }
}

TEST_CASE("Theorem 3.3 (Runway (Lee & Clark)): Jacobian blocks compose by the chain rule across layers",
          "[influence][runway]") {
  nn::Model<double> m = fd_model(nn::PosKind::Alibi, "block,full");
  const int n = 7;
  const auto w = random_windows(1, n, m.config.vocab_size - 1, 8)[0];
  const JacobianBlocks j01 = jacobian_blocks(m, w, 0, 1, true), j12 = jacobian_blocks(m, w, 1, 1, true),
                       j02 = jacobian_blocks(m, w, 0, 2, true);
  double err = 0, scale = 1e-300;
  for (int d = 0; d < n; ++d)
    for (int s = 0; s <= d; ++s) {
      Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(m.config.d_model, m.config.d_model);
      for (int u = s; u <= d; ++u) sum += j12.blocks[d * n + u] * j01.blocks[u * n + s];
      err = std::max(err, (sum - j02.blocks[d * n + s]).cwiseAbs().maxCoeff());
      scale = std::max(scale, j02.blocks[d * n + s].cwiseAbs().maxCoeff());
    }
  CHECK(err / scale < 1e-12);
  // block mask (b = 4) in layer 0: one-layer blocks across a block boundary are exactly zero
  CHECK(j01.frobenius(4, 3) == 0.0);
  CHECK(j01.frobenius(5, 0) == 0.0);
  CHECK(j01.frobenius(5, 4) > 0.0);
}
