// The capture hook of lib/nn (ForwardHooks::on_layer), the capture driver (cf/nn/capture.hpp) and
// the measured rollout kernels read back from a capture (cf/rollout/kernel.hpp): probabilities are
// row-stochastic and respect the Boundary repair (Yang) masks, equal independent recomputations from the captured
// Q and K, the norms equal recomputation from the hidden states, the hook leaves the logits
// bit-identical, and alpha_l in the file equals docs/spec.md §2 / Position bias (Herasimchyk et al.) Eq. 1 recomputed
// from the norms.
#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "cf/core/error.hpp"
#include "cf/graph/mask.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/model.hpp"
#include "cf/rollout/kernel.hpp"

using namespace cf::nn;
namespace fs = std::filesystem;

namespace {

using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

ModelConfig config(const std::string& attn, int L, PosKind pos = PosKind::Learned,
                   cf::graph::Fusion fusion = cf::graph::Fusion::Branch, int block = 32) {
  ModelConfig c;
  c.vocab_size = 23;
  c.block_size = block;
  c.n_layer = L;
  c.n_head = 3;
  c.d_model = 24;
  c.pos = pos;
  LayerConfig p;
  p.b = 8;
  p.w = 6;
  p.e = 3;
  p.fusion = fusion;
  c.layers = parse_schedule(attn, L, p);
  return c;
}

// Weights a little larger than GPT-2's 0.02 so that attention is far from uniform and the
// recomputations below test something.
Model<float> random_model(const ModelConfig& c, std::uint64_t seed) {
  Model<float> m = init_model<float>(c, seed);
  std::mt19937 rng(static_cast<unsigned>(seed) + 1);
  std::normal_distribution<float> g(0.0f, 0.25f);
  for (float& w : m.params) w += g(rng);
  return m;
}

std::vector<std::int32_t> random_tokens(int n, int V, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, V - 1);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = u(rng);
  return t;
}

// Copies of everything the hook reports, per layer (one sequence).
struct Seen {
  int n_head = 0, T = 0, dh = 0, C = 0;
  std::vector<float> probs, q, k, x, a, y, nx, na, ny;
};

std::vector<Seen> run_with_hook(const Model<float>& m, const std::vector<std::int32_t>& tokens,
                                Eigen::MatrixXf* logits) {
  std::vector<Seen> seen(static_cast<std::size_t>(m.config.n_layer));
  ForwardHooks hooks;
  hooks.on_layer = [&](const LayerActivations& la) {
    Seen& s = seen[static_cast<std::size_t>(la.layer)];
    s.n_head = la.n_head, s.T = la.seq_len, s.dh = la.d_head, s.C = la.d_model;
    const std::size_t H = la.n_head, T = la.seq_len, D = la.d_head, C = la.d_model;
    s.probs.assign(la.attn_probs, la.attn_probs + H * T * T);
    s.q.assign(la.q, la.q + H * T * D);
    s.k.assign(la.k, la.k + H * T * D);
    s.x.assign(la.resid_in, la.resid_in + T * C);
    s.a.assign(la.attn_out, la.attn_out + T * C);
    s.y.assign(la.resid_out, la.resid_out + T * C);
    s.nx.assign(la.resid_in_norm, la.resid_in_norm + T);
    s.na.assign(la.attn_out_norm, la.attn_out_norm + T);
    s.ny.assign(la.resid_out_norm, la.resid_out_norm + T);
  };
  Eigen::MatrixXf lg = forward_logits(m, tokens, &hooks);
  if (logits) *logits = lg;
  return seen;
}

MatD head_matrix(const std::vector<float>& buf, int h, int rows, int cols) {
  MatD r(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) r(i, j) = buf[(static_cast<std::size_t>(h) * rows + i) * cols + j];
  return r;
}

// Masked row softmax of logits S over the causal triangle (independent of lib/nn's kernel).
MatD causal_softmax(const MatD& S) {
  MatD P = MatD::Zero(S.rows(), S.cols());
  for (long i = 0; i < S.rows(); ++i) {
    const double mx = S.row(i).head(i + 1).maxCoeff();
    double z = 0;
    for (long j = 0; j <= i; ++j) z += std::exp(S(i, j) - mx);
    for (long j = 0; j <= i; ++j) P(i, j) = std::exp(S(i, j) - mx) / z;
  }
  return P;
}

std::string tmp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("cf_test_capture_" + std::to_string(::getpid()) + "_" + name)).string();
}

cf::graph::Mask graph_mask(const LayerConfig& lc, int T) {
  cf::graph::Pattern p;
  p.b = lc.b, p.w = lc.w, p.e = lc.e;
  p.kind = lc.attn == AttnKind::Block      ? cf::graph::PatternKind::Block
           : lc.attn == AttnKind::Swa      ? cf::graph::PatternKind::Swa
           : lc.attn == AttnKind::Bridge   ? cf::graph::PatternKind::Bridge
           : lc.attn == AttnKind::Pbb      ? cf::graph::PatternKind::Pbb
           : lc.attn == AttnKind::SeBridge ? cf::graph::PatternKind::SeBridge
                                           : cf::graph::PatternKind::Full;
  return cf::graph::make_mask(p, T);
}

}  // namespace

TEST_CASE("capture hook: probabilities are row-stochastic and zero outside the Boundary repair (Yang) masks, T = 29",
          "[capture][boundary]") {
  const int T = 29;
  for (auto fusion : {cf::graph::Fusion::Branch, cf::graph::Fusion::Union}) {
    const ModelConfig c = config("full,block,swa,bridge,pbb,se-bridge,runway-dot,sd,linear", 9, PosKind::Rope, fusion);
    const Model<float> m = random_model(c, 11);
    const auto seen = run_with_hook(m, random_tokens(T, c.vocab_size, 3), nullptr);
    for (int l = 0; l < c.n_layer; ++l) {
      const LayerConfig& lc = c.layers[static_cast<std::size_t>(l)];
      const bool bridged = lc.attn == AttnKind::Bridge || lc.attn == AttnKind::Pbb || lc.attn == AttnKind::SeBridge;
      const cf::graph::Mask mask = graph_mask(lc, T);
      INFO("layer " << l << " " << attn_name(lc.attn) << " fusion "
                    << (fusion == cf::graph::Fusion::Branch ? "branch" : "union"));
      const Seen& s = seen[static_cast<std::size_t>(l)];
      REQUIRE(s.n_head == c.n_head);
      REQUIRE(s.T == T);
      for (int h = 0; h < c.n_head; ++h) {
        const MatD P = head_matrix(s.probs, h, T, T);
        for (int i = 0; i < T; ++i) {
          // branch fusion (Boundary repair (Yang) Eq. 35) reports the block softmax plus one softmax per bridge j
          // whose write-back set R_j holds the row (and has a causal source): 1 + that count
          double want = 1;
          if (bridged && fusion == cf::graph::Fusion::Branch)
            for (const auto& W : cf::graph::bridge_windows(mask))
              if (i >= W.r_lo && i < W.r_hi && W.s_lo <= std::min<cf::graph::Index>(W.s_hi - 1, i)) want += 1;
          CHECK(P.row(i).sum() == Approx(want).epsilon(1e-5));
          for (int j = 0; j < T; ++j) {
            const bool edge = j <= i && cf::graph::has_edge_brute_force(mask, j, i);
            if (!edge) CHECK(P(i, j) == 0.0f);
            CHECK(P(i, j) >= 0.0);
          }
        }
      }
    }
  }
}

TEST_CASE(
    "capture hook: probabilities equal softmax of the captured Q K^T / sqrt(d_head) plus bias, linear = ELU+1 "
    "weights",
    "[capture]") {
  const int T = 20;
  for (PosKind pos : {PosKind::Learned, PosKind::Alibi, PosKind::Rope}) {
    const ModelConfig c = config("full,linear,full", 3, pos);
    const Model<float> m = random_model(c, 5);
    const auto seen = run_with_hook(m, random_tokens(T, c.vocab_size, 8), nullptr);
    for (int l = 0; l < c.n_layer; ++l) {
      const Seen& s = seen[static_cast<std::size_t>(l)];
      for (int h = 0; h < c.n_head; ++h) {
        const MatD Q = head_matrix(s.q, h, T, s.dh), K = head_matrix(s.k, h, T, s.dh);
        const MatD P = head_matrix(s.probs, h, T, T);
        MatD want;
        if (c.layers[static_cast<std::size_t>(l)].attn == AttnKind::Linear) {
          auto phi = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
          const MatD A = Q.unaryExpr(phi) * K.unaryExpr(phi).transpose();
          want = MatD::Zero(T, T);
          for (int i = 0; i < T; ++i) want.row(i).head(i + 1) = A.row(i).head(i + 1) / A.row(i).head(i + 1).sum();
        } else {
          MatD S = Q * K.transpose() / std::sqrt(static_cast<double>(s.dh));
          if (pos == PosKind::Alibi)
            for (int i = 0; i < T; ++i)
              for (int j = 0; j <= i; ++j) S(i, j) -= std::pow(2.0, -8.0 * (h + 1) / c.n_head) * (i - j);
          want = causal_softmax(S);
        }
        INFO("pos " << pos_name(pos) << " layer " << l << " head " << h);
        // float32 forward pass against a double recomputation from float32 Q, K
        CHECK((P - want).cwiseAbs().maxCoeff() < 2e-5);
      }
    }
  }
}

TEST_CASE("capture hook: layer 0 Q, K, attention output and norms equal an independent double recomputation",
          "[capture]") {
  const int T = 17;
  const ModelConfig c = config("full,swa", 2);
  const Model<float> m = random_model(c, 21);
  const auto tokens = random_tokens(T, c.vocab_size, 4);
  const auto seen = run_with_hook(m, tokens, nullptr);
  const Seen& s = seen[0];
  const int C = c.d_model, H = c.n_head, dh = C / H;
  const float* W = m.params.data();
  const LayerOffsets& o = m.layout.layer[0];
  // x_0 = wte[token] + wpe[t]; ln_1; qkv = ln x W^T + b; per head softmax(QK^T/sqrt(dh)) V; c_proj
  MatD X(T, C), N(T, C);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < C; ++k) X(t, k) = double(W[m.layout.wte + tokens[t] * C + k]) + W[m.layout.wpe + t * C + k];
  for (int t = 0; t < T; ++t) {
    const double mu = X.row(t).mean();
    const double var = (X.row(t).array() - mu).square().mean();
    for (int k = 0; k < C; ++k) N(t, k) = (X(t, k) - mu) / std::sqrt(var + 1e-5) * W[o.ln1_w + k] + W[o.ln1_b + k];
  }
  const MatD Wqkv =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(W + o.attn_w, 3 * C, C)
          .cast<double>();
  MatD QKV = N * Wqkv.transpose();
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < 3 * C; ++k) QKV(t, k) += W[o.attn_b + k];
  MatD Y(T, C);
  for (int h = 0; h < H; ++h) {
    const MatD Q = QKV.block(0, h * dh, T, dh), K = QKV.block(0, C + h * dh, T, dh),
               V = QKV.block(0, 2 * C + h * dh, T, dh);
    CHECK((head_matrix(s.q, h, T, dh) - Q).cwiseAbs().maxCoeff() < 1e-4);
    CHECK((head_matrix(s.k, h, T, dh) - K).cwiseAbs().maxCoeff() < 1e-4);
    const MatD P = causal_softmax(Q * K.transpose() / std::sqrt(double(dh)));
    CHECK((head_matrix(s.probs, h, T, T) - P).cwiseAbs().maxCoeff() < 1e-4);
    Y.block(0, h * dh, T, dh) = P * V;
  }
  const MatD Wp =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(W + o.proj_w, C, C)
          .cast<double>();
  MatD A = Y * Wp.transpose();
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < C; ++k) A(t, k) += W[o.proj_b + k];
  for (int t = 0; t < T; ++t) {
    CHECK(s.nx[t] == Approx(X.row(t).norm()).epsilon(1e-5));
    CHECK(s.na[t] == Approx(A.row(t).norm()).epsilon(1e-4));
    CHECK(s.ny[t] == Approx((X.row(t) + A.row(t)).norm()).epsilon(1e-4));
  }
  // every layer: the norms are those of the reported hidden states, and resid_out = resid_in + attn_out
  for (const Seen& L : seen)
    for (int t = 0; t < T; ++t) {
      double sx = 0, sa = 0, sy = 0;
      for (int k = 0; k < C; ++k) {
        const std::size_t i = static_cast<std::size_t>(t) * C + k;
        sx += double(L.x[i]) * L.x[i], sa += double(L.a[i]) * L.a[i], sy += double(L.y[i]) * L.y[i];
        CHECK(L.y[i] == L.x[i] + L.a[i]);
      }
      CHECK(L.nx[t] == Approx(std::sqrt(sx)).epsilon(1e-6));
      CHECK(L.na[t] == Approx(std::sqrt(sa)).epsilon(1e-6));
      CHECK(L.ny[t] == Approx(std::sqrt(sy)).epsilon(1e-6));
    }
}

TEST_CASE("capture hook: logits with the hook equal the logits without it bit for bit, 9 variants", "[capture]") {
  const ModelConfig c = config("full,block,swa,bridge,pbb,se-bridge,runway-bilinear,sd,linear", 9, PosKind::Alibi);
  const Model<float> m = random_model(c, 2);
  const auto tokens = random_tokens(31, c.vocab_size, 9);
  const Eigen::MatrixXf plain = forward_logits(m, tokens);
  Eigen::MatrixXf hooked;
  run_with_hook(m, tokens, &hooked);
  REQUIRE(hooked.rows() == plain.rows());
  CHECK((hooked.array() == plain.array()).all());
  // the hook is inference-only, like every forward hook
  ForwardHooks hooks;
  hooks.on_layer = [](const LayerActivations&) {};
  Workspace<float> ws;
  std::vector<float> grad(static_cast<std::size_t>(m.layout.total), 0.0f);
  std::vector<std::int32_t> tg(tokens.begin() + 1, tokens.end());
  tg.push_back(-1);
  CHECK_THROWS_AS(forward_backward<float>(m, tokens.data(), tg.data(), 1, 31, &grad, ws, &hooks), cf::InvalidArgument);
}

TEST_CASE("capture_windows spreads N windows of T + 1 tokens evenly and rejects input shorter than T + 1",
          "[capture]") {
  std::vector<std::int32_t> t(100);
  for (int i = 0; i < 100; ++i) t[static_cast<std::size_t>(i)] = i;
  const auto w = capture_windows(t, 10, 4);
  REQUIRE(w.size() == 4);
  CHECK(w[0].front() == 0);
  CHECK(w[1].front() == 30);
  CHECK(w[3].front() == 89);
  CHECK(w[3].back() == 99);
  for (const auto& x : w) CHECK(x.size() == 11);
  CHECK(capture_windows(t, 99, 3)[2].front() == 0);  // overlapping when the input is short
  CHECK_THROWS_WITH(capture_windows(t, 100, 1), Catch::Contains("T + 1 = 101"));
  CHECK_THROWS_AS(capture_windows({}, 4, 1), cf::InvalidArgument);
}

TEST_CASE(
    "capture file: alpha in both docs/spec.md §2 forms equals Eq. 1 recomputed from the stored norms, and rollout "
    "kernels are the head and sequence mean",
    "[capture][position_bias]") {
  const ModelConfig c = config("full,bridge,linear", 3, PosKind::Learned, cf::graph::Fusion::Branch, 64);
  const Model<float> m = random_model(c, 7);
  const int T = 24, N = 3;
  const auto windows = capture_windows(random_tokens(200, c.vocab_size, 1), T, N);
  const std::string path = tmp_path("alpha.h5");
  CaptureOptions opt;
  opt.source = "random tokens";
  const CaptureSummary sum = capture_model(m, windows, path, opt);
  REQUIRE(sum.layers.size() == 3);
  const cf::io::File f = cf::io::File::open(path);
  CHECK(f.attr_string("format") == "causalflow-capture");
  CHECK(f.dataset_shape("layer_1/attn_probs") == cf::io::Shape{3, 3, 24, 24});
  CHECK(f.dataset_shape("layer_2/q") == cf::io::Shape{3, 3, 24, 8});
  CHECK(f.dataset_shape("layer_0/resid_out_norm") == cf::io::Shape{3, 24});
  CHECK(f.dataset_shape("tokens") == cf::io::Shape{3, 24});
  CHECK(!f.has("heads"));
  const auto tm = f.read<double>("alpha_token_mean").data, fr = f.read<double>("alpha_frobenius").data;
  for (int l = 0; l < 3; ++l) {
    const std::string g = "layer_" + std::to_string(l) + "/";
    const auto x = f.read<double>(g + "resid_in_norm").data, a = f.read<double>(g + "attn_out_norm").data;
    double want_tm = 0, want_fr = 0;
    for (int n = 0; n < N; ++n) {
      double s = 0, xx = 0, aa = 0;
      for (int t = 0; t < T; ++t) {
        const double xn = x[static_cast<std::size_t>(n * T + t)], an = a[static_cast<std::size_t>(n * T + t)];
        s += an / (xn + an);
        xx += xn * xn, aa += an * an;
      }
      want_tm += s / T / N;
      want_fr += std::sqrt(aa) / (std::sqrt(xx) + std::sqrt(aa)) / N;  // ||A||_F / (||X||_F + ||A||_F)
    }
    CHECK(tm[static_cast<std::size_t>(l)] == Approx(want_tm).epsilon(1e-12));
    CHECK(fr[static_cast<std::size_t>(l)] == Approx(want_fr).epsilon(1e-12));
    CHECK(sum.layers[static_cast<std::size_t>(l)].alpha_token_mean == tm[static_cast<std::size_t>(l)]);
    CHECK(sum.layers[static_cast<std::size_t>(l)].alpha_frobenius == fr[static_cast<std::size_t>(l)]);
    CHECK(f.open_group("layer_" + std::to_string(l)).attr_double("alpha_frobenius") == fr[static_cast<std::size_t>(l)]);
    CHECK(sum.layers[static_cast<std::size_t>(l)].entropy > 0);
    CHECK(sum.layers[static_cast<std::size_t>(l)].entropy <= std::log(double(T)));
  }
  // measured rollout kernels: uniform head mean of the row-normalised probabilities, then sequence mean
  const auto ks = cf::rollout::read_capture_kernels(path);
  REQUIRE(ks.size() == 3);
  for (int l = 0; l < 3; ++l) {
    const auto p = f.read<double>("layer_" + std::to_string(l) + "/attn_probs").data;
    MatD want = MatD::Zero(T, T);
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < c.n_head; ++h)
        for (int i = 0; i < T; ++i) {
          const std::size_t row = ((static_cast<std::size_t>(n) * c.n_head + h) * T + i) * T;
          double s = 0;
          for (int j = 0; j < T; ++j) s += p[row + j];
          for (int j = 0; j < T; ++j) want(i, j) += p[row + j] / s / (N * c.n_head);
        }
    CHECK((ks[static_cast<std::size_t>(l)] - want).cwiseAbs().maxCoeff() < 1e-12);
    for (int i = 0; i < T; ++i) CHECK(ks[static_cast<std::size_t>(l)].row(i).sum() == Approx(1.0).epsilon(1e-14));
  }
  // a head subset changes attn_probs/q/k only
  opt.heads = {2, 0};
  const std::string sub = tmp_path("heads.h5");
  const CaptureSummary s2 = capture_model(m, windows, sub, opt);
  const cf::io::File g = cf::io::File::open(sub);
  CHECK(g.dataset_shape("layer_0/attn_probs") == cf::io::Shape{3, 2, 24, 24});
  CHECK(g.read<std::int64_t>("heads").data == std::vector<std::int64_t>{2, 0});
  CHECK(s2.layers[1].alpha_token_mean == sum.layers[1].alpha_token_mean);
  const auto full = f.read_rows<float>("layer_0/attn_probs", 1, 1).data,
             part = g.read_rows<float>("layer_0/attn_probs", 1, 1).data;
  for (std::size_t i = 0; i < static_cast<std::size_t>(T * T); ++i) {
    CHECK(part[i] == full[2 * T * T + i]);
    CHECK(part[T * T + i] == full[i]);
  }
  opt.heads = {3};
  CHECK_THROWS_WITH(capture_model(m, windows, sub, opt), Catch::Contains("outside [0, n_head = 3)"));
  std::remove(path.c_str());
  std::remove(sub.c_str());
}
