// The flash kernels (cf/gpu/kernels/flash_attention.cuh) on S-D heads and runway heads (dot and
// bilinear, Runway (Lee & Clark)) executed on the CPU through the emulation header: against the
// general kernels they replace for those heads (kernels/attention.cuh, CF_GPU_ATTENTION=generic)
// and against lib/nn's dense head in double (cf_test::extras_oracle), over the causal, window and
// block masks, with and without ALiBi, T across and inside the 64-row tiles (1, 63, 64, 65, 200)
// and head dims 32, 64, 128; the backward against central differences of the flash forward
// (every input, the runway's values and bilinear form included); bit-reproducible across runs
// and block orders. Also: without a dB buffer (the seeded analysis passes) the bilinear runway's
// g scratch and dB are not computed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "cf/gpu/emulation.hpp"
#include "extras_cases.hpp"

namespace {

using cf::graph::PatternKind;
using cf_test::Extra;
using cf_test::ExtrasProblem;
using cf_test::ExtrasResult;

cf::gpu::Context& context(cf::gpu::AttentionPath p) {
  static cf::gpu::Context flash(cf::gpu::ContextOptions{cf::gpu::AttentionPath::Flash});
  static cf::gpu::Context generic(cf::gpu::ContextOptions{cf::gpu::AttentionPath::Generic});
  return p == cf::gpu::AttentionPath::Flash ? flash : generic;
}

// max |a - b| / max |b|: the difference relative to the tensor's scale
double rel_to_max(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (float x : b) m = std::max(m, double(std::abs(x)));
  return cf_test::max_abs_diff(a, b) / std::max(m, 1e-30);
}

double g_worst_vs_general = 0, g_worst_vs_dense = 0;

void report_worst() {
  WARN("flash S-D / runway vs the general kernels, worst difference relative to the tensor's max: "
       << g_worst_vs_general << "; vs the dense oracle (relative to 1 + |oracle|): " << g_worst_vs_dense);
  g_worst_vs_general = g_worst_vs_dense = 0;
}

// Flash = the general kernels (every output and gradient, within 1e-5 of the tensor's largest
// magnitude) and = the dense oracle in double (1e-4 relative to 1 + |oracle|, as the general
// kernels' own test).
void check(PatternKind kind, Extra extra, bool alibi, int T, int dh, int bb = 24, int w = 40) {
  const ExtrasProblem p = cf_test::make_extras_problem(kind, false, extra, alibi, false, T, dh, bb, w);
  INFO(cf::graph::pattern_name(kind) << " " << cf_test::extra_name(extra) << (alibi ? " alibi" : "") << " T=" << T
                                     << " dh=" << dh << " b=" << bb << " w=" << w);
  const ExtrasResult g = cf_test::run_extras(context(cf::gpu::AttentionPath::Generic), p);
  const ExtrasResult f = cf_test::run_extras(context(cf::gpu::AttentionPath::Flash), p);
  const cf_test::ExtrasOracle o = cf_test::extras_oracle(p);
  std::vector<std::pair<const char*, double>> vs_general = {
      {"y", rel_to_max(f.y, g.y)},          {"lse", rel_to_max(f.lse, g.lse)}, {"obr", rel_to_max(f.obr, g.obr)},
      {"dsum", rel_to_max(f.dsum, g.dsum)}, {"dq", rel_to_max(f.dq, g.dq)},    {"dk", rel_to_max(f.dk, g.dk)},
      {"dv", rel_to_max(f.dv, g.dv)}};
  std::vector<std::pair<const char*, double>> vs_dense = {{"y", cf_test::max_rel(f.y, o.y)},
                                                          {"dq", cf_test::max_rel(f.dq, o.dq)},
                                                          {"dk", cf_test::max_rel(f.dk, o.dk)},
                                                          {"dv", cf_test::max_rel(f.dv, o.dv)}};
  if (p.sd) {
    vs_general.push_back({"ddamp", rel_to_max(f.dd, g.dd)});
    vs_dense.push_back({"ddamp", cf_test::max_rel(f.dd, o.dd)});
  }
  if (p.rw) {
    vs_general.push_back({"dvs", rel_to_max(f.dvs, g.dvs)});
    vs_general.push_back({"dvl", rel_to_max(f.dvl, g.dvl)});
    vs_dense.push_back({"dvs", cf_test::max_rel(f.dvs, o.dvs)});
    vs_dense.push_back({"dvl", cf_test::max_rel(f.dvl, o.dvl)});
  }
  if (p.bil) {
    vs_general.push_back({"dB", rel_to_max(f.dB, g.dB)});
    vs_dense.push_back({"dB", cf_test::max_rel(f.dB, o.dB)});
  }
  for (const auto& [name, d] : vs_general) {
    INFO("flash vs general kernels: " << name << " " << d);
    CHECK(d < 1e-5);
    g_worst_vs_general = std::max(g_worst_vs_general, d);
  }
  for (const auto& [name, d] : vs_dense) {
    INFO("flash vs dense oracle: " << name << " " << d);
    CHECK(d < 1e-4);
    g_worst_vs_dense = std::max(g_worst_vs_dense, d);
  }
}

}  // namespace

TEST_CASE("gpu flash attention S-D and runway = general kernels and dense attention, causal window block, ragged T",
          "[gpu][emu][flash]") {
  using K = PatternKind;
  int variant = 0;
  for (Extra ex : {Extra::Sd, Extra::RunwayDot, Extra::RunwayBilinear})
    for (K kind : {K::Full, K::Swa, K::Block})
      for (int T : {1, 63, 64, 65, 200}) check(kind, ex, ++variant % 2 == 0, T, 32);
  report_worst();
}

TEST_CASE("gpu flash attention S-D and runway: head dims 64 and 128 and a partial chunk, with ALiBi",
          "[gpu][emu][flash]") {
  for (Extra ex : {Extra::Sd, Extra::RunwayDot, Extra::RunwayBilinear}) {
    for (int dh : {64, 128}) {
      check(PatternKind::Full, ex, true, 65, dh);
      check(PatternKind::Swa, ex, false, 130, dh, 24, /*w=*/70);
    }
    check(PatternKind::Block, ex, true, 100, 40, /*b=*/64);  // dh 40: a chunk of 8 live columns
  }
  report_worst();
}

TEST_CASE("gpu flash attention S-D and runway backward = central differences of the flash forward",
          "[gpu][emu][flash]") {
  // loss = sum dy . y through the flash forward; each probed input moved by +-h. The runway reads
  // the last head's values, so moving one of them moves v and vl at once: its gradient is dv plus
  // the runway's dvl_m and dvs_{m+1} summed over the heads (as the trainer reduces them).
  for (Extra ex : {Extra::Sd, Extra::RunwayDot, Extra::RunwayBilinear}) {
    const ExtrasProblem p0 = cf_test::make_extras_problem(PatternKind::Swa, false, ex, true, false, 70, 16, 12, 40);
    const ExtrasResult r = cf_test::run_extras(context(cf::gpu::AttentionPath::Flash), p0);
    auto loss = [&](const ExtrasProblem& p) {
      std::vector<float> y(p.n()), lse(p.nl()), obr(p.nl() * p.dh);
      cf::gpu::emu::attention_forward_ex(context(cf::gpu::AttentionPath::Flash), p.shape(), p.tm, p.slopes.data(),
                                         p.extras(), p.q.data(), p.k.data(), p.v.data(), y.data(), lse.data(),
                                         obr.data());
      double s = 0;
      for (std::size_t i = 0; i < y.size(); ++i) s += double(p.dy[i]) * y[i];
      return s;
    };
    const std::size_t hs = p0.hs(), last = std::size_t(p0.H - 1) * hs;  // sequence 0's last head
    // (tensor, index, the kernels' gradient there)
    struct Probe {
      char which;
      std::size_t at;
      double g;
    };
    std::vector<Probe> probes;
    for (std::size_t at : {std::size_t(5), p0.n() / 3 + 7, p0.n() - 3}) {
      probes.push_back({'q', at, r.dq[at]});
      probes.push_back({'k', at, r.dk[at]});
    }
    probes.push_back({'v', 9, r.dv[9]});  // head 0: no runway read
    for (std::size_t m : {std::size_t(3), std::size_t(40)}) {
      const std::size_t at = last + m * p0.dh + 2;
      double g = r.dv[at];
      if (p0.rw)
        for (int h = 0; h < p0.H; ++h) {
          const std::size_t o = std::size_t(h) * hs + m * p0.dh + 2;
          g += r.dvl[o] + r.dvs[o + p0.dh];
        }
      probes.push_back({'v', at, g});
    }
    if (p0.sd)
      for (std::size_t at : {std::size_t(4), p0.damp.size() / 2 + 3}) probes.push_back({'d', at, r.dd[at]});
    if (p0.bil)
      for (std::size_t at : {std::size_t(7), std::size_t(100)}) {
        double g = 0;  // dB summed over the (sequence, head) blocks
        for (int bh = 0; bh < p0.B * p0.H; ++bh) g += r.dB[std::size_t(bh) * p0.dh * p0.dh + at];
        probes.push_back({'B', at, g});
      }
    const float h = 1e-2f;
    for (const Probe& pr : probes) {
      ExtrasProblem a = p0, b = p0;
      auto pick = [&](ExtrasProblem& p) -> float& {
        switch (pr.which) {
          case 'q':
            return p.q[pr.at];
          case 'k':
            return p.k[pr.at];
          case 'v':
            return p.v[pr.at];
          case 'd':
            return p.damp[pr.at];
          default:
            return p.Bm[pr.at];
        }
      };
      pick(a) += h, pick(b) -= h;
      const double fd = (loss(a) - loss(b)) / (2.0 * double(h));
      INFO(cf_test::extra_name(ex) << " tensor " << pr.which << " at " << pr.at << ": kernel " << pr.g
                                   << ", central difference " << fd);
      CHECK(std::abs(pr.g - fd) < 2e-3 * (1.0 + std::abs(fd)));  // O(h^2) and float round-off of the loss
    }
  }
}

TEST_CASE("gpu flash attention S-D and runway: bit-reproducible across runs, schedules and block order",
          "[gpu][emu][flash]") {
  for (Extra ex : {Extra::Sd, Extra::RunwayDot, Extra::RunwayBilinear}) {
    const ExtrasProblem p = cf_test::make_extras_problem(PatternKind::Swa, false, ex, true, true, 200, 40, 12, 100);
    const ExtrasResult a = cf_test::run_extras(context(cf::gpu::AttentionPath::Flash), p);
    cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Reverse);
    const ExtrasResult b = cf_test::run_extras(context(cf::gpu::AttentionPath::Flash), p);
    cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
    INFO(cf_test::extra_name(ex));
    CHECK(a.y == b.y);
    CHECK(a.lse == b.lse);
    CHECK(a.dq == b.dq);
    CHECK(a.dk == b.dk);
    CHECK(a.dv == b.dv);
    CHECK(a.dd == b.dd);
    CHECK(a.dvs == b.dvs);
    CHECK(a.dvl == b.dvl);
    CHECK(a.dB == b.dB);
  }
}

TEST_CASE("gpu attention: a bilinear runway without dB leaves g and dB uncomputed, the other gradients equal",
          "[gpu][emu][flash]") {
  // The seeded analysis passes want no parameter gradient: with dB null the bilinear runway's
  // per-head g (the input of dB) is neither written into its scratch nor reduced.
  using Emu = cf::gpu::Ops<cf::gpu::Backend::Emulated>;
  const ExtrasProblem p =
      cf_test::make_extras_problem(PatternKind::Full, false, Extra::RunwayBilinear, true, false, 70, 16);
  for (cf::gpu::AttentionPath path : {cf::gpu::AttentionPath::Flash, cf::gpu::AttentionPath::Generic}) {
    cf::gpu::Context& ctx = context(path);
    const cf::gpu::ResidentMask<cf::gpu::Backend::Emulated> dm(p.tm);
    const std::size_t n = p.n();
    std::vector<float> u(std::size_t(p.B) * p.T * p.dh), y(n), lse(p.nl()), obr(p.nl() * p.dh), dsum(p.nl());
    const cf::gpu::AttentionExtras x = p.extras();
    auto backward = [&](std::vector<float>& gs, bool want_dB) {
      std::vector<float> dq(n, 0), dk(n, 0), dv(n, 0), dvs(n, 0), dvl(n, 0), dB(std::size_t(p.B) * p.H * p.dh * p.dh);
      cf::gpu::AttentionExtraGrads g;
      g.dvs = dvs.data(), g.dvl = dvl.data(), g.dB = want_dB ? dB.data() : nullptr;
      Emu::attention_backward_ex(ctx, p.shape(), dm, p.slopes.data(), x, cf::gpu::AttentionScratch{u.data(), gs.data()},
                                 p.q.data(), p.k.data(), p.v.data(), p.dy.data(), lse.data(), obr.data(), dsum.data(),
                                 dq.data(), dk.data(), dv.data(), g);
      return std::vector<std::vector<float>>{dq, dk, dv, dvs, dvl};
    };
    Emu::attention_forward_ex(ctx, p.shape(), dm, p.slopes.data(), x, cf::gpu::AttentionScratch{u.data(), nullptr},
                              p.q.data(), p.k.data(), p.v.data(), y.data(), lse.data(), obr.data());
    const float sentinel = -12345.0f;
    std::vector<float> g_with(std::size_t(p.B) * p.H * p.T * p.dh, sentinel), g_without = g_with;
    const auto with = backward(g_with, true), without = backward(g_without, false);
    INFO(cf::gpu::kAttentionPaths.name(path));
    CHECK(with == without);                                          // dq, dk, dv, dvs, dvl: the same floats
    CHECK(std::count(g_with.begin(), g_with.end(), sentinel) == 0);  // with dB: g computed
    CHECK(std::count(g_without.begin(), g_without.end(), sentinel) == std::ptrdiff_t(g_without.size()));
  }
}
