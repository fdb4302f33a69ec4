// The device trainer's precision policies on the CPU (issue 31; docs/gpu.md "Precision
// policies"): the rounding functors and the emulated GEMM helper against an independent rounding
// (from the significand: frexp, round half to even, ldexp) and a double-precision product; the
// emulated trainer in TF32 and bf16 against the float32 CPU trainer; bf16 resume exactness.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include "cf/gpu/precision.hpp"
#include "cf/gpu/trainer.hpp"
#include "precision_cases.hpp"

namespace {

using cf::gpu::Precision;
using namespace cf_test_gpu;

// x rounded to `bits` significant bits, ties to even, computed from the significand: x = f 2^e
// with 0.5 <= |f| < 1, f 2^bits rounded to an integer by nearbyint (the default rounding mode is
// to nearest, ties to even), scaled back. Normal numbers only (the tests' values); overflow past
// the format's largest value is not modelled (the tests stay far below it).
double round_significand(double x, int bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  const double f = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(f, bits)), e - bits);
}
double round_as(Precision p, float x) {
  return p == Precision::Fp32 ? x : round_significand(x, p == Precision::Tf32 ? 11 : 8);
}
double functor_round(Precision p, float x) {
  if (p == Precision::Tf32) return cf::gpu::RoundTf32()(x);
  return cf::gpu::FromBf16()(cf::gpu::ToBf16()(x));
}

// Random values over many binades, plus exact ties of each format (halfway between two
// representable neighbours: they must go to the even one).
std::vector<float> test_values(std::uint32_t seed, std::size_t n) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> ex(-20, 20);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(mant(g), ex(g));
  for (int k = 0; k < 8; ++k) {
    v.push_back(1.f + std::ldexp(float(2 * k + 1), -8));     // bf16 ties: odd multiples of 2^-8
    v.push_back(-1.5f - std::ldexp(float(2 * k + 1), -11));  // TF32 ties: odd multiples of 2^-11
    v.push_back(std::ldexp(1.f + std::ldexp(float(2 * k + 1), -11), 7));
  }
  return v;
}

}  // namespace

TEST_CASE("precision: TF32 and bf16 rounding = rounding of the significand, ties to even", "[gpu][precision]") {
  for (Precision p : {Precision::Tf32, Precision::Bf16}) {
    INFO(cf::gpu::kPrecisions.name(p));
    std::int64_t bad = 0, changed = 0;
    for (float x : test_values(3, 20000)) {
      const double got = functor_round(p, x), want = round_as(p, x);
      bad += got != want;
      changed += got != double(x);
    }
    CHECK(bad == 0);
    CHECK(changed > 10000);  // the rounding is not the identity
    // the special values: infinities pass, NaN stays NaN, the largest float overflows to infinity
    // (it is past the largest TF32 / bf16 number's rounding boundary)
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(functor_round(p, inf) == inf);
    CHECK(functor_round(p, -inf) == -inf);
    CHECK(std::isnan(functor_round(p, std::numeric_limits<float>::quiet_NaN())));
    CHECK(functor_round(p, FLT_MAX) == inf);
    CHECK(functor_round(p, -FLT_MAX) == -inf);
  }
}

TEST_CASE("precision: the emulated GEMM helper = a double product of the rounded inputs", "[gpu][precision]") {
  // C = alpha op(A) op(B) + beta C with ragged sizes, padded leading dimensions, every transpose,
  // B as a weight (its copy rounded once) and as an activation (rounded per call)
  const int m = 7, n = 5, k = 37;
  const float alpha = 0.75f, beta = 1.0f;
  for (Precision p : {Precision::Fp32, Precision::Tf32, Precision::Bf16})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int weight = 0; weight < 2; ++weight) {
          INFO(cf::gpu::kPrecisions.name(p) << " ta " << ta << " tb " << tb << " weight " << weight);
          const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
          const int lda = ac + 3, ldb = bc + 2, ldc = n + 1;
          const std::vector<float> A = test_values(10 + ta, std::size_t(ar) * lda),
                                   B = test_values(20 + tb, std::size_t(br) * ldb),
                                   C0 = test_values(30, std::size_t(m) * ldc);
          std::vector<float> C(C0.begin(), C0.begin() + std::size_t(m) * ldc);
          cf::gpu::emu::precision_gemm(p, ta, tb, m, n, k, alpha, A.data(), lda, B.data(), ldb, weight, beta, C.data(),
                                       ldc);
          double worst = 0, worst_unrounded = 0;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              double s = 0, s_abs = 0, s_plain = 0;
              for (int l = 0; l < k; ++l) {
                const float a = ta ? A[std::size_t(l) * lda + i] : A[std::size_t(i) * lda + l];
                const float b = tb ? B[std::size_t(j) * ldb + l] : B[std::size_t(l) * ldb + j];
                s += round_as(p, a) * round_as(p, b);
                s_abs += std::abs(round_as(p, a) * round_as(p, b));
                s_plain += double(a) * double(b);
              }
              const double c0 = C0[std::size_t(i) * ldc + j], got = C[std::size_t(i) * ldc + j];
              const double want = alpha * s + beta * c0, scale = alpha * s_abs + std::abs(c0);
              // float32 accumulation of k exact products: at most about k ulps of the sum of |terms|
              worst = std::max(worst, std::abs(got - want) / scale);
              worst_unrounded = std::max(worst_unrounded, std::abs(got - (alpha * s_plain + beta * c0)) / scale);
            }
          CHECK(worst < k * std::ldexp(1.0, -24));
          // and the inputs were rounded: the unrounded product is measurably farther away
          if (p != Precision::Fp32) CHECK(worst_unrounded > 10 * k * std::ldexp(1.0, -24));
          // the columns of C beyond n (ldc padding) are untouched
          for (int i = 0; i < m; ++i) CHECK(C[std::size_t(i) * ldc + n] == C0[std::size_t(i) * ldc + n]);
        }
}

TEST_CASE("precision: the emulated device trainer in TF32 = the float32 CPU trainer within 8u (gradients)",
          "[gpu][precision][train]") {
  check_precision_against_cpu<cf::gpu::emu::Trainer>(Precision::Tf32, false);
}

TEST_CASE("precision: the emulated device trainer in bf16 = the float32 CPU trainer within 8u (gradients)",
          "[gpu][precision][train]") {
  check_precision_against_cpu<cf::gpu::emu::Trainer>(Precision::Bf16, false);
}

TEST_CASE("precision: the emulated device trainer in fp32 takes no rounding path (TF32 and bf16 differ from it)",
          "[gpu][precision][train]") {
  // fp32 is the SGEMM path of before (bit for bit: the same calls); the low policies measurably
  // differ from it, so the policy reaches the GEMMs
  const Case cs = precision_cases()[0];
  double l32 = 0, l_tf = 0, l_bf = 0;
  const double g32 = precision_gradient_diff<cf::gpu::emu::Trainer>(cs, Precision::Fp32, l32);
  const double gtf = precision_gradient_diff<cf::gpu::emu::Trainer>(cs, Precision::Tf32, l_tf);
  const double gbf = precision_gradient_diff<cf::gpu::emu::Trainer>(cs, Precision::Bf16, l_bf);
  CHECK(g32 < 1e-5);
  CHECK(gtf > 4 * g32);
  CHECK(gbf > 4 * gtf);
}

TEST_CASE("precision: bf16 resume is exact in the emulated build (6 steps = 3, checkpoint, resume, 3)",
          "[gpu][precision][train]") {
  check_bf16_resume_exact(
      cf::gpu::TrainerBuild::Emulated,
      (std::filesystem::temp_directory_path() / ("cf_gpu_prec_resume_" + std::to_string(::getpid()))).string());
}
