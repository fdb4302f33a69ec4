// cf/gpu/analysis_model.hpp: plans from lib/nn configs, the Placement's build of the device model
// behind cf::nn's forward signature and hooks, and capture on the device.
#include "cf/gpu/analysis_model.hpp"

#include <algorithm>
#include <iostream>

#include "analysis_weights.hpp"
#include "cf/core/error.hpp"
#include "cf/gpu/device_analysis_model.hpp"
#include "cf/hf/config.hpp"
#include "cf/nn/attention_masks.hpp"
#include "cf/nn/attention_variant.hpp"
#include "cf/nn/params.hpp"

namespace cf::gpu {

std::string device_analysis_unsupported(const nn::ModelConfig& c) {
  using nn::AttnKind;
  for (int l = 0; l < c.n_layer && l < static_cast<int>(c.layers.size()); ++l) {
    const AttnKind k = c.layers[static_cast<std::size_t>(l)].attn;
    const bool mask_family = k == AttnKind::Full || k == AttnKind::Block || k == AttnKind::Swa ||
                             k == AttnKind::Bridge || k == AttnKind::Pbb || k == AttnKind::SeBridge;
    if (!mask_family || nn::is_registered_variant(k)) return str(nn::attn_name(k), " attention (layer ", l, ")");
  }
  if (c.arch.emb_norm && c.norm == nn::NormKind::None) return "an embedding norm in a model without norms";
  return "";
}

AnalysisPlan make_analysis_plan(const nn::ModelConfig& c) {
  const std::string why = device_analysis_unsupported(c);
  require(why.empty(), "the device analysis model does not support ", why,
          " (docs/gpu.md \"Analysis model\"); use --device cpu");
  const nn::ParamLayout lay = nn::make_layout(c);
  AnalysisPlan p;
  p.V = c.vocab_size, p.C = c.d_model, p.H = c.n_head, p.F = nn::ffn_dim(c), p.block_size = c.block_size;
  p.norm = c.norm == nn::NormKind::LayerNorm ? NormOp::LayerNorm
           : c.norm == nn::NormKind::RMSNorm ? NormOp::RMSNorm
                                             : NormOp::None;
  p.eps = static_cast<float>(c.arch.norm_eps);
  p.mlp = c.arch.mlp == nn::MlpKind::SwiGLU ? MlpOp::SwiGLU
          : c.arch.mlp == nn::MlpKind::Gelu ? MlpOp::GeluErf
                                            : MlpOp::GeluTanh;
  p.parallel_residual = c.arch.parallel_residual;
  p.rope_theta = c.arch.rope_theta;
  p.total = lay.total;
  p.wte = lay.wte, p.wpe = lay.wpe, p.emb_ln_w = lay.emb_ln_w, p.emb_ln_b = lay.emb_ln_b;
  p.lnf_w = lay.lnf_w, p.lnf_b = lay.lnf_b;
  p.head = lay.lm_head >= 0 ? lay.lm_head : lay.wte;
  const int H = c.n_head, KV = nn::kv_heads(c);
  for (int l = 0; l < c.n_layer; ++l) {
    const nn::LayerOffsets& o = lay.layer[static_cast<std::size_t>(l)];
    AnalysisLayer al;
    al.dh = nn::head_dim(c, l);
    al.ld = static_cast<std::int64_t>(H + 2 * KV) * al.dh;
    for (int h = 0; h < H; ++h) {  // cf::nn's qkv layout: queries, then keys and values of the kv heads
      const std::int64_t kv = h / (H / KV);
      al.q_col.push_back(static_cast<std::int64_t>(h) * al.dh);
      al.k_col.push_back((H + kv) * al.dh);
      al.v_col.push_back((H + KV + kv) * al.dh);
    }
    al.ln1_w = o.ln1_w, al.ln1_b = o.ln1_b, al.attn_w = o.attn_w, al.attn_b = o.attn_b;
    al.proj_w = o.proj_w, al.proj_b = o.proj_b, al.ln2_w = o.ln2_w, al.ln2_b = o.ln2_b;
    al.fc_w = o.fc_w, al.fc_b = o.fc_b, al.fcproj_w = o.fcproj_w, al.fcproj_b = o.fcproj_b;
    if (c.pos == nn::PosKind::Rope) al.rope_dims = nn::rope_dims(c, l);
    if (c.pos == nn::PosKind::Alibi)
      for (double m : nn::alibi_slopes(c)) al.slopes.push_back(static_cast<float>(m));
    const nn::LayerConfig lc = c.layers[static_cast<std::size_t>(l)];
    al.branch_masks = [lc](int T) {
      std::vector<std::vector<std::uint8_t>> dense;
      for (const nn::BranchRows& br : nn::layer_branches(lc, T)) dense.push_back(nn::dense_mask(br, T));
      return dense;
    };
    p.layers.push_back(std::move(al));
  }
  return p;
}

Placement placement_for_model(Placement where, const std::string& device, const std::string& tool,
                              const nn::ModelConfig& c, const std::string& missing) {
  if (where == Placement::Cpu) return where;
  const std::string why = device_analysis_unsupported(c);
  if (why.empty() && missing.empty()) return where;
  const std::string what =
      why.empty() ? missing
                  : str("the device analysis model does not support ", why, " (docs/gpu.md \"Analysis model\")");
  require(device == "auto", "--device ", device, ": ", what, "; use --device cpu");
  std::cerr << tool << ": --device auto: " << what << "; running on the CPU\n";
  return Placement::Cpu;
}

bool use_stored_weights(const std::string& weights, Placement where, const std::string& checkpoint) {
  return weights == "stored" && where != Placement::Cpu && hf::is_hf_directory(checkpoint);
}

nn::ModelConfig hf_model_config(const std::string& dir) { return hf::read_hf_config(dir).config; }

// ------------------------------------------------------------------------------- the model

/// One build of the device model behind a common face.
struct AnalysisModel::Impl {
  virtual ~Impl() = default;
  virtual const AnalysisPlan& plan() const = 0;
  virtual std::int64_t forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T, float* losses,
                               float* logits, const DeviceHooks* cap) = 0;
  virtual std::uint8_t* staging(std::size_t bytes) = 0;
  virtual void release_staging() = 0;
  virtual void place(const WeightChunk& chunk) = 0;
};

namespace {

template <class M>
struct Build final : AnalysisModel::Impl {
  M m;
  Build(Context& ctx, AnalysisPlan p, const float* w) : m(ctx, std::move(p), w) {}
  Build(Context& ctx, AnalysisPlan p) : m(ctx, std::move(p)) {}
  const AnalysisPlan& plan() const override { return m.plan(); }
  std::int64_t forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T, float* losses,
                       float* logits, const DeviceHooks* cap) override {
    return m.forward(tokens, targets, B, T, losses, logits, cap);
  }
  std::uint8_t* staging(std::size_t bytes) override { return m.staging(bytes); }
  void release_staging() override { m.release_staging(); }
  void place(const WeightChunk& chunk) override { m.place(chunk); }
};

// The build of `where` with weights `w` (lib/nn's layout), or zeroed for stored weights (null).
template <class B>
std::unique_ptr<AnalysisModel::Impl> build(Context& ctx, AnalysisPlan p, const float* w) {
  if (w) return std::make_unique<B>(ctx, std::move(p), w);
  return std::make_unique<B>(ctx, std::move(p));
}

std::unique_ptr<AnalysisModel::Impl> make_build(Placement where, Context& ctx, AnalysisPlan p, const float* w) {
  if (where == Placement::Emulated) return build<Build<emu::AnalysisModel>>(ctx, std::move(p), w);
  require(where == Placement::Cuda, "the device analysis model needs a device placement (cuda or emulated)");
#if CF_GPU_HAVE_CUDA
  return build<Build<cuda::AnalysisModel>>(ctx, std::move(p), w);
#else
  throw InvalidArgument("--device cuda: this build has no CUDA path");
#endif
}

/// cf::nn::LayerActivations of one device capture: probabilities of the requested heads placed at
/// their model index in an [H, T, T] array (the others zero, as the CPU's report), q and k [H, T, dh]
/// gathered from the qkv rows.
struct LayerAdapter {
  const AnalysisPlan& p;
  const std::vector<int>& heads;
  std::vector<float> probs, q, k;

  nn::LayerActivations convert(const DeviceLayerCapture& c) {
    const AnalysisLayer& al = p.layers[static_cast<std::size_t>(c.layer)];
    const int H = p.H, T = c.T, dh = al.dh;
    const std::size_t TT = static_cast<std::size_t>(T) * T, TD = static_cast<std::size_t>(T) * dh;
    probs.assign(static_cast<std::size_t>(H) * TT, 0.0f);
    for (std::size_t i = 0; i < heads.size(); ++i)
      std::copy(c.probs + i * TT, c.probs + (i + 1) * TT, probs.begin() + static_cast<std::ptrdiff_t>(heads[i] * TT));
    q.resize(static_cast<std::size_t>(H) * TD);
    k.resize(q.size());
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const float* row = c.qkv + static_cast<std::size_t>(t) * al.ld;
        std::copy(row + al.q_col[h], row + al.q_col[h] + dh, q.begin() + static_cast<std::ptrdiff_t>(h * TD + t * dh));
        std::copy(row + al.k_col[h], row + al.k_col[h] + dh, k.begin() + static_cast<std::ptrdiff_t>(h * TD + t * dh));
      }
    nn::LayerActivations la;
    la.layer = c.layer, la.seq = c.seq, la.n_head = H, la.seq_len = T, la.d_head = dh, la.d_model = p.C;
    la.attn_probs = probs.data(), la.q = q.data(), la.k = k.data();
    la.resid_in = c.resid_in, la.attn_out = c.attn_out, la.resid_out = c.resid_out;
    la.resid_in_norm = c.resid_in_norm, la.attn_out_norm = c.attn_out_norm, la.resid_out_norm = c.resid_out_norm;
    return la;
  }
};

/// cf::nn's score hook on one layer's scores [B, H, T, T] (row-major): per sequence and head, as
/// the CPU calls it, on a column-major copy (the hook's Eigen::Ref<MatrixXf>), written back.
void edit_scores(const nn::ForwardHooks& hooks, int l, int B, int H, int T, float* scores) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::MatrixXf M(T, T);
  const std::size_t TT = static_cast<std::size_t>(T) * T;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      Eigen::Map<RowMajor> S(scores + (static_cast<std::size_t>(b) * H + h) * TT, T, T);
      M = S;
      hooks.on_scores(l, h, M);
      S = M;
    }
}

}  // namespace

AnalysisModel::AnalysisModel(Placement where, const nn::Model<float>& model, Context& ctx)
    : AnalysisModel(where, model, Precision::Fp32, ctx) {}

AnalysisModel::AnalysisModel(Placement where, const nn::Model<float>& model, Precision precision, Context& ctx) {
  require(static_cast<std::int64_t>(model.params.size()) == model.layout.total, "model has ", model.params.size(),
          " parameters but its layout needs ", model.layout.total);
  AnalysisPlan plan = make_analysis_plan(model.config);
  plan.precision = precision;
  impl_ = make_build(where, ctx, std::move(plan), model.params.data());
  config_ = model.config;
}

AnalysisModel::AnalysisModel(Placement where, const std::string& hf_dir, Context& ctx, std::size_t staging_bytes)
    : AnalysisModel(where, hf_dir, Precision::Fp32, ctx, staging_bytes) {}

AnalysisModel::AnalysisModel(Placement where, const std::string& hf_dir, Precision precision, Context& ctx,
                             std::size_t staging_bytes) {
  const stored::StoredModel m = stored::open_stored(hf_dir);
  AnalysisPlan plan = m.plan;
  plan.precision = precision;
  if (precision == Precision::Bf16) plan.wtype = WeightType::BF16;  // F32 / F16 matrices rounded as placed
  impl_ = make_build(where, ctx, std::move(plan), nullptr);
  config_ = m.hf.config;
  std::uint8_t* buf = impl_->staging(staging_bytes);
  stored::stage_stored(m, buf, staging_bytes, [this](const WeightChunk& c) { impl_->place(c); });
  impl_->release_staging();
}

WeightType AnalysisModel::weight_type() const { return impl_->plan().wtype; }

Precision AnalysisModel::precision() const { return impl_->plan().precision; }

std::size_t AnalysisModel::weight_bytes() const {
  const AnalysisPlan& p = impl_->plan();
  const std::size_t floats = static_cast<std::size_t>(p.total) * sizeof(float);
  if (p.one_array) return floats;
  return floats + static_cast<std::size_t>(p.mat_total) * (p.wtype == WeightType::F32 ? 4 : 2);
}

std::string weight_type_name(WeightType t) {
  return t == WeightType::BF16 ? "bf16" : t == WeightType::F16 ? "f16" : "float32";
}

AnalysisModel::~AnalysisModel() = default;

double AnalysisModel::forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                              const nn::ForwardHooks* hooks, std::vector<float>* logprobs, std::vector<float>* logits) {
  const AnalysisPlan& p = impl_->plan();
  if (hooks)
    require(std::none_of(hooks->linearize.begin(), hooks->linearize.end(), [](bool b) { return b; }),
            "ELU+1 linear attention (linearised layers) has no device path; use --device cpu");
  DeviceHooks req;
  std::vector<int> heads;  // the captured heads in [0, H), each once (the CPU ignores others too)
  for (int h : hooks ? hooks->capture_heads : std::vector<int>{})
    if (h >= 0 && h < p.H && std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(h);
  if (heads.empty())
    for (int h = 0; h < p.H; ++h) heads.push_back(h);
  LayerAdapter adapt{p, heads, {}, {}, {}};
  if (hooks && hooks->on_layer) {
    req.heads = heads;
    req.on_layer = [&](const DeviceLayerCapture& c) { hooks->on_layer(adapt.convert(c)); };
  }
  const std::size_t N = static_cast<std::size_t>(B) * static_cast<std::size_t>(std::max(T, 0));
  std::vector<float> losses(N);
  if (logits) logits->resize(N * static_cast<std::size_t>(p.V));
  if (hooks && hooks->on_scores)
    req.on_scores = [&](int l, int Bn, int Tn, float* scores) { edit_scores(*hooks, l, Bn, p.H, Tn, scores); };
  const std::int64_t count = impl_->forward(tokens, targets, B, T, losses.data(), logits ? logits->data() : nullptr,
                                            req.on_layer || req.on_scores ? &req : nullptr);
  if (logprobs) {
    logprobs->assign(N, 0.0f);
    for (std::size_t n = 0; n < N; ++n) (*logprobs)[n] = -losses[n];
  }
  double sum = 0;
  for (float l : losses) sum += l;
  return count > 0 ? sum / static_cast<double>(count) : 0.0;
}

nn::PerplexityResult AnalysisModel::perplexity(const std::vector<std::int32_t>& tokens, int context, int stride,
                                               const nn::ForwardHooks* hooks) {
  const nn::WindowForward forward = [&](const std::int32_t* in, const std::int32_t* tg, int Tn,
                                        std::vector<float>& lp) { this->forward(in, tg, 1, Tn, hooks, &lp); };
  return nn::evaluate_perplexity(impl_->plan().block_size, forward, tokens, context, stride);
}

nn::CaptureSummary capture_model(Placement where, const nn::Model<float>& model,
                                 const std::vector<std::vector<std::int32_t>>& windows, const std::string& path,
                                 const nn::CaptureOptions& options, Precision precision) {
  AnalysisModel dev(where, model, precision);
  return capture_model(dev, windows, path, options);
}

nn::CaptureSummary capture_model(AnalysisModel& model, const std::vector<std::vector<std::int32_t>>& windows,
                                 const std::string& path, const nn::CaptureOptions& options) {
  const nn::CaptureForward forward = [&](const std::int32_t* in, const std::int32_t* tg, int T,
                                         const nn::ForwardHooks& hooks) { return model.forward(in, tg, 1, T, &hooks); };
  return nn::capture_model(model.config(), forward, windows, path, options);
}

}  // namespace cf::gpu
