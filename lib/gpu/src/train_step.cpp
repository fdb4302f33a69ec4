#include "cf/gpu/train_step.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/gpu/trainer.hpp"
#include "cf/nn/attention_masks.hpp"
#include "cf/nn/attention_variant.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/ops.hpp"
#include "cf/nn/params.hpp"

namespace cf::gpu {

std::string device_train_unsupported(const nn::ModelConfig& c) {
  using nn::AttnKind;
  for (int l = 0; l < c.n_layer && l < static_cast<int>(c.layers.size()); ++l) {
    const AttnKind k = c.layers[static_cast<std::size_t>(l)].attn;
    // the variant unit's GPU hook (cf/nn/attention_variant.hpp): a kind the device trainer does not
    // run, built in or registered, is refused rather than trained as plain softmax
    if (!nn::attention_variant(k).gpu.trainer) return str(nn::attn_name(k), " attention (layer ", l, ")");
    if (nn::head_dim(c, l) > 128) return str("head dimension ", nn::head_dim(c, l), " > 128 (layer ", l, ")");
  }
  return "";
}

namespace {

/// The device trainer's form for a unit's GPU form (cf/nn/attention_variant.hpp: the unit names it).
AttnForm trainer_form(nn::GpuForm f) {
  switch (f) {
    case nn::GpuForm::Softmax:
      return AttnForm::Softmax;
    case nn::GpuForm::Sd:
      return AttnForm::Sd;
    case nn::GpuForm::RunwayDot:
      return AttnForm::RunwayDot;
    case nn::GpuForm::RunwayBilinear:
      return AttnForm::RunwayBilinear;
    case nn::GpuForm::Linear:
      return AttnForm::Linear;
    case nn::GpuForm::None:
      break;
  }
  throw InvalidArgument("device trainer: an attention unit without a GPU form");  // refused before
}

/// Layer l's attention beyond GPT-2's (TrainLayer's issue 31 fields): kv heads, RoPE, and the
/// form its unit's GPU hook names, with the form's logit scale and parameters.
void attention_fields(const nn::ModelConfig& c, int l, const nn::LayerOffsets& o, TrainLayer& tl) {
  const nn::LayerConfig& lc = c.layers[static_cast<std::size_t>(l)];
  const double dh = static_cast<double>(tl.dh);
  tl.kv = nn::kv_heads(c);
  if (c.pos == nn::PosKind::Rope) tl.rope = nn::rope_dims(c, l), tl.rope_theta = c.arch.rope_theta;
  tl.scale = static_cast<float>(1.0 / std::sqrt(dh));
  tl.form = trainer_form(nn::attention_variant(lc.attn).gpu.form);
  if (tl.form == AttnForm::Sd) {
    require(o.damp_w >= 0 && o.damp_b >= 0, nn::attn_name(lc.attn), " attention (layer ", l,
            "): the S-D form needs the unit's attn.damp parameters (LayerOffsets::damp_w, damp_b)");
    tl.scale = static_cast<float>(0.5 / std::sqrt(dh));  // the routing scale 1/(2 sqrt(d_head)), SdUnit
    tl.damp_w = o.damp_w, tl.damp_b = o.damp_b, tl.sd_eps = static_cast<float>(lc.sd_eps);
  }
  if (tl.form == AttnForm::RunwayBilinear) {
    require(o.runway_B >= 0, nn::attn_name(lc.attn), " attention (layer ", l,
            "): the bilinear runway form needs the unit's B (LayerOffsets::runway_B)");
    tl.runway_B = o.runway_B;
  }
}

// The plan's norm, MLP and residual wiring from the config (the float eps of cf::nn's kernels).
void set_norm_mlp(TrainPlan& p, const nn::ModelConfig& c) {
  p.norm = c.norm == nn::NormKind::RMSNorm     ? TrainNorm::RMSNorm
           : c.norm == nn::NormKind::LayerNorm ? TrainNorm::LayerNorm
                                               : TrainNorm::None;
  p.norm_eps = static_cast<float>(c.arch.norm_eps);
  p.mlp = c.arch.mlp == nn::MlpKind::SwiGLU ? TrainMlp::SwiGLU
          : c.arch.mlp == nn::MlpKind::Gelu ? TrainMlp::GeluErf
                                            : TrainMlp::GeluTanh;
  p.parallel_residual = c.arch.parallel_residual;
}

}  // namespace

TrainPlan make_train_plan(const nn::ModelConfig& c, int B, int T) {
  const std::string why = device_train_unsupported(c);
  require(why.empty(), "the device trainer does not support ", why,
          " (docs/gpu.md \"Device trainer\"); use --device cpu");
  require(B >= 1 && T >= 1 && T <= c.block_size, "device trainer: batch ", B, " x ", T,
          " (need B >= 1 and 1 <= T <= block_size = ", c.block_size, ")");
  const nn::ParamLayout lay = nn::make_layout(c);
  TrainPlan p;
  p.V = c.vocab_size, p.C = c.d_model, p.H = c.n_head, p.F = nn::ffn_dim(c);
  p.B = B, p.T = T, p.N = B * T;
  set_norm_mlp(p, c);
  p.total = lay.total;
  p.wte = lay.wte, p.wpe = lay.wpe, p.lnf_w = lay.lnf_w, p.lnf_b = lay.lnf_b;
  p.emb_ln_w = lay.emb_ln_w, p.emb_ln_b = lay.emb_ln_b;
  p.head = lay.lm_head >= 0 ? lay.lm_head : lay.wte;
  for (int l = 0; l < c.n_layer; ++l) {
    const nn::LayerOffsets& o = lay.layer[static_cast<std::size_t>(l)];
    TrainLayer tl;
    tl.dh = nn::head_dim(c, l);
    tl.ln1_w = o.ln1_w, tl.ln1_b = o.ln1_b, tl.attn_w = o.attn_w, tl.attn_b = o.attn_b;
    tl.proj_w = o.proj_w, tl.proj_b = o.proj_b, tl.ln2_w = o.ln2_w, tl.ln2_b = o.ln2_b;
    tl.fc_w = o.fc_w, tl.fc_b = o.fc_b, tl.fcproj_w = o.fcproj_w, tl.fcproj_b = o.fcproj_b;
    std::vector<std::vector<std::uint8_t>> dense;
    for (const auto& br : nn::layer_branches(c.layers[static_cast<std::size_t>(l)], T))
      dense.push_back(nn::dense_mask(br, T));
    std::vector<const std::uint8_t*> ptrs;
    for (const auto& d : dense) ptrs.push_back(d.data());
    tl.mask = tiled_mask_from_dense(ptrs, T);
    if (c.pos == nn::PosKind::Alibi)
      for (double m : nn::alibi_slopes(c)) tl.slopes.push_back(static_cast<float>(m));
    attention_fields(c, l, o, tl);
    p.layers.push_back(std::move(tl));
  }
  for (const nn::ParamInfo& t : lay.tensors) {  // AdamW runs: consecutive tensors of one decay setting
    if (!p.runs.empty() && p.runs.back().decay == t.decay && p.runs.back().offset + p.runs.back().size == t.offset)
      p.runs.back().size += t.size;
    else
      p.runs.push_back(ParamRun{t.offset, t.size, t.decay});
  }
  return p;
}

namespace {

/// cf::nn::UpdateBackend over one build of the device trainer.
template <class Tr>
class DeviceBackend final : public nn::UpdateBackend {
 public:
  DeviceBackend(Context& ctx, Precision precision) : ctx_(ctx), precision_(precision) {}
  void load(const nn::Model<float>& model, const nn::AdamWState& st, int B, int T) override {
    TrainPlan plan = make_train_plan(model.config, B, T);
    plan.precision = precision_;
    t_ = std::make_unique<Tr>(ctx_, std::move(plan));
    const std::size_t n = model.params.size();
    require(st.m.empty() || (st.m.size() == n && st.v.size() == n), "device trainer: optimizer state has ", st.m.size(),
            " entries for ", n, " parameters");
    t_->upload(model.params.data(), st.m.empty() ? nullptr : st.m.data(), st.v.empty() ? nullptr : st.v.data());
  }
  void zero_grad() override { get().zero_grad(); }
  double micro_batch(const std::int32_t* x, const std::int32_t* y) override { return get().micro_batch(x, y); }
  double loss(const std::int32_t* x, const std::int32_t* y) override { return get().loss(x, y); }
  double clip(int grad_accum, double max_norm) override { return get().clip(grad_accum, max_norm); }
  void apply(double lr, const nn::AdamWConfig& cfg, std::int64_t t) override {
    // the scalars of cf::nn::adamw_step, rounded to float the same way
    const double bc1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(t));
    const AdamWUpdate u{static_cast<float>(lr),
                        static_cast<float>(cfg.beta1),
                        static_cast<float>(cfg.beta2),
                        static_cast<float>(bc1),
                        static_cast<float>(bc2),
                        static_cast<float>(cfg.eps),
                        0.0f};
    get().apply(u, static_cast<float>(cfg.weight_decay));
  }
  bool finite() override { return get().finite(); }
  void store(std::vector<float>& params, nn::AdamWState& st) override {
    const std::size_t n = static_cast<std::size_t>(get().plan().total);
    params.resize(n), st.m.resize(n), st.v.resize(n);
    get().download(params.data(), st.m.data(), st.v.data());
  }

 private:
  Tr& get() {
    require(t_ != nullptr, "device trainer: no model loaded");
    return *t_;
  }
  Context& ctx_;
  Precision precision_;
  std::unique_ptr<Tr> t_;
};

}  // namespace

std::unique_ptr<nn::UpdateBackend> make_update_backend(TrainerBuild build, Context& ctx, Precision precision) {
  if (build == TrainerBuild::Emulated) return std::make_unique<DeviceBackend<emu::Trainer>>(ctx, precision);
#if CF_GPU_HAVE_CUDA
  return std::make_unique<DeviceBackend<cuda::Trainer>>(ctx, precision);
#else
  throw InvalidArgument("the device trainer's CUDA build is not in this binary (configured without CUDA)");
#endif
}

std::unique_ptr<nn::UpdateBackend> make_update_backend(TrainerBuild build) {
  return make_update_backend(build, default_context());
}

}  // namespace cf::gpu
