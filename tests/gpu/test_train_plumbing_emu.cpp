// The device trainer's plumbing (issue 31, docs/gpu.md "Device trainer"), counted on its emulated
// build: the trainer body (lib/gpu/src/trainer_body.hpp) and the operations it calls count every
// allocation and every point where the host waits for the device (cf/gpu/device_stats.hpp) at the
// source lines the CUDA build executes too. After the first step a training step allocates nothing
// and the host waits exactly once per micro-batch (its loss) plus twice per update (the clipped
// gradient's norm, the finiteness check); a validation loss waits once.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cf/gpu/device_stats.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/gpu/trainer.hpp"
#include "cf/nn/model.hpp"
#include "train_cases.hpp"

namespace {

using namespace cf::nn;
using namespace cf_test_gpu;
using cf::gpu::Backend;
using cf::gpu::DeviceStats;

DeviceStats since(const DeviceStats& a) {
  const DeviceStats b = cf::gpu::device_stats(Backend::Emulated);
  return DeviceStats{b.allocations - a.allocations, b.bytes - a.bytes, b.host_syncs - a.host_syncs};
}

// One update as cf::nn::train drives the device trainer: accum micro-batches, clip, AdamW, the
// finiteness check.
void step(cf::gpu::emu::Trainer& tr, const ModelConfig& c, int B, int T, int accum, int seed) {
  tr.zero_grad();
  for (int k = 0; k < accum; ++k) {
    std::vector<std::int32_t> x, y;
    batch(c, B, T, static_cast<std::uint32_t>(seed * 10 + k), x, y);
    tr.micro_batch(x.data(), y.data());
  }
  tr.clip(accum, 0.5);
  tr.apply(cf::gpu::AdamWUpdate{1e-3f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-8f, 0.f}, 0.1f);
  CHECK(tr.finite());
}

}  // namespace

TEST_CASE("gpu device trainer (emulated): after the first step a step allocates nothing and waits accum + 2 times",
          "[gpu][emu][train]") {
  // a mask-family model and every attention form (RoPE, GQA, S-D, runway, linear; the norm / MLP
  // variants add no allocation or wait of their own); T = 33: two tiles, the second ragged
  const int B = 1, T = 33;
  std::vector<Case> all{cases().front()};
  for (Case& a : attention_cases()) all.push_back(std::move(a));
  for (const Case& cs : all) {
    INFO(cs.label);
    const Model<float> model = init_model<float>(cs.cfg, 5);
    const DeviceStats at_start = cf::gpu::device_stats(Backend::Emulated);
    cf::gpu::emu::Trainer tr(cf::gpu::make_train_plan(cs.cfg, B, T));
    tr.upload(model.params.data(), nullptr, nullptr);
    // the plan's buffers, its masks (one per layer) and the staging buffer are counted
    CHECK(since(at_start).allocations >= static_cast<std::uint64_t>(cs.cfg.n_layer) + 2);
    for (int accum : {1, 2}) {
      INFO("accum " << accum);
      step(tr, cs.cfg, B, T, accum, 1);  // the first step may grow Thrust's temporary storage
      const DeviceStats before = cf::gpu::device_stats(Backend::Emulated);
      const int steps = 1;
      for (int s = 0; s < steps; ++s) step(tr, cs.cfg, B, T, accum, 2 + s);
      const DeviceStats d = since(before);
      CHECK(d.allocations == 0);
      CHECK(d.bytes == 0);
      CHECK(d.host_syncs == static_cast<std::uint64_t>(steps * (accum + 2)));
    }
    std::vector<std::int32_t> x, y;
    batch(cs.cfg, B, T, 99, x, y);
    const DeviceStats before = cf::gpu::device_stats(Backend::Emulated);
    CHECK(std::isfinite(tr.loss(x.data(), y.data())));
    const DeviceStats d = since(before);
    CHECK(d.allocations == 0);
    CHECK(d.host_syncs == 1);
  }
}

// A micro-batch without a counted target reads nothing back, so the next upload must wait for the
// copy from the staging buffer before overwriting it: one counted wait, and the loss is the same as
// from a fresh trainer.
TEST_CASE("gpu device trainer (emulated): staging waits after a micro-batch that read nothing back",
          "[gpu][emu][train]") {
  const int B = 2, T = 45;
  const Case cs = cases()[0];
  const Model<float> model = init_model<float>(cs.cfg, 5);
  cf::gpu::emu::Trainer tr(cf::gpu::make_train_plan(cs.cfg, B, T)), fresh(cf::gpu::make_train_plan(cs.cfg, B, T));
  tr.upload(model.params.data(), nullptr, nullptr);
  fresh.upload(model.params.data(), nullptr, nullptr);
  std::vector<std::int32_t> x, y;
  batch(cs.cfg, B, T, 3, x, y);
  const std::vector<std::int32_t> none(y.size(), -1);
  DeviceStats before = cf::gpu::device_stats(Backend::Emulated);
  CHECK(tr.loss(x.data(), none.data()) == 0.0);
  CHECK(since(before).host_syncs == 0);
  before = cf::gpu::device_stats(Backend::Emulated);
  const double l = tr.loss(x.data(), y.data());
  CHECK(since(before).host_syncs == 2);  // the staging wait, then the loss
  CHECK(l == fresh.loss(x.data(), y.data()));
}

// The counters see the points the trainer avoids: an attention call given a TiledMask (not a
// resident one) uploads the mask (one allocation, one blocking copy) and allocates the runway's
// scratch; with the resident mask and caller-kept scratch the same call allocates nothing, waits
// for nothing and gives the same output bit for bit.
TEST_CASE("gpu device stats count the per-call mask upload and scratch that resident masks avoid", "[gpu][emu]") {
  using O = cf::gpu::Ops<Backend::Emulated>;
  const int B = 1, H = 2, T = 40, dh = 8;
  std::vector<std::uint8_t> causal(static_cast<std::size_t>(T) * T, 0);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) causal[static_cast<std::size_t>(i) * T + j] = 1;
  const cf::gpu::TiledMask mask = cf::gpu::tiled_mask_from_dense({causal.data()}, T);
  const cf::gpu::AttentionShape s{B, H, T, dh, 0.35f};
  const std::size_t n = static_cast<std::size_t>(B) * H * T * dh;
  std::vector<float> q(n), k(n), v(n), y1(n), y2(n), lse(n), obr(n), u(static_cast<std::size_t>(B) * T * dh);
  for (std::size_t i = 0; i < n; ++i)
    q[i] = std::sin(0.1f * i), k[i] = std::cos(0.07f * i), v[i] = std::sin(0.013f * i + 1);
  cf::gpu::AttentionExtras x;
  x.runway_v = v.data() + (H - 1) * T * dh;  // the last head's values
  x.runway_stride = static_cast<std::int64_t>(H) * T * dh;
  cf::gpu::Context ctx;
  DeviceStats before = cf::gpu::device_stats(Backend::Emulated);
  O::attention_forward_ex(ctx, s, mask, nullptr, x, q.data(), k.data(), v.data(), y1.data(), lse.data(), obr.data());
  DeviceStats d = since(before);
  CHECK(d.allocations == 2);  // the mask and the runway's u
  CHECK(d.host_syncs == 1);   // the mask's blocking upload
  const cf::gpu::ResidentMask<Backend::Emulated> resident(mask);
  before = cf::gpu::device_stats(Backend::Emulated);
  O::attention_forward_ex(ctx, s, resident, nullptr, x, cf::gpu::AttentionScratch{u.data(), nullptr}, q.data(),
                          k.data(), v.data(), y2.data(), lse.data(), obr.data());
  d = since(before);
  CHECK(d.allocations == 0);
  CHECK(d.host_syncs == 0);
  CHECK(y1 == y2);
}
