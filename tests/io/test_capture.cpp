// Capture files: the residual mixing coefficient alpha (docs/spec.md §2, Position bias (Herasimchyk et al.) Eq. 1) from
// per-token norms against direct matrix computations, and the streaming capture writer (layout, shapes, h5py
// compatibility, incomplete captures never replace a file).
#include <unistd.h>

#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/io/capture.hpp"

using namespace cf::io;

namespace {
std::string tmp_path(const std::string& name) {
  return "/tmp/cf_test_capture_" + std::to_string(::getpid()) + "_" + name;
}
}  // namespace

TEST_CASE("Eq. 1 residual mixing coefficient alpha in token-mean and Frobenius forms", "[io][position_bias]") {
  // Independent computation: draw the residual stream X_n (T x d) and attention output A_n per
  // sample, compute alpha from the matrices themselves, and compare with residual_alpha fed only
  // the per-token norms.
  std::mt19937 rng(7);
  std::normal_distribution<double> g(0.0, 1.0);
  const int N = 5, T = 9, d = 6;
  Eigen::MatrixXd rn(N, T), an(N, T);
  double tm = 0, fr = 0;
  for (int n = 0; n < N; ++n) {
    Eigen::MatrixXd X(T, d), A(T, d);
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < d; ++j) {
        X(i, j) = g(rng) * (1 + n);
        A(i, j) = g(rng) * 0.3 * (1 + i);
      }
    double s = 0;
    for (int t = 0; t < T; ++t) {
      rn(n, t) = X.row(t).norm();
      an(n, t) = A.row(t).norm();
      s += A.row(t).norm() / (X.row(t).norm() + A.row(t).norm());
    }
    tm += s / T;
    fr += A.norm() / (X.norm() + A.norm());  // Eigen's norm() of a matrix is Frobenius
  }
  const ResidualAlpha a = residual_alpha(rn, an);
  CHECK(a.token_mean == Approx(tm / N).epsilon(1e-13));
  CHECK(a.frobenius == Approx(fr / N).epsilon(1e-13));

  // Closed form: A = c X for every token gives alpha = c / (1 + c) in both forms.
  Eigen::MatrixXd x = rn.cwiseAbs() + Eigen::MatrixXd::Constant(N, T, 0.5);
  const ResidualAlpha b = residual_alpha(x, 0.25 * x);
  CHECK(b.token_mean == Approx(0.2).epsilon(1e-14));
  CHECK(b.frobenius == Approx(0.2).epsilon(1e-14));
  // Zero attention output: alpha = 0; zero residual: alpha = 1.
  CHECK(residual_alpha(x, Eigen::MatrixXd::Zero(N, T)).frobenius == 0.0);
  CHECK(residual_alpha(Eigen::MatrixXd::Zero(N, T), x).token_mean == 1.0);
  CHECK_THROWS_WITH(residual_alpha(x, Eigen::MatrixXd::Zero(N, T + 1)), Catch::Contains("equal shapes"));
  CHECK_THROWS_WITH(residual_alpha(-x, x), Catch::Contains(">= 0"));
}

TEST_CASE("capture writer streams layers and sequences into the documented layout", "[io]") {
  const std::string path = tmp_path("cap.h5");
  CaptureHeader h;
  h.config_json = R"({"n_layer": 2})";
  h.source = "unit test";
  h.n_seq = 2;
  h.seq_len = 3;
  h.n_head = {2, 1};
  h.d_head = {4, 8};
  auto fill_value = [](int l, int n, std::size_t i) { return static_cast<float>(100 * l + 10 * n) + 0.5f * i; };
  write_capture_atomic(path, h, [&](CaptureWriter& w) {
    for (int n = 1; n >= 0; --n) {  // any order
      w.write_tokens(n, {n, n + 1, n + 2});
      for (int l = 0; l < 2; ++l) {
        const std::size_t H = h.n_head[l], D = h.d_head[l], T = 3;
        std::vector<float> probs(H * T * T), q(H * T * D), k(H * T * D), rn(T), an(T);
        for (std::size_t i = 0; i < probs.size(); ++i) probs[i] = fill_value(l, n, i);
        for (std::size_t i = 0; i < q.size(); ++i) q[i] = fill_value(l, n, i), k[i] = -fill_value(l, n, i);
        for (std::size_t t = 0; t < T; ++t) rn[t] = 3.0f, an[t] = (l == 0 ? 1.0f : 3.0f);
        w.write(l, n, LayerCapture{probs.data(), q.data(), k.data(), rn.data(), an.data()});
      }
    }
  });
  File f = File::open(path);
  CHECK(f.attr_string("format") == "causalflow-capture");
  CHECK(f.attr_string("config") == h.config_json);
  CHECK(f.attr_string("source") == "unit test");
  CHECK(f.list_groups() == std::vector<std::string>{"layer_0", "layer_1"});
  CHECK(f.dataset_shape("layer_0/attn_probs") == Shape{2, 2, 3, 3});
  CHECK(f.dataset_shape("layer_1/q") == Shape{2, 1, 3, 8});
  CHECK(f.dataset_shape("layer_1/resid_in_norm") == Shape{2, 3});
  CHECK(f.read_rows<float>("layer_1/attn_probs", 1, 1).data[4] == fill_value(1, 1, 4));
  CHECK(f.read_rows<float>("layer_0/k", 0, 1).data[5] == -fill_value(0, 0, 5));
  // ||a|| / (||x|| + ||a||) = 1/4 on layer 0 and 1/2 on layer 1, in both forms.
  CHECK(f.read<double>("alpha_token_mean").data == std::vector<double>{0.25, 0.5});
  CHECK(f.read<double>("alpha_frobenius").data == std::vector<double>{0.25, 0.5});
  CHECK(f.open_group("layer_1").attr_double("alpha_frobenius") == 0.5);
  CHECK(f.read<std::int64_t>("tokens").data == std::vector<std::int64_t>{0, 1, 2, 1, 2, 3});

  if (::access("/usr/bin/python3", X_OK) == 0 && std::system("/usr/bin/python3 -c 'import h5py' 2>/dev/null") == 0) {
    const std::string cmd = "/usr/bin/python3 -c \"import h5py; f = h5py.File('" + path +
                            "', 'r'); assert f['layer_0/attn_probs'].shape == (2, 2, 3, 3); "
                            "assert list(f['alpha_token_mean'][()]) == [0.25, 0.5]; "
                            "assert f.attrs['format'].decode() == 'causalflow-capture'\"";
    CHECK(std::system(cmd.c_str()) == 0);
  }

  // An incomplete capture throws and leaves the previous file in place.
  CHECK_THROWS_WITH(write_capture_atomic(path, h,
                                         [&](CaptureWriter& w) {
                                           std::vector<float> t(3, 1.0f);
                                           w.write(0, 0, LayerCapture{nullptr, nullptr, nullptr, t.data(), t.data()});
                                         }),
                    Catch::Contains("never written"));
  CHECK(File::open(path).dataset_shape("layer_0/attn_probs") == Shape{2, 2, 3, 3});
  CaptureHeader bad = h;
  bad.d_head = {4};
  CHECK_THROWS_WITH(write_capture_atomic(path, bad, [](CaptureWriter&) {}), Catch::Contains("one head dimension"));
  std::remove(path.c_str());
}
