// Finite-difference gradient tests in double precision (issue 4, acceptance 1): every op of
// cf/nn/ops.hpp and the whole model for every attention variant, position scheme and
// normalisation. The reference is a central difference of the same scalar loss, an independent
// computation of the derivative; the tolerance is relative to the largest gradient entry.
#include <omp.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>

#include "cf/nn/gemm_backend.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/ops.hpp"
#include "cf_test/finite_difference.hpp"

using namespace cf::nn;
using namespace cf::test;

namespace {

ModelConfig tiny_config(const std::string& schedule, PosKind pos = PosKind::Learned,
                        NormKind norm = NormKind::LayerNorm) {
  ModelConfig c;
  c.vocab_size = 11;
  c.block_size = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 8;
  c.pos = pos;
  c.norm = norm;
  LayerConfig proto;
  proto.b = 4;
  proto.w = 4;
  proto.e = 2;
  c.layers = parse_schedule(schedule, c.n_layer, proto);
  return c;
}

// Model-level check: random parameters (perturbed so that nonlinearities are exercised), random
// tokens and targets (one target ignored), all parameter gradients against central differences.
double model_fd_error(const ModelConfig& c, int B = 2, int Tn = 12) {
  Model<double> m = init_model<double>(c, 7);
  const auto noise = random_vec(m.params.size(), 11, 0.3);
  for (std::size_t i = 0; i < m.params.size(); ++i) m.params[i] += noise[i];
  std::mt19937 rng(3);
  std::vector<std::int32_t> tok(B * Tn), tgt(B * Tn);
  for (auto& t : tok) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  for (auto& t : tgt) t = static_cast<std::int32_t>(rng() % c.vocab_size);
  tgt[1] = -1;
  Workspace<double> ws;
  std::vector<double> grad(m.params.size(), 0.0);
  forward_backward<double>(m, tok.data(), tgt.data(), B, Tn, &grad, ws);
  auto loss = [&]() { return forward_backward<double>(m, tok.data(), tgt.data(), B, Tn, nullptr, ws); };
  // every tensor is probed: its first and last entry and four random ones (all of it when small)
  std::vector<std::size_t> idx;
  for (const auto& t : m.layout.tensors) {
    const auto o = static_cast<std::size_t>(t.offset), n = static_cast<std::size_t>(t.size);
    if (n <= 6) {
      for (std::size_t i = 0; i < n; ++i) idx.push_back(o + i);
      continue;
    }
    idx.push_back(o);
    idx.push_back(o + n - 1);
    for (int k = 0; k < 4; ++k) idx.push_back(o + rng() % n);
  }
  return fd_max_rel_error(m.params, grad, loss, idx);
}

// LayerNorm of N x C random rows (seeds from `seed`) against central differences: the largest
// relative errors of d x, d w, d b. The backward accumulates, so it starts from the constant
// gradients g0 (d x), -2 g0 (d w), 4 g0 (d b), subtracted again before the comparison.
std::array<double, 3> layernorm_fd_errors(int N, int C, std::uint64_t seed, double g0) {
  auto x = random_vec(N * C, seed), w = random_vec(C, seed + 1), b = random_vec(C, seed + 2),
       R = random_vec(N * C, seed + 3);
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto loss = [&]() {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    double s = 0;
    for (int i = 0; i < N * C; ++i) s += out[i] * R[i];
    return s;
  };
  loss();
  std::vector<double> dx(N * C, g0), dw(C, -2 * g0), db(C, 4 * g0);
  layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  for (auto& v : dx) v -= g0;
  for (auto& v : dw) v += 2 * g0;
  for (auto& v : db) v -= 4 * g0;
  return {fd_max_rel_error(x, dx, loss, all_indices(x.size())), fd_max_rel_error(w, dw, loss, all_indices(w.size())),
          fd_max_rel_error(b, db, loss, all_indices(b.size()))};
}

}  // namespace

TEST_CASE("Op gradients: layernorm_backward matches finite differences", "[nn][grad]") {
  const auto e = layernorm_fd_errors(3, 5, 1, 0.0);
  CHECK(e[0] < kRelTol);
  CHECK(e[1] < kRelTol);
  CHECK(e[2] < kRelTol);
}

TEST_CASE("Op gradients: layernorm_backward matches finite differences at widths past the lanes and column blocks",
          "[nn][grad]") {
  // C = 100: twelve whole eight-lane groups and a tail of 4 in the row sums (ops.hpp lane_sum),
  // a whole and a partial 64-column block in the dw, db accumulation; accumulating into non-zero
  // gradients
  const auto e = layernorm_fd_errors(7, 100, 5, 0.25);
  CHECK(e[0] < kRelTol);
  CHECK(e[1] < kRelTol);
  CHECK(e[2] < kRelTol);
}

TEST_CASE("layernorm_forward in float equals its definition computed in long double", "[nn][ops]") {
  for (const int C : {3, 8, 100, 768}) {
    const int N = 5;
    auto xd = random_vec(N * C, 9, 2.0), wd = random_vec(C, 10), bd = random_vec(C, 11);
    std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end());
    std::vector<float> out(N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    for (int n = 0; n < N; ++n) {
      long double m = 0, v = 0;
      for (int c = 0; c < C; ++c) m += x[n * C + c];
      m /= C;
      for (int c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
      v /= C;
      const long double s = 1.0L / std::sqrt(v + 1e-5L);
      INFO("C " << C << " row " << n);
      CHECK(std::abs(mean[n] - m) < 1e-6);
      CHECK(std::abs(rstd[n] - s) < 1e-5 * s);
      for (int c = 0; c < C; ++c) CHECK(std::abs(out[n * C + c] - ((x[n * C + c] - m) * s * w[c] + b[c])) < 1e-5);
    }
  }
}

TEST_CASE("crossentropy_forward in float equals the softmax and -log p computed in long double", "[nn][ops]") {
  // V = 5 (scalar tail only), 37, 1000 (packets and a tail); one ignored target
  for (const int V : {5, 37, 1000}) {
    const int N = 4;
    auto zd = random_vec(static_cast<std::size_t>(N) * V, 12, 4.0);
    std::vector<float> z(zd.begin(), zd.end()), z0 = z, losses(N);
    const std::vector<std::int32_t> tg = {0, -1, V - 1, V / 2};
    CHECK(crossentropy_forward(z.data(), losses.data(), tg.data(), N, V) == 3);
    for (int n = 0; n < N; ++n) {
      long double mx = z0[n * V], s = 0;
      for (int v = 0; v < V; ++v) mx = std::max<long double>(mx, z0[n * V + v]);
      for (int v = 0; v < V; ++v) s += std::exp(static_cast<long double>(z0[n * V + v]) - mx);
      INFO("V " << V << " row " << n);
      for (int v = 0; v < V; ++v)
        CHECK(std::abs(z[n * V + v] - std::exp(z0[n * V + v] - mx) / s) <
              1e-6 * std::exp(z0[n * V + v] - mx) / s + 1e-9);
      if (tg[n] < 0)
        CHECK(losses[n] == 0.f);
      else
        CHECK(std::abs(losses[n] - (std::log(s) - (z0[n * V + tg[n]] - mx))) < 1e-5);
    }
  }
}

TEST_CASE("Op gradients: linear_backward matches finite differences", "[nn][grad]") {
  const int N = 4, C = 3, OC = 5;
  auto x = random_vec(N * C, 1), W = random_vec(OC * C, 2), b = random_vec(OC, 3), R = random_vec(N * OC, 4);
  std::vector<double> out(N * OC);
  auto loss = [&]() {
    linear_forward(out.data(), x.data(), W.data(), b.data(), N, C, OC);
    double s = 0;
    for (int i = 0; i < N * OC; ++i) s += out[i] * R[i];
    return s;
  };
  std::vector<double> dx(N * C, 0), dW(OC * C, 0), db(OC, 0);
  linear_backward(dx.data(), dW.data(), db.data(), R.data(), x.data(), W.data(), N, C, OC);
  CHECK(fd_max_rel_error(x, dx, loss, all_indices(x.size())) < kRelTol);
  CHECK(fd_max_rel_error(W, dW, loss, all_indices(W.size())) < kRelTol);
  CHECK(fd_max_rel_error(b, db, loss, all_indices(b.size())) < kRelTol);
}

TEST_CASE("Op gradients: gelu_backward matches finite differences", "[nn][grad]") {
  auto x = random_vec(20, 5, 3.0), R = random_vec(20, 6);
  std::vector<double> out(20), dx(20, 0);
  auto loss = [&]() {
    gelu_forward(out.data(), x.data(), 20);
    double s = 0;
    for (int i = 0; i < 20; ++i) s += out[i] * R[i];
    return s;
  };
  gelu_backward(dx.data(), x.data(), R.data(), 20);
  CHECK(fd_max_rel_error(x, dx, loss, all_indices(x.size())) < kRelTol);
  // accumulate = false overwrites (the MLP backward's form): stale values in the buffer are ignored
  std::vector<double> dx2(20, 123.0);
  gelu_backward(dx2.data(), x.data(), R.data(), 20, false);
  CHECK(fd_max_rel_error(x, dx2, loss, all_indices(x.size())) < kRelTol);
  // and accumulating adds to what is there: 2 x the gradient after a second call
  gelu_backward(dx.data(), x.data(), R.data(), 20);
  for (int i = 0; i < 20; ++i) CHECK(dx[i] == Approx(2 * dx2[i]).epsilon(1e-12));
}

TEST_CASE("Op gradients: crossentropy_backward matches finite differences", "[nn][grad]") {
  const int N = 3, V = 7;
  auto z = random_vec(N * V, 7, 3.0);
  std::vector<std::int32_t> tg = {2, -1, 6};
  std::vector<double> buf(N * V), losses(N);
  auto loss = [&]() {
    buf = z;
    crossentropy_forward(buf.data(), losses.data(), tg.data(), N, V);
    return (losses[0] + losses[1] + losses[2]) / 2.0;
  };
  loss();
  crossentropy_backward(buf.data(), tg.data(), N, V, 0.5);
  const std::vector<double> dz = buf;
  CHECK(fd_max_rel_error(z, dz, loss, all_indices(z.size())) < kRelTol);
  // the log-sum-exp form keeps -log p finite where p underflows
  std::vector<double> big = {0.0, 2000.0};
  std::vector<std::int32_t> t0 = {0};
  double l0 = 0;
  crossentropy_forward(big.data(), &l0, t0.data(), 1, 2);
  CHECK(l0 == Approx(2000.0));
}

TEST_CASE("Op gradients: encoder_backward and rope inverse", "[nn][grad]") {
  const int B = 2, Tn = 3, C = 4, V = 5;
  auto wte = random_vec(V * C, 1), wpe = random_vec(Tn * C, 2), R = random_vec(B * Tn * C, 3);
  std::vector<std::int32_t> tok = {1, 4, 1, 0, 1, 3};
  std::vector<double> out(B * Tn * C);
  auto loss = [&]() {
    encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, Tn, C);
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * R[i];
    return s;
  };
  std::vector<double> dwte(V * C, 0), dwpe(Tn * C, 0);
  encoder_backward(dwte.data(), dwpe.data(), R.data(), tok.data(), B, Tn, C);
  CHECK(fd_max_rel_error(wte, dwte, loss, all_indices(wte.size())) < kRelTol);
  CHECK(fd_max_rel_error(wpe, dwpe, loss, all_indices(wpe.size())) < kRelTol);
  // RoPE is a rotation: inverse(apply(x)) == x and norms per pair are preserved
  auto x = random_vec(5 * 6, 9), y = x;
  rope_apply(y.data(), 5, 6, 6, false);
  for (int t = 0; t < 5; ++t)
    for (int i = 0; i < 3; ++i) {
      const double* a = &x[t * 6 + 2 * i];
      const double* b = &y[t * 6 + 2 * i];
      CHECK(a[0] * a[0] + a[1] * a[1] == Approx(b[0] * b[0] + b[1] * b[1]));
    }
  rope_apply(y.data(), 5, 6, 6, true);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y[i] == Approx(x[i]).margin(1e-14));
}

TEST_CASE("Model gradients: every attention variant matches finite differences", "[nn][grad]") {
  const char* schedules[] = {"full",       "block",           "swa", "bridge", "pbb",      "se-bridge",
                             "runway-dot", "runway-bilinear", "sd",  "linear", "swa,full", "linear,sd"};
  for (const char* s : schedules) {
    for (auto fusion : {cf::graph::Fusion::Branch, cf::graph::Fusion::Union}) {
      ModelConfig c = tiny_config(s);
      for (auto& l : c.layers) l.fusion = fusion;
      INFO("schedule " << s << " fusion " << (fusion == cf::graph::Fusion::Branch ? "branch" : "union"));
      CHECK(model_fd_error(c) < kRelTol);
      const std::string str = s;
      if (str != "bridge" && str != "pbb" && str != "se-bridge") break;  // fusion only matters for bridges
    }
  }
}

TEST_CASE("Model gradients: positions learned rope alibi none, no LayerNorm, no bias, per-layer d_head", "[nn][grad]") {
  for (auto pos : {PosKind::Learned, PosKind::Rope, PosKind::Alibi, PosKind::None}) {
    INFO("pos " << pos_name(pos));
    CHECK(model_fd_error(tiny_config("full", pos)) < kRelTol);
  }
  ModelConfig sd_noln = tiny_config("sd", PosKind::None, NormKind::None);
  CHECK(model_fd_error(sd_noln) < kRelTol);
  ModelConfig nb = tiny_config("pbb,runway-bilinear", PosKind::Rope);
  nb.bias = false;
  nb.proj_bias = false;
  nb.layers[0].d_head = 6;
  nb.layers[1].d_head = 2;
  CHECK(model_fd_error(nb) < kRelTol);
}

// Runs with the GEMM back end of the environment (cf/nn/gemm_backend.hpp); tests/nn/CMakeLists.txt
// also runs it with CF_GEMM=openblas and CF_GEMM=eigen so both float paths are checked on any CPU.
TEST_CASE("Linear layer: float path (selected GEMM back end) agrees with the double path", "[nn][blas]") {
  const int N = 37, C = 19, OC = 23;
  auto x = random_vec(N * C, 1), W = random_vec(OC * C, 2), b = random_vec(OC, 3), R = random_vec(N * OC, 4);
  std::vector<double> yd(N * OC), dxd(N * C, 0), dWd(OC * C, 0), dbd(OC, 0);
  linear_forward(yd.data(), x.data(), W.data(), b.data(), N, C, OC);
  linear_backward(dxd.data(), dWd.data(), dbd.data(), R.data(), x.data(), W.data(), N, C, OC);
  std::vector<float> xf(x.begin(), x.end()), Wf(W.begin(), W.end()), bf(b.begin(), b.end()), Rf(R.begin(), R.end());
  std::vector<float> yf(N * OC), dxf(N * C, 0), dWf(OC * C, 0), dbf(OC, 0);
  linear_forward(yf.data(), xf.data(), Wf.data(), bf.data(), N, C, OC);
  linear_backward(dxf.data(), dWf.data(), dbf.data(), Rf.data(), xf.data(), Wf.data(), N, C, OC);
  // float accumulation over <= 37 terms of size <= 1: errors ~ 1e-6; 1e-4 leaves a wide margin
  for (int i = 0; i < N * OC; ++i) REQUIRE(std::abs(yf[i] - yd[i]) < 1e-4);
  for (int i = 0; i < N * C; ++i) REQUIRE(std::abs(dxf[i] - dxd[i]) < 1e-4);
  for (int i = 0; i < OC * C; ++i) REQUIRE(std::abs(dWf[i] - dWd[i]) < 1e-4);
  for (int i = 0; i < OC; ++i) REQUIRE(std::abs(dbf[i] - dbd[i]) < 1e-4);
}

// sgemm_omp (cf/nn/gemm_backend.hpp) cuts the output into one block of 64-row (or 64-column) units
// per OpenMP thread, each a single-threaded OpenBLAS call. Oracle: the product accumulated in double
// (float round-off only), which also catches a block at a wrong offset. Sizes are ragged (not
// multiples of 64) and large enough to be split; both split directions, all four transpose
// combinations, beta 0 and 1, padded strides (the padding must stay untouched); a second call with
// the same thread count gives the same bits (the split is static).
TEST_CASE("sgemm_omp: every thread count gives the product computed in double, the same bits on every call",
          "[nn][blas]") {
  struct Shape {
    int M, N, K;
  };
  const int saved_threads = omp_get_max_threads();
  for (const Shape s : {Shape{203, 77, 150}, Shape{90, 331, 129}}) {  // rows split; columns split
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.f, 1.f}) {
          const int M = s.M, N = s.N, K = s.K;
          const int lda = ta ? M + 3 : K + 3, ldb = tb ? K + 5 : N + 5, ldc = N + 2;  // padded strides
          std::mt19937 rng(static_cast<unsigned>(M * 7 + ta * 2 + tb));
          std::uniform_real_distribution<float> u(-1.f, 1.f);
          std::vector<float> A(static_cast<std::size_t>(ta ? K : M) * lda),
              B(static_cast<std::size_t>(tb ? N : K) * ldb), C0(static_cast<std::size_t>(M) * ldc);
          for (auto* v : {&A, &B, &C0})
            for (auto& x : *v) x = u(rng);
          auto a = [&](int i, int k) {
            return double(ta ? A[static_cast<std::size_t>(k) * lda + i] : A[static_cast<std::size_t>(i) * lda + k]);
          };
          auto b = [&](int k, int j) {
            return double(tb ? B[static_cast<std::size_t>(j) * ldb + k] : B[static_cast<std::size_t>(k) * ldb + j]);
          };
          for (const int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            std::vector<float> got = C0, again = C0;
            sgemm_omp(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, got.data(), ldc);
            sgemm_omp(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, again.data(), ldc);
            INFO("M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb << " beta " << beta
                      << " threads " << threads);
            REQUIRE(got == again);
            double worst = 0;
            for (int i = 0; i < M; ++i) {
              for (int j = 0; j < N; ++j) {
                double d = beta * double(C0[static_cast<std::size_t>(i) * ldc + j]);
                for (int k = 0; k < K; ++k) d += 0.5 * a(i, k) * b(k, j);
                worst = std::max(worst, std::abs(d - got[static_cast<std::size_t>(i) * ldc + j]));
              }
              for (int j = N; j < ldc; ++j)
                REQUIRE(got[static_cast<std::size_t>(i) * ldc + j] == C0[static_cast<std::size_t>(i) * ldc + j]);
            }
            CHECK(worst < 1e-4);  // K <= 150 terms of size <= 0.5 in float: ~1e-5
          }
        }
  }
  omp_set_num_threads(saved_threads);
}
