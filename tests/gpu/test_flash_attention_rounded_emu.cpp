// The rounded flash kernels (cf/gpu/kernels/flash_attention.cuh with Round = RoundTf32 /
// RoundBf16): the emulated reference of the tensor-core kernels (kernels/flash_attention_mma.cuh,
// device only), executed on the CPU. Checked here:
//  - the rounding functors of cf/gpu/precision.hpp against an independent arithmetic definition
//    (frexp / nearbyint: round to nearest, ties to even, at 11 or 8 significant bits, TF32 and
//    bf16 sharing float32's exponent range and subnormal quantum);
//  - the rounded reference = the dense attention of lib/nn (float32) within a tolerance in units
//    of the format's unit roundoff u, forward and backward, over the mask families and dh 32, 64,
//    128 (and further from it than float32 round-off: the rounding is applied);
//  - the tensor-core kernels themselves, their mma.sync and shuffles emulated on the block barrier
//    (the header's CF_EMULATED branch), = the rounded reference up to the summation order, under
//    both intra-block schedules, bit-reproducible;
//  - the paths of CF_GPU_ATTENTION under a precision: flash32 and fp32 run the unchanged float32
//    flash kernels (identity rounding, bit for bit), flash under tf32 / bf16 runs the rounded
//    reference on the emulated build (bit for bit the same as `rounded`).
#include <catch2/catch.hpp>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "attention_cases.hpp"
#include "cf/gpu/attention.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/kernels/flash_attention_mma.cuh"
#include "cf/gpu/ops.hpp"
#include "cf/gpu/precision.hpp"
#include "cf/graph/mask.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/ops.hpp"

namespace {

using cf::gpu::AttentionPath;
using cf::gpu::Precision;
using cf::graph::PatternKind;

// x rounded to `bits` significant bits (11: TF32, 8: bf16), nearest, ties to even, with float32's
// exponent range: below 2^-126 the quantum stays 2^(-126 - (bits - 1)) (float32's subnormals).
// Computed in double by frexp / ldexp / nearbyint (the default rounding mode: ties to even), not by
// bit manipulation. The result is converted to float (exact, or Inf past the largest value).
float round_significant(float x, int bits) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0f) return x;
  int e = 0;
  std::frexp(double(x), &e);  // |x| in [2^(e-1), 2^e)
  const int q = std::max(e - bits, -126 - (bits - 1));
  const double r = std::ldexp(std::nearbyint(std::ldexp(double(x), -q)), q);
  return static_cast<float>(r);  // exact for every r below 2^128; Inf at 2^128
}

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
std::uint32_t to_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

struct Problem {
  int B = 2, H = 2, T = 0, dh = 0;
  cf_test::Masks masks;
  std::vector<const std::uint8_t*> mp;
  cf::gpu::TiledMask tm;
  std::vector<float> q, k, v, dy, slopes;
  float scale = 0;
  std::size_t n() const { return std::size_t(B) * H * T * dh; }
  std::size_t nl() const { return std::size_t(B) * H * tm.nb * T; }
};

Problem make_problem(PatternKind kind, bool branch, bool alibi, int T, int dh) {
  Problem p;
  p.T = T, p.dh = dh;
  p.masks = cf_test::make_masks(kind, branch, T, 12, 10, 4);
  for (const auto& m : p.masks) p.mp.push_back(m.data());
  p.tm = cf::gpu::tiled_mask_from_dense(p.mp, T);
  p.q = cf_test::randn(p.n(), 11), p.k = cf_test::randn(p.n(), 12), p.v = cf_test::randn(p.n(), 13);
  p.dy = cf_test::randn(p.n(), 14);
  p.slopes.resize(p.H);
  for (int h = 0; h < p.H; ++h) p.slopes[h] = alibi ? float(cf::nn::alibi_slope(h, p.H)) : 0.0f;
  p.scale = 1.0f / std::sqrt(float(dh));
  return p;
}

struct Result {
  std::vector<float> y, lse, obr, dsum, dq, dk, dv;
};

Result run(const Problem& p, AttentionPath path, Precision prec) {
  Result r;
  r.y.resize(p.n()), r.lse.resize(p.nl()), r.obr.resize(p.nl() * p.dh), r.dsum.resize(p.nl());
  r.dq.assign(p.n(), 0.0f), r.dk.assign(p.n(), 0.0f), r.dv.assign(p.n(), 0.0f);
  cf::gpu::Context ctx(cf::gpu::ContextOptions{path});
  const cf::gpu::AttentionShape s{p.B, p.H, p.T, p.dh, p.scale, prec};
  cf::gpu::emu::attention_forward(ctx, s, p.tm, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(), r.y.data(),
                                  r.lse.data(), r.obr.data());
  cf::gpu::emu::attention_backward(ctx, s, p.tm, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(), p.dy.data(),
                                   r.lse.data(), r.obr.data(), r.dsum.data(), r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

Result oracle(const Problem& p) { return cf_test::dense_oracle<Result>(p); }  // lib/nn's dense head

// max |a - b| / max |b|
double rel_to_max(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (float x : b) m = std::max(m, double(std::abs(x)));
  return cf_test::max_abs_diff(a, b) / std::max(m, 1e-30);
}

double g_worst[2] = {0, 0};  // the largest error / u seen, TF32 and bf16

// The rounded reference in `prec` = the dense float32 oracle within kTolU unit roundoffs of each
// tensor's largest magnitude, and further than float32 round-off (1e-5) from it somewhere.
void check(PatternKind kind, bool branch, bool alibi, int T, int dh, Precision prec) {
  // u: the unit roundoff, 2^-p for p significant bits (TF32 11, bf16 8). Each product reads two
  // operands rounded with relative error <= u; a logit sums dh such products with scale 1/sqrt(dh),
  // so for these unit-normal inputs its error is of order u (random signs), and softmax, the
  // output and the gradients (sums of products of three rounded factors) stay within a few u of
  // their largest magnitude. kTolU = 8 leaves room over the worst measured (printed below).
  constexpr double kTolU = 8;
  const double u = prec == Precision::Tf32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const Problem p = make_problem(kind, branch, alibi, T, dh);
  INFO(cf::graph::pattern_name(kind) << (branch ? " branch" : " union") << (alibi ? " alibi" : "") << " T=" << T
                                     << " dh=" << dh << " " << cf::gpu::kPrecisions.name(prec));
  const Result r = run(p, AttentionPath::Rounded, prec), d = oracle(p);
  double most = 0;
  for (const auto& [name, e] : {std::pair{"y", rel_to_max(r.y, d.y)}, std::pair{"dq", rel_to_max(r.dq, d.dq)},
                                std::pair{"dk", rel_to_max(r.dk, d.dk)}, std::pair{"dv", rel_to_max(r.dv, d.dv)}}) {
    INFO(name << ": " << e << " = " << e / u << " u");
    CHECK(e < kTolU * u);
    most = std::max(most, e);
    g_worst[prec == Precision::Bf16] = std::max(g_worst[prec == Precision::Bf16], e / u);
  }
  CHECK(most > 1e-5);  // the operands were rounded (float32 flash stays within 1e-5 of the oracle)
}

}  // namespace

TEST_CASE("precision rounding functors = round to nearest even at 11 (TF32) and 8 (bf16) significant bits",
          "[gpu][precision][flash]") {
  std::mt19937 g(5);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::min(),
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  // ties: exactly half a TF32 / bf16 quantum above a value with an even and an odd last bit
  for (std::uint32_t base : {0x3f800000u, 0x3f802000u, 0x3f810000u, 0x00002000u, 0x00010000u}) {
    xs.push_back(from_bits(base | 0x1000u)), xs.push_back(from_bits(base | 0x8000u));
    xs.push_back(from_bits(base | 0x1000u | 0x80000000u)), xs.push_back(from_bits(base | 0x8000u | 0x80000000u));
  }
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(bits(g));
    if (!std::isnan(x)) xs.push_back(x);
  }
  REQUIRE(std::fegetround() == FE_TONEAREST);
  int mismatches = 0;
  for (float x : xs) {
    const float t = cf::gpu::RoundTf32()(x), b = cf::gpu::RoundBf16()(x);
    const float t0 = round_significant(x, 11), b0 = round_significant(x, 8);
    if (to_bits(t) != to_bits(t0) || to_bits(b) != to_bits(b0)) {
      if (++mismatches <= 5)
        FAIL_CHECK("x bits " << std::hex << to_bits(x) << ": tf32 " << to_bits(t) << " vs " << to_bits(t0) << ", bf16 "
                             << to_bits(b) << " vs " << to_bits(b0));
    }
  }
  CHECK(mismatches == 0);
  CHECK(cf::gpu::RoundFp32()(0.1f) == 0.1f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(cf::gpu::RoundTf32()(nan)));
  CHECK(std::isnan(cf::gpu::RoundBf16()(nan)));
}

TEST_CASE("gpu rounded flash attention (TF32, bf16) = dense attention within 8 u, mask families and dh 32 to 128",
          "[gpu][emu][flash][precision]") {
  using K = PatternKind;
  for (Precision prec : {Precision::Tf32, Precision::Bf16}) {
    for (K kind : {K::Full, K::Swa, K::Bridge, K::SeBridge})
      for (bool branch : {false, true}) {
        if (branch && (kind == K::Full || kind == K::Swa)) continue;
        check(kind, branch, !branch, 130, 32, prec);
      }
    check(K::Block, false, true, 100, 64, prec);
    check(K::Full, false, false, 70, 128, prec);
    check(K::Pbb, true, true, 70, 128, prec);
  }
  WARN("rounded flash vs dense float32 attention, worst error over y, dq, dk, dv relative to the tensor's max: "
       << g_worst[0] << " u (TF32, u = 2^-11), " << g_worst[1] << " u (bf16, u = 2^-8)");
}

TEST_CASE("gpu flash attention paths under a precision: flash32 and fp32 unrounded, flash = rounded on the emulator",
          "[gpu][emu][flash][precision]") {
  const Problem p = make_problem(PatternKind::Bridge, true, true, 130, 40);
  const Result f32 = run(p, AttentionPath::Flash, Precision::Fp32);
  for (Precision prec : {Precision::Tf32, Precision::Bf16}) {
    INFO(cf::gpu::kPrecisions.name(prec));
    const Result keep = run(p, AttentionPath::Flash32, prec), flash = run(p, AttentionPath::Flash, prec),
                 rounded = run(p, AttentionPath::Rounded, prec);
    // flash32: the float32 kernels under every precision (identity rounding: the same bits)
    CHECK(keep.y == f32.y);
    CHECK(keep.lse == f32.lse);
    CHECK(keep.dq == f32.dq);
    CHECK(keep.dk == f32.dk);
    CHECK(keep.dv == f32.dv);
    // flash under tf32 / bf16 on the emulated build: the rounded reference, the same bits
    CHECK(flash.y == rounded.y);
    CHECK(flash.dq == rounded.dq);
    CHECK(flash.dk == rounded.dk);
    CHECK(flash.dv == rounded.dv);
    CHECK(flash.y != f32.y);
  }
  // `rounded` under fp32 rounds nothing
  const Result r32 = run(p, AttentionPath::Rounded, Precision::Fp32);
  CHECK(r32.y == f32.y);
  CHECK(r32.dq == f32.dq);
}

namespace {

// The tensor-core kernels launched directly (emulated mma), with flash_dsum_kernel for D.
template <class F, int DH>
Result run_mma(const Problem& p) {
  namespace kn = cf::gpu::kernels;
  Result r;
  r.y.resize(p.n()), r.lse.resize(p.nl()), r.obr.resize(p.nl() * p.dh), r.dsum.resize(p.nl());
  r.dq.assign(p.n(), 0.0f), r.dk.assign(p.n(), 0.0f), r.dv.assign(p.n(), 0.0f);
  const kn::MaskView mv = p.tm.view();
  const dim3 grid(mv.ftiles, p.H, p.B), block(kn::mma::kThreads);
  auto* kf = kn::mma_forward_kernel<F, DH>;
  CF_LAUNCH(kf, grid, block, mv, p.H, p.dh, p.scale, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(), r.y.data(),
            r.lse.data(), r.obr.data());
  auto* kd = kn::flash_dsum_kernel<kn::kFlashBackwardWarps>;
  CF_LAUNCH(kd, grid, dim3(32 * kn::kFlashBackwardWarps), mv.nb, p.T, p.H, p.dh, p.dy.data(), r.obr.data(),
            r.dsum.data());
  auto* kkv = kn::mma_backward_kv_kernel<F, DH>;
  CF_LAUNCH(kkv, grid, block, mv, p.H, p.dh, p.scale, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(), p.dy.data(),
            r.lse.data(), r.dsum.data(), r.dk.data(), r.dv.data());
  auto* kq = kn::mma_backward_q_kernel<F, DH>;
  CF_LAUNCH(kq, grid, block, mv, p.H, p.dh, p.scale, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(), p.dy.data(),
            r.lse.data(), r.dsum.data(), r.dq.data());
  return r;
}

double g_worst_mma[2] = {0, 0};  // the largest difference / u from the rounded reference, TF32 and bf16

// The emulated tensor-core kernels in format F (DH the capacity) = the rounded reference within u
// of each tensor's largest magnitude (the device test's bound): both multiply the same rounded
// operands exactly and add in float32, in different orders. The orders alone give float32-level
// differences, but they may move a P or dS element across a rounding boundary of its format (dS =
// P (dP - D) cancels, so its float32 difference can be a large part of its own size): one unit,
// 2u of that element, which moves dk or dq by 2u of one term of its sum; with few terms per row
// (short branch masks) that approaches u of the tensor's scale (measured worst 0.25u, dk of a
// SE-bridge branch in TF32), while an indexing or masking error would be of order 1.
template <class F, int DH>
void check_mma(PatternKind kind, bool branch, bool alibi, int T, int dh) {
  const Precision prec = std::is_same_v<F, cf::gpu::kernels::mma::Tf32> ? Precision::Tf32 : Precision::Bf16;
  const double u = prec == Precision::Tf32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  Problem p = make_problem(kind, branch, alibi, T, dh);
  p.B = 1;
  INFO(cf::graph::pattern_name(kind) << (branch ? " branch" : " union") << (alibi ? " alibi" : "") << " T=" << T
                                     << " dh=" << dh << " " << cf::gpu::kPrecisions.name(prec));
  const Result ref = run(p, AttentionPath::Rounded, prec);
  std::vector<Result> runs;
  for (auto sched : {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse}) {
    cf::gpu::emu::set_schedule(sched);
    const Result& m = runs.emplace_back(run_mma<F, DH>(p));
    for (const auto& [name, e] :
         {std::pair{"y", rel_to_max(m.y, ref.y)}, std::pair{"lse", rel_to_max(m.lse, ref.lse)},
          std::pair{"obr", rel_to_max(m.obr, ref.obr)}, std::pair{"dq", rel_to_max(m.dq, ref.dq)},
          std::pair{"dk", rel_to_max(m.dk, ref.dk)}, std::pair{"dv", rel_to_max(m.dv, ref.dv)}}) {
      INFO(name << ": " << e << " = " << e / u << " u");
      CHECK(e < u);
      g_worst_mma[prec == Precision::Bf16] = std::max(g_worst_mma[prec == Precision::Bf16], e / u);
    }
  }
  // the two intra-block schedules (a missing barrier reads stale shared data under one) give the
  // same bits: deterministic
  CHECK(runs[0].y == runs[1].y);
  CHECK(runs[0].dq == runs[1].dq);
  CHECK(runs[0].dk == runs[1].dk);
  CHECK(runs[0].dv == runs[1].dv);
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

template <class F>
void check_mma_family() {
  using K = PatternKind;
  check_mma<F, 32>(K::Full, false, true, 130, 32);
  check_mma<F, 32>(K::Swa, false, false, 130, 20);
  check_mma<F, 32>(K::Bridge, true, true, 130, 32);
  check_mma<F, 64>(K::Block, false, true, 100, 64);
  check_mma<F, 64>(K::SeBridge, true, false, 70, 48);
  check_mma<F, 128>(K::Full, false, true, 70, 128);
  check_mma<F, 128>(K::Pbb, true, false, 70, 80);
}

}  // namespace

TEST_CASE("gpu tensor-core flash attention kernels, mma emulated = the rounded reference, TF32 and bf16",
          "[gpu][emu][flash][precision]") {
  check_mma_family<cf::gpu::kernels::mma::Tf32>();
  check_mma_family<cf::gpu::kernels::mma::Bf16>();
  WARN("emulated tensor-core kernels vs the rounded reference, worst difference relative to the tensor's max: "
       << g_worst_mma[0] << " u (TF32), " << g_worst_mma[1] << " u (bf16)");
}
