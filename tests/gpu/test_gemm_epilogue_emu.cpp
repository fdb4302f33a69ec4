// The fused-epilogue GEMM's CPU twin (cf/gpu/gemm_epilogue.hpp, emu::gemm_epilogue: what the
// emulated device trainer runs for cuBLASLt) against an independent computation here: the product
// in double, the bias, GELU in its tanh form and its derivative written out in double, the bias
// gradient summed in double. Every epilogue, both transposes, odd shapes, leading dimensions wider
// than the rows.
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/gemm_epilogue.hpp"

namespace {

using cf::gpu::GemmEpilogue;
using cf::gpu::GemmEpilogueArgs;

std::vector<float> randn(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

double gelu_tanh(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}
// d/dx of gelu_tanh, written out from the product rule (not from the code under test)
double gelu_tanh_grad(double x) {
  const double s = std::sqrt(2.0 / M_PI), u = s * (x + 0.044715 * x * x * x), th = std::tanh(u);
  const double du = s * (1.0 + 3.0 * 0.044715 * x * x);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

/// One row-major problem: op(A) [m, k], op(B) [k, n], C [m, n] with leading dimension ldc.
struct Problem {
  bool ta, tb;
  int m, n, k, lda, ldb, ldc;
  std::vector<float> A, B, C, bias, aux;
  Problem(bool ta_, bool tb_, int m_, int n_, int k_, int pad, std::uint32_t seed)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    A = randn(static_cast<std::size_t>(ta ? k : m) * lda, seed);
    B = randn(static_cast<std::size_t>(tb ? n : k) * ldb, seed + 1, 0.5f);
    C = randn(static_cast<std::size_t>(m) * ldc, seed + 2);
    bias = randn(static_cast<std::size_t>(n), seed + 3);
    aux = randn(static_cast<std::size_t>(m) * ldc, seed + 4, 1.5f);
  }
  double a(int i, int j) const {
    return ta ? A[static_cast<std::size_t>(j) * lda + i] : A[static_cast<std::size_t>(i) * lda + j];
  }
  double b(int i, int j) const {
    return tb ? B[static_cast<std::size_t>(j) * ldb + i] : B[static_cast<std::size_t>(i) * ldb + j];
  }
  /// alpha op(A) op(B) [i, j] in double and the sum of |terms| (the float32 rounding's scale).
  std::pair<double, double> product(int i, int j, double alpha) const {
    double s = 0, mag = 0;
    for (int l = 0; l < k; ++l) s += a(i, l) * b(l, j), mag += std::abs(a(i, l) * b(l, j));
    return {alpha * s, std::abs(alpha) * mag};
  }
};

// |got - want| within float32 round-off of a length-k sum of terms of total size `mag`, plus the
// epilogue's few operations on values of size `val`
void check_close(double got, double want, double mag, double val, int k) {
  const double tol = 4.0 * (k + 4) * FLT_EPSILON * (mag + std::abs(val)) + 1e-30;
  INFO("got " << got << " want " << want << " tol " << tol);
  CHECK(std::abs(got - want) <= tol);
}

// Runs the twin on a copy of the problem with epilogue `kind` and checks every written value.
void run(const Problem& pr, GemmEpilogue kind, float alpha, float beta, bool with_bias = true) {
  std::vector<float> C = pr.C, aux = pr.aux, bias_grad(static_cast<std::size_t>(pr.m), -7.0f);
  GemmEpilogueArgs e{kind};
  if (kind == GemmEpilogue::Bias || (kind == GemmEpilogue::GeluAuxBias && with_bias)) e.bias = pr.bias.data();
  if (kind == GemmEpilogue::GeluAuxBias || kind == GemmEpilogue::DGelu) e.aux = aux.data();
  if (kind == GemmEpilogue::BiasGrad) e.bias_grad = bias_grad.data();
  cf::gpu::emu::gemm_epilogue(pr.ta, pr.tb, pr.m, pr.n, pr.k, alpha, pr.A.data(), pr.lda, pr.B.data(), pr.ldb, beta,
                              C.data(), pr.ldc, e);
  for (int i = 0; i < pr.m; ++i)
    for (int j = 0; j < pr.ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * pr.ldc + j;
      if (j >= pr.n) {  // the padding between rows is never written
        CHECK(C[at] == pr.C[at]);
        CHECK(aux[at] == pr.aux[at]);
        continue;
      }
      auto [r, mag] = pr.product(i, j, alpha);
      r += beta * double(pr.C[at]);
      mag += std::abs(beta * double(pr.C[at]));
      const double b = e.bias ? double(pr.bias[static_cast<std::size_t>(j)]) : 0.0;
      switch (kind) {
        case GemmEpilogue::None:
        case GemmEpilogue::BiasGrad:
          check_close(C[at], r, mag, r, pr.k);
          break;
        case GemmEpilogue::Bias:
          check_close(C[at], r + b, mag, b, pr.k);
          break;
        case GemmEpilogue::GeluAuxBias:
          check_close(aux[at], r + b, mag, b, pr.k);
          // GELU's slope is below 1.13 in size: the pre-activation's error carries over at most so
          check_close(C[at], gelu_tanh(r + b), 1.13 * (mag + std::abs(b)), gelu_tanh(r + b), pr.k);
          break;
        case GemmEpilogue::DGelu: {
          const double g = gelu_tanh_grad(pr.aux[at]);
          CHECK(aux[at] == pr.aux[at]);                                       // read, not written
          check_close(C[at], g * r, (std::abs(g) + 1.0) * mag, g * r, pr.k);  // g itself to float round-off
          break;
        }
      }
    }
  if (kind == GemmEpilogue::BiasGrad)
    for (int i = 0; i < pr.m; ++i) {
      double s = 0, mag = 0;
      for (int l = 0; l < pr.k; ++l) s += pr.a(i, l), mag += std::abs(pr.a(i, l));
      check_close(bias_grad[static_cast<std::size_t>(i)], s, mag, s, pr.k);
    }
}

}  // namespace

TEST_CASE("gpu GEMM epilogues (emulated twin) = a double GEMM + bias, tanh GELU, its derivative, bias gradient",
          "[gpu][emu][epilogue]") {
  struct Shape {
    int m, n, k, pad;
  };
  // odd sizes, a single row or column, k = 1, padded leading dimensions, a trainer-like shape
  const Shape shapes[] = {{7, 5, 3, 0}, {1, 13, 9, 2}, {11, 1, 17, 1}, {9, 6, 1, 3}, {33, 47, 29, 5}, {64, 96, 48, 0}};
  std::uint32_t seed = 1;
  for (const Shape& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO("m " << s.m << " n " << s.n << " k " << s.k << " pad " << s.pad << " ta " << ta << " tb " << tb);
        const Problem pr(ta, tb, s.m, s.n, s.k, s.pad, seed += 10);
        run(pr, GemmEpilogue::None, 1.0f, 0.0f);
        run(pr, GemmEpilogue::Bias, 1.0f, 0.0f);
        run(pr, GemmEpilogue::Bias, 0.75f, 1.0f);  // accumulating, as a GEMM with beta does
        run(pr, GemmEpilogue::GeluAuxBias, 1.0f, 0.0f);
        run(pr, GemmEpilogue::GeluAuxBias, 1.0f, 0.0f, false);  // no bias: cuBLASLt's GELU_AUX
        run(pr, GemmEpilogue::DGelu, 1.0f, 0.0f);
        run(pr, GemmEpilogue::BiasGrad, 1.0f, 1.0f);  // a weight gradient accumulating, its bias sum written
      }
}

TEST_CASE("gpu GEMM epilogues (emulated twin): GELU is the tanh form, not erf", "[gpu][emu][epilogue]") {
  // 1 x 1 x 1: aux = x exactly, C = gelu(x); near |x| = 2.7 the tanh and erf forms differ most (4.7e-4)
  const float one = 1.0f, x = 2.7f;
  float c = 0, aux = 0;
  cf::gpu::emu::gemm_epilogue(false, false, 1, 1, 1, 1.0f, &x, 1, &one, 1, 0.0f, &c, 1,
                              GemmEpilogueArgs{GemmEpilogue::GeluAuxBias, nullptr, &aux});
  CHECK(aux == x);
  const double erf_form = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  CHECK(std::abs(c - gelu_tanh(x)) < 1e-6);
  CHECK(std::abs(gelu_tanh(x) - erf_form) > 4e-4);  // the check above tells the two apart
}

TEST_CASE("gpu GEMM epilogues (emulated twin): a call missing its vectors is refused", "[gpu][emu][epilogue]") {
  const float a[4] = {1, 2, 3, 4};
  float c[4] = {}, aux[4] = {};
  using cf::gpu::emu::gemm_epilogue;
  CHECK_THROWS_AS(
      gemm_epilogue(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2, GemmEpilogueArgs{GemmEpilogue::Bias}),
      cf::InvalidArgument);
  CHECK_THROWS_AS(
      gemm_epilogue(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2, GemmEpilogueArgs{GemmEpilogue::DGelu}),
      cf::InvalidArgument);
  CHECK_THROWS_AS(gemm_epilogue(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 1.f, c, 2,
                                GemmEpilogueArgs{GemmEpilogue::GeluAuxBias, nullptr, aux}),
                  cf::InvalidArgument);  // beta != 0: the GELU epilogues overwrite
  CHECK_THROWS_AS(
      gemm_epilogue(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2, GemmEpilogueArgs{GemmEpilogue::BiasGrad}),
      cf::InvalidArgument);
}
