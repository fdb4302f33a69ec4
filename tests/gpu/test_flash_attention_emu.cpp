// FlashAttention-2 style kernels (cf/gpu/kernels/flash_attention.cuh) executed on the CPU through
// the emulation header, against the reference kernels they replace for plain softmax heads
// (kernels/attention.cuh, CF_GPU_ATTENTION=plain) and against the trainer's dense attention
// (cf::nn::detail::attention_head_forward / _backward, the oracle, whose backward has its own
// finite-difference tests in double in tests/nn): every mask family and both bridge fusions, with
// and without ALiBi, ragged T (across and inside the 64-row tiles), head dims 16 to 128, both
// intra-block schedules. The kernels are float only; their backward is also checked against
// central differences of their own forward (loss summed in double). The tile plan is checked
// against a brute-force classification of the dense masks, and the kernels' visit counter shows
// that empty tiles are never visited; the backward is bit-reproducible.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "attention_cases.hpp"
#include "cf/gpu/attention.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/kernels/flash_attention.cuh"
#include "cf/gpu/ops.hpp"
#include "cf/graph/mask.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/ops.hpp"

namespace {

using cf::graph::PatternKind;
using cf_test::make_masks;
using cf_test::Masks;
using cf_test::randn;

cf::gpu::Context& context(cf::gpu::AttentionPath p) {
  static cf::gpu::Context flash(cf::gpu::ContextOptions{cf::gpu::AttentionPath::Flash});
  static cf::gpu::Context plain(cf::gpu::ContextOptions{cf::gpu::AttentionPath::Plain});
  return p == cf::gpu::AttentionPath::Flash ? flash : plain;
}

// max |a - b| / max |b|: the difference relative to the tensor's scale
double rel_to_max(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (float x : b) m = std::max(m, double(std::abs(x)));
  return cf_test::max_abs_diff(a, b) / std::max(m, 1e-30);
}

struct Problem {
  int B = 2, H = 3, T = 0, dh = 0;
  Masks masks;
  std::vector<const std::uint8_t*> mp;
  cf::gpu::TiledMask tm;
  std::vector<float> q, k, v, dy, slopes;
  float scale = 0;
  std::size_t n() const { return std::size_t(B) * H * T * dh; }
  std::size_t nl() const { return std::size_t(B) * H * tm.nb * T; }
  cf::gpu::AttentionShape shape() const { return {B, H, T, dh, scale}; }
};

Problem make_problem(PatternKind kind, bool branch, bool alibi, int T, int dh, int bb = 12, int w = 10, int e = 4) {
  Problem p;
  p.T = T, p.dh = dh;
  p.masks = make_masks(kind, branch, T, bb, w, e);
  for (const auto& m : p.masks) p.mp.push_back(m.data());
  p.tm = cf::gpu::tiled_mask_from_dense(p.mp, T);
  p.q = randn(p.n(), 1), p.k = randn(p.n(), 2), p.v = randn(p.n(), 3), p.dy = randn(p.n(), 4);
  p.slopes.resize(p.H);
  for (int h = 0; h < p.H; ++h) p.slopes[h] = alibi ? float(cf::nn::alibi_slope(h, p.H)) : 0.0f;
  p.scale = 1.0f / std::sqrt(float(dh));
  return p;
}

struct Result {
  std::vector<float> y, lse, obr, dsum, dq, dk, dv;
};

Result run(const Problem& p, cf::gpu::AttentionPath path) {
  Result r;
  r.y.resize(p.n()), r.lse.resize(p.nl()), r.obr.resize(p.nl() * p.dh), r.dsum.resize(p.nl());
  r.dq.assign(p.n(), 0.0f), r.dk.assign(p.n(), 0.0f), r.dv.assign(p.n(), 0.0f);
  cf::gpu::Context& ctx = context(path);
  cf::gpu::emu::attention_forward(ctx, p.shape(), p.tm, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(), r.y.data(),
                                  r.lse.data(), r.obr.data());
  cf::gpu::emu::attention_backward(ctx, p.shape(), p.tm, p.slopes.data(), p.q.data(), p.k.data(), p.v.data(),
                                   p.dy.data(), r.lse.data(), r.obr.data(), r.dsum.data(), r.dq.data(), r.dk.data(),
                                   r.dv.data());
  return r;
}

Result oracle(const Problem& p) { return cf_test::dense_oracle<Result>(p); }  // lib/nn's dense head

// The largest relative differences of a test case's comparisons, printed at its end.
double g_worst_vs_reference = 0, g_worst_vs_oracle = 0;

void report_worst() {
  WARN("flash vs reference kernels, worst difference relative to the tensor's max: "
       << g_worst_vs_reference << "; vs the dense oracle: " << g_worst_vs_oracle);
  g_worst_vs_reference = g_worst_vs_oracle = 0;
}

// Flash (both schedules) = the reference kernels (y, lse, obr, dsum, dq, dk, dv) and = the dense
// oracle (y, dq, dk, dv), each within `tol` of the tensor's largest magnitude.
void check(PatternKind kind, bool branch, bool alibi, int T, int dh, int bb = 12, int w = 10, double tol = 1e-5) {
  const Problem p = make_problem(kind, branch, alibi, T, dh, bb, w);
  INFO(cf::graph::pattern_name(kind) << (branch ? " branch" : " union") << (alibi ? " alibi" : "") << " T=" << T
                                     << " dh=" << dh << " b=" << bb << " w=" << w);
  const Result ref = run(p, cf::gpu::AttentionPath::Plain), dense = oracle(p);
  for (auto sched : {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse}) {
    cf::gpu::emu::set_schedule(sched);
    const Result f = run(p, cf::gpu::AttentionPath::Flash);
    const std::vector<std::pair<const char*, double>> vs_ref = {
        {"y", rel_to_max(f.y, ref.y)},       {"lse", rel_to_max(f.lse, ref.lse)},
        {"obr", rel_to_max(f.obr, ref.obr)}, {"dsum", rel_to_max(f.dsum, ref.dsum)},
        {"dq", rel_to_max(f.dq, ref.dq)},    {"dk", rel_to_max(f.dk, ref.dk)},
        {"dv", rel_to_max(f.dv, ref.dv)}};
    const std::vector<std::pair<const char*, double>> vs_dense = {{"y", rel_to_max(f.y, dense.y)},
                                                                  {"dq", rel_to_max(f.dq, dense.dq)},
                                                                  {"dk", rel_to_max(f.dk, dense.dk)},
                                                                  {"dv", rel_to_max(f.dv, dense.dv)}};
    for (const auto& [name, d] : vs_ref) {
      INFO("flash vs reference kernels: " << name << " " << d);
      CHECK(d < tol);
      g_worst_vs_reference = std::max(g_worst_vs_reference, d);
    }
    for (const auto& [name, d] : vs_dense) {
      INFO("flash vs dense oracle: " << name << " " << d);
      CHECK(d < tol);
      g_worst_vs_oracle = std::max(g_worst_vs_oracle, d);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

// Brute force from the dense masks: (non-empty, full) 64 x 64 tiles over branches.
std::pair<std::int64_t, std::int64_t> count_tiles(const Masks& masks, int T) {
  const int F = cf::gpu::kernels::kFlashTile, nf = (T + F - 1) / F;
  std::int64_t nonempty = 0, full = 0;
  for (const auto& M : masks)
    for (int qt = 0; qt < nf; ++qt)
      for (int kt = 0; kt < nf; ++kt) {
        int n = 0;
        for (int i = qt * F; i < std::min(T, qt * F + F); ++i)
          for (int j = kt * F; j < std::min(T, kt * F + F); ++j) n += M[std::size_t(i) * T + j];
        nonempty += n > 0;
        full += n == F * F;
      }
  return {nonempty, full};
}

// The tile visits of the flash kernels for head features F on problem p with B = H = 1 (the
// kernels launched directly: the counter is their last argument): forward, key side, key side +
// query side.
template <int F>
std::array<int, 3> flash_visits(const Problem& p, const cf::gpu::kernels::HeadExtras& x,
                                const cf::gpu::kernels::HeadExtraGrads& xg) {
  namespace kn = cf::gpu::kernels;
  const kn::MaskView mv = p.tm.view();
  const cf::gpu::AttentionShape s = p.shape();
  std::vector<float> y(p.n()), lse(p.nl()), obr(p.nl() * p.dh), dsum(p.nl()), dq(p.n()), dk(p.n()), dv(p.n());
  int fwd = 0, bwd = 0, kv = 0;
  const dim3 grid(mv.ftiles, 1, 1);
  auto* kf = kn::flash_forward_kernel<32, F>;
  CF_LAUNCH(kf, grid, dim3(32 * kn::kFlashForwardWarps), mv, 1, s.dh, s.scale, nullptr, x, p.q.data(), p.k.data(),
            p.v.data(), y.data(), lse.data(), obr.data(), &fwd);
  auto* kd = kn::flash_dsum_kernel<kn::kFlashBackwardWarps>;
  CF_LAUNCH(kd, grid, dim3(32 * kn::kFlashBackwardWarps), mv.nb, s.T, 1, s.dh, p.dy.data(), obr.data(), dsum.data());
  auto* kkv = kn::flash_backward_kv_kernel<32, F>;
  CF_LAUNCH(kkv, grid, dim3(32 * kn::kFlashBackwardWarps), mv, 1, s.dh, s.scale, nullptr, x, p.q.data(), p.k.data(),
            p.v.data(), p.dy.data(), lse.data(), dsum.data(), dq.data(), dk.data(), dv.data(), xg, &bwd);
  kv = bwd;
  auto* kq = kn::flash_backward_q_kernel<32, F>;
  CF_LAUNCH(kq, grid, dim3(32 * kn::kFlashBackwardWarps), mv, 1, s.dh, s.scale, nullptr, x, p.q.data(), p.k.data(),
            p.v.data(), p.dy.data(), lse.data(), dsum.data(), dq.data(), dk.data(), xg, &bwd);
  return {fwd, kv, bwd};
}

}  // namespace

TEST_CASE("gpu flash attention = reference kernels and dense attention, every mask family, fusion, ALiBi",
          "[gpu][emu][flash]") {
  using K = PatternKind;
  // T = 130: three 64-row tiles, the last ragged; full, partial and empty tiles
  for (K kind : {K::Full, K::Block, K::Swa, K::Bridge, K::Pbb, K::SeBridge})
    for (bool branch : {false, true})
      for (bool alibi : {false, true}) {
        if (branch && (kind == K::Full || kind == K::Block || kind == K::Swa)) continue;
        check(kind, branch, alibi, 130, 16);
      }
  // blocks and windows of whole tiles (full tiles off the diagonal, empty ones between)
  check(K::Block, false, true, 200, 16, /*b=*/64);
  check(K::Swa, false, false, 200, 16, 12, /*w=*/100);
  // centered bridges with b < w <= 2b: overlapping write-back sets, two bridge branches (Eq. 35)
  check(K::Bridge, true, true, 130, 16, /*b=*/8, /*w=*/12);
  check(K::Pbb, true, false, 130, 16, /*b=*/8, /*w=*/12);
  report_worst();
}

TEST_CASE("gpu flash attention: ragged T and head dims 16 to 128 = reference kernels and dense attention",
          "[gpu][emu][flash]") {
  for (int T : {1, 45, 64, 65, 200}) check(PatternKind::Full, false, true, T, 32);
  for (int dh : {16, 32, 64, 80, 128}) {
    check(PatternKind::Full, false, dh % 32 == 0, 65, dh);
    check(PatternKind::SeBridge, true, dh % 32 != 0, 70, dh);
  }
  report_worst();
}

TEST_CASE("gpu flash attention backward = central differences of its own forward (float kernels, double loss)",
          "[gpu][emu][flash]") {
  // loss = sum dy . y; each probed coordinate of q, k, v moved by +-h through the flash forward
  const Problem p0 = make_problem(PatternKind::Swa, false, true, 70, 16, 12, 40);
  const Result r = run(p0, cf::gpu::AttentionPath::Flash);
  auto loss = [&](const Problem& p) {
    std::vector<float> y(p.n()), lse(p.nl()), obr(p.nl() * p.dh);
    cf::gpu::emu::attention_forward(context(cf::gpu::AttentionPath::Flash), p.shape(), p.tm, p.slopes.data(),
                                    p.q.data(), p.k.data(), p.v.data(), y.data(), lse.data(), obr.data());
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += double(p.dy[i]) * y[i];
    return s;
  };
  const float h = 1e-2f;
  int probed = 0;
  for (std::size_t at : {std::size_t(5), p0.n() / 3 + 7, p0.n() / 2 + 1, p0.n() - 3}) {
    for (int which = 0; which < 3; ++which) {
      Problem a = p0, b = p0;
      std::vector<float>& xa = which == 0 ? a.q : which == 1 ? a.k : a.v;
      std::vector<float>& xb = which == 0 ? b.q : which == 1 ? b.k : b.v;
      xa[at] += h, xb[at] -= h;
      const double fd = (loss(a) - loss(b)) / (2.0 * double(h));
      const double g = which == 0 ? r.dq[at] : which == 1 ? r.dk[at] : r.dv[at];
      INFO("tensor "
           << "qkv"[which] << " at " << at << ": kernel " << g << ", central difference " << fd);
      CHECK(std::abs(g - fd) < 2e-3 * (1.0 + std::abs(fd)));  // O(h^2) and float round-off of the loss
      ++probed;
    }
  }
  CHECK(probed == 12);
}

TEST_CASE("gpu flash attention: the tile plan = a brute-force classification, empty tiles never visited",
          "[gpu][emu][flash]") {
  using K = PatternKind;
  namespace kn = cf::gpu::kernels;
  struct Case {
    K kind;
    bool branch;
    int T, b, w;
  };
  for (const Case c : {Case{K::Swa, false, 320, 12, 10}, Case{K::Block, false, 256, 64, 10},
                       Case{K::Full, false, 200, 12, 10}, Case{K::SeBridge, true, 200, 12, 10}}) {
    Problem p = make_problem(c.kind, c.branch, false, c.T, 16, c.b, c.w);
    p.B = 1, p.H = 1;
    INFO(cf::graph::pattern_name(c.kind) << " T=" << c.T);
    const auto [nonempty, full] = count_tiles(p.masks, c.T);
    CHECK(p.tm.flash_tiles_visited == nonempty);
    CHECK(p.tm.flash_tiles_full == full);
    const int nf = (c.T + kn::kFlashTile - 1) / kn::kFlashTile;
    CHECK(nonempty < std::int64_t(nf) * nf * p.tm.nb);  // these masks do leave tiles out
    // every kernel visits exactly the plan's tiles (a skipped tile adds nothing to the counter),
    // for plain, S-D and runway heads alike (the extras change logits, not the plan)
    std::vector<float> damp(p.T, 0.5f), u(p.n(), 0.1f), ddamp(p.T), dvs(p.n()), dvl(p.n());
    kn::HeadExtras sd, rw;
    sd.damp = damp.data();
    rw.rw_v = p.v.data(), rw.rw_stride = std::int64_t(p.T) * p.dh, rw.rw_u = u.data(), rw.rw_c = 0.25f;
    kn::HeadExtraGrads sdg, rwg;
    sdg.ddamp = ddamp.data(), rwg.dvs = dvs.data(), rwg.dvl = dvl.data();
    for (const auto& [fwd, kv, bwd] : {flash_visits<0>(p, {}, {}), flash_visits<kn::kFlashSd>(p, sd, sdg),
                                       flash_visits<kn::kFlashRunway>(p, rw, rwg)}) {
      CHECK(kv == nonempty);
      CHECK(fwd == nonempty);
      CHECK(bwd == 2 * nonempty);
    }
  }
}

TEST_CASE("gpu flash attention: the backward is bit-reproducible across runs, schedules and block order",
          "[gpu][emu][flash]") {
  const Problem p = make_problem(PatternKind::Bridge, true, true, 200, 40);
  const Result a = run(p, cf::gpu::AttentionPath::Flash);
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Reverse);
  const Result b = run(p, cf::gpu::AttentionPath::Flash);
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
  CHECK(a.y == b.y);
  CHECK(a.lse == b.lse);
  CHECK(a.dq == b.dq);
  CHECK(a.dk == b.dk);
  CHECK(a.dv == b.dv);
}
