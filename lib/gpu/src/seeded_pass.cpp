// The device trainer's seeded passes, see cf/gpu/seeded_pass.hpp.
#include "cf/gpu/seeded_pass.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "cf/core/error.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/gpu/trainer.hpp"

namespace cf::gpu {

Placement placement_for_seeded(Placement where, const std::string& device, const std::string& tool,
                               const nn::ModelConfig& c) {
  if (where == Placement::Cpu) return where;
  const std::string why = device_train_unsupported(c);
  if (why.empty()) return where;
  const std::string what = str("the device trainer does not support ", why, " (docs/gpu.md \"Device trainer\")");
  require(device == "auto", "--device ", device, ": ", what, "; use --device cpu");
  std::cerr << tool << ": --device auto: " << what << "; running on the CPU\n";
  return Placement::Cpu;
}

namespace {

/// One build of the device trainer behind a common face.
struct SeededTrainer {
  virtual ~SeededTrainer() = default;
  virtual bool fits(const TrainPlan& p) const = 0;
  virtual void reshape(TrainPlan p) = 0;
  virtual double seeded(const std::int32_t* tokens, const std::int32_t* targets, const TrainerSeed& s) = 0;
};

template <class Trainer>
struct Build final : SeededTrainer {
  Trainer t;
  Build(Context& ctx, TrainPlan p, const float* params) : t(ctx, std::move(p), TrainerUse::Analysis) {
    t.upload(params, nullptr, nullptr);
  }
  bool fits(const TrainPlan& p) const override { return t.fits(p); }
  void reshape(TrainPlan p) override { t.reshape(std::move(p)); }
  double seeded(const std::int32_t* tokens, const std::int32_t* targets, const TrainerSeed& s) override {
    return t.seeded(tokens, targets, s);
  }
};

std::unique_ptr<SeededTrainer> make_build(Placement where, Context& ctx, TrainPlan p, const float* params) {
  if (where == Placement::Emulated) return std::make_unique<Build<emu::Trainer>>(ctx, std::move(p), params);
  require(where == Placement::Cuda, "the device trainer needs a device placement (cuda or emulated)");
#if CF_GPU_HAVE_CUDA
  return std::make_unique<Build<cuda::Trainer>>(ctx, std::move(p), params);
#else
  throw InvalidArgument("--device cuda: this build has no CUDA path");
#endif
}

void require_finite(const float* x, std::size_t n, const char* what) {
  require(std::all_of(x, x + n, [](float v) { return std::isfinite(v); }), "the device's ", what,
          " are not finite: the model's weights overflow float32 arithmetic (a damaged or mis-scaled checkpoint)");
}

/// The pass: one trainer, grown to the largest batch, reshaped to each.
class DevicePass {
 public:
  DevicePass(Placement where, const nn::Model<float>& model, int max_B, int max_T, Precision precision, Context& ctx)
      : where_(where), model_(model), ctx_(ctx), cap_B_(max_B), cap_T_(max_T), precision_(precision) {
    const std::string why = device_train_unsupported(model.config);
    require(why.empty(), "the device trainer does not support ", why, " (docs/gpu.md \"Device trainer\")");
    require(where == Placement::Emulated || where == Placement::Cuda,
            "the device trainer needs a device placement (cuda or emulated)");
  }

  float operator()(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                   const nn::GradientSeed<float>& seed) {
    TrainPlan plan = this->plan(B, T);
    if (!trainer_ || !trainer_->fits(plan)) grow(B, T);
    require(trainer_->fits(plan), "internal: a ", B, " x ", T, " batch does not fit the device trainer grown for it");
    trainer_->reshape(std::move(plan));
    const std::size_t NC = static_cast<std::size_t>(B) * T * model_.config.d_model;
    TrainerSeed s;
    if (seed.on_probs) s.on_probs = [&seed](float* probs, int N, int V) { seed.on_probs(probs, N, V); };
    if (seed.top) s.top = &*seed.top;
    s.resid_layer = seed.resid_layer, s.resid = seed.resid, s.out_layer = seed.out_layer;
    if (seed.dresid) seed.dresid->resize(NC), s.dresid = seed.dresid->data();
    const double value = trainer_->seeded(tokens, targets, s);
    if (seed.dresid) require_finite(s.dresid, NC, "input gradients");
    return static_cast<float>(value);
  }

 private:
  // A trainer for at least B x T and every shape asked before: freed first (device memory), then
  // allocated and the parameters uploaded.
  void grow(int B, int T) {
    cap_B_ = std::max(cap_B_, B), cap_T_ = std::max(cap_T_, T);
    trainer_.reset();
    trainer_ = make_build(where_, ctx_, plan(cap_B_, cap_T_), model_.params.data());
  }
  // The trainer's plan of a B x T batch in the pass's precision policy.
  TrainPlan plan(int B, int T) const {
    TrainPlan p = make_train_plan(model_.config, B, T);
    p.precision = precision_;
    return p;
  }

  Placement where_;
  const nn::Model<float>& model_;
  Context& ctx_;
  int cap_B_, cap_T_;
  Precision precision_;
  std::unique_ptr<SeededTrainer> trainer_;
};

}  // namespace

nn::SeededPass<float> device_seeded_pass(Placement where, const nn::Model<float>& model, int max_B, int max_T,
                                         Context& ctx, Precision precision) {
  auto pass =
      std::make_shared<DevicePass>(where, model, max_B, max_T, precision, ctx);  // std::function copies: share it
  return [pass](const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                const nn::GradientSeed<float>& seed) { return (*pass)(tokens, targets, B, T, seed); };
}

}  // namespace cf::gpu
