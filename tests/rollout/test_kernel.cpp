// Kernels, masks, slope recipes, presets and schedules (docs/spec.md sections 2 and 7).
#include <catch2/catch.hpp>

#include "cf/core/error.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/preset.hpp"

using namespace cf::rollout;

TEST_CASE("ALiBi simple slopes are 2 to the minus 8h over H", "[rollout]") {
  const auto s = alibi_slopes_simple(8);
  for (int h = 1; h <= 8; ++h) CHECK(s[h - 1] == Approx(std::pow(0.5, h)).epsilon(1e-15));
  // 112 heads: first slope 2^(-1/14) (the value shipped in the reference config of BLOOM-176B).
  CHECK(alibi_slopes_simple(112)[0] == Approx(0.9516951530106196).epsilon(1e-15));
}

TEST_CASE("ALiBi hf slopes follow BLOOM build_alibi_tensor for 112 heads", "[rollout]") {
  const auto s = alibi_slopes_hf(112);
  REQUIRE(s.size() == 112);
  // Closest power of two P = 64: 2^(-8k/64) for k = 1..64, then 2^(-4k/64) for odd k = 1..95.
  CHECK(s[0] == Approx(std::pow(2.0, -1.0 / 8)).epsilon(1e-15));
  CHECK(s[63] == Approx(std::pow(2.0, -8.0)).epsilon(1e-15));
  CHECK(s[64] == Approx(std::pow(2.0, -1.0 / 16)).epsilon(1e-15));
  CHECK(s[111] == Approx(std::pow(2.0, -95.0 / 16)).epsilon(1e-15));
  // For powers of two both recipes agree.
  const auto a = alibi_slopes_hf(32), b = alibi_slopes_simple(32);
  for (int h = 0; h < 32; ++h) CHECK(a[h] == Approx(b[h]).epsilon(1e-15));
  CHECK_THROWS_AS(alibi_slopes("nope", 4), cf::InvalidArgument);
}

TEST_CASE("Dense ALiBi kernel rows are stochastic, causal and windowed", "[rollout]") {
  const RowMatrix A = alibi_head_kernel_dense(0.3, 2.0, Mask{4}, 12);
  for (long i = 0; i < 12; ++i) {
    CHECK(A.row(i).sum() == Approx(1.0).epsilon(1e-14));
    for (long j = 0; j < 12; ++j)
      if (j > i || i - j >= 4) CHECK(A(i, j) == 0.0);
  }
  // Row 5 by hand: logits -0.3 d (+2 on the diagonal), d = 0..3.
  double z = std::exp(2.0) + std::exp(-0.3) + std::exp(-0.6) + std::exp(-0.9);
  CHECK(A(5, 5) == Approx(std::exp(2.0) / z).epsilon(1e-14));
  CHECK(A(5, 3) == Approx(std::exp(-0.6) / z).epsilon(1e-14));
}

TEST_CASE("Masks and alpha specifications parse or fail with a message", "[rollout]") {
  CHECK(parse_mask("causal").window == 0);
  CHECK(parse_mask("swa:16").window == 16);
  CHECK_THROWS_AS(parse_mask("swa:0"), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_mask("block"), cf::InvalidArgument);
  CHECK(parse_alpha_spec("const:0.25").value == 0.25);
  const auto pw = parse_alpha_spec("power:0.5,1.5");
  CHECK(pw.kind == AlphaSpec::Kind::Power);
  const Eigen::VectorXd a = alpha_power(3, 0.5, 1.5, /*origin=*/1);  // power1: first layer a0 / 2^beta
  CHECK(a(0) == Approx(0.5 / std::pow(2.0, 1.5)));
  CHECK(a(2) == Approx(0.5 / std::pow(4.0, 1.5)));
  CHECK_THROWS_AS(parse_alpha_spec("const:1.5"), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_alpha_spec("power:0.5"), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_alpha_spec("bogus"), cf::InvalidArgument);
  Eigen::VectorXd bad(2);
  bad << 0.5, 1.2;
  CHECK_THROWS_AS(validate_alpha(bad, 2), cf::InvalidArgument);
  CHECK_THROWS_AS(validate_alpha(Eigen::VectorXd::Constant(3, 0.5), 2), cf::InvalidArgument);
}

TEST_CASE("Presets load with the published model shapes", "[rollout]") {
  // Model facts (docs/spec.md section 6): falcon-rw-7b 36 x 64, mpt-7b 32 x 32, mpt-30b 48 x 64,
  // bloom-7b1 30 x 32, bloom-176b 70 x 112.
  struct Shape {
    const char* name;
    int L, H;
  };
  for (const Shape s : {Shape{"falcon-rw-7b", 36, 64}, Shape{"mpt-7b", 32, 32}, Shape{"mpt-30b", 48, 64},
                        Shape{"bloom-7b1", 30, 32}, Shape{"bloom", 70, 112}}) {
    const Preset p = load_preset(s.name);
    CHECK(p.layers == s.L);
    CHECK(p.heads == s.H);
    CHECK(p.alpha_measured.size() == s.L);
    CHECK(p.content_delta.rows() == s.L);
    CHECK(p.content_delta.cols() == s.H);
    // The shipped slopes are the simple recipe (the reference code uses it for every H).
    const auto simple = alibi_slopes_simple(s.H);
    for (int h = 0; h < s.H; ++h) CHECK(p.slopes[h] == Approx(simple[h]).epsilon(1e-14));
  }
  try {
    load_preset("gpt2");
    FAIL("unknown preset accepted");
  } catch (const cf::InvalidArgument& e) {
    CHECK(std::string(e.what()).find("bloom-7b1") != std::string::npos);
  }
}
