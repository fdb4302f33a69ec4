#pragma once
// The device analysis model from the host's side (issue 30; docs/gpu.md "Analysis model"): plans
// from a cf::nn model, the model on the device of a cf::gpu::Placement (its CUDA build, or the
// emulated twin on the CPU for CF_GPU_EMULATE=1 and CI) behind the forward signature and hooks of
// cf::nn::forward_backward, and `capture` on the device (cf::nn::capture_model's driver and file).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cf/gpu/analysis_plan.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/model.hpp"

namespace cf::gpu {

/// Why the device analysis model cannot run models of config `c` ("" when it can): it runs the
/// softmax mask families (full, block, swa, bridge, pbb, se-bridge), learned / RoPE / ALiBi / no
/// positions, LayerNorm / RMSNorm / no norm, GELU tanh / erf and SwiGLU MLPs, grouped-query
/// attention, the parallel residual, BLOOM's embedding norm and untied heads; it names the first
/// other feature (runway, S-D, linear and registered attention variants).
std::string device_analysis_unsupported(const nn::ModelConfig& c);

/// The plan of config `c` (cf/gpu/analysis_plan.hpp). Throws cf::InvalidArgument naming the
/// feature when device_analysis_unsupported(c) is not empty.
AnalysisPlan make_analysis_plan(const nn::ModelConfig& c);

/// Where a model-level analyser (capture, spectral-surgery) runs once its model is loaded: `where`
/// is resolve_device's answer to `device` (cpu | cuda | auto). A config the device analysis model
/// does not run, or a run that needs something without a device path (`missing` not empty, e.g.
/// "ELU+1 linear attention has no device path"), is refused for --device cuda (cf::InvalidArgument
/// naming it, exit 2) and runs on the CPU for --device auto after one stderr line "<tool>: --device
/// auto: ...; running on the CPU", resolve_device's fallback.
Placement placement_for_model(Placement where, const std::string& device, const std::string& tool,
                              const nn::ModelConfig& c, const std::string& missing = "");

/// Whether an analyser keeps `checkpoint`'s weights in their stored dtype on the device
/// (AnalysisModel's Hugging Face constructor): `weights` (--weights) is "stored", `where`
/// (resolve_device's answer) is a device and `checkpoint` is a Hugging Face directory. Otherwise the
/// tool loads the float32 model (cf::model::load_model): the CPU, HDF5 checkpoints, --weights float32.
bool use_stored_weights(const std::string& weights, Placement where, const std::string& checkpoint);

/// The lib/nn config of Hugging Face directory `dir` (config.json only; no weight is read).
nn::ModelConfig hf_model_config(const std::string& dir);

/// A lib/nn model resident on the device of `where` (Placement::Emulated or Placement::Cuda).
class AnalysisModel {
 public:
  /// Upload `model` (its config checked by make_analysis_plan). Throws cf::InvalidArgument for
  /// Placement::Cpu, for Placement::Cuda in a build without CUDA, or an unsupported config.
  AnalysisModel(Placement where, const nn::Model<float>& model, Context& ctx = default_context());
  /// The same with the linear layers' GEMMs in `precision` (cf/gpu/precision.hpp; docs/gpu.md
  /// "Analysis model"): under Bf16 the matrices are rounded to bfloat16 once on the device.
  AnalysisModel(Placement where, const nn::Model<float>& model, Precision precision, Context& ctx = default_context());
  /// A Hugging Face directory's weights on the device in their stored dtype (docs/gpu.md "Weights
  /// in their stored dtype"): the GEMM matrices as stored (BF16, F16 or F32; float32 where they
  /// mix), norms and biases in float32, staged shard by shard through a pinned buffer of
  /// `staging_bytes` (a multiple of 4) and placed on the device by lib/hf's per-tensor mapping; no
  /// float32 copy of the model on the host. Every tensor is checked against config.json first
  /// (cf::InvalidArgument naming it: missing, wrong shape, another dtype).
  AnalysisModel(Placement where, const std::string& hf_dir, Context& ctx = default_context(),
                std::size_t staging_bytes = std::size_t{16} << 20);
  /// The same with the linear layers' GEMMs in `precision`: under Bf16 stored BF16 matrices are the
  /// GEMMs' operand as they are, F32 / F16 ones are rounded to bfloat16 as they are placed.
  AnalysisModel(Placement where, const std::string& hf_dir, Precision precision, Context& ctx = default_context(),
                std::size_t staging_bytes = std::size_t{16} << 20);
  ~AnalysisModel();
  AnalysisModel(const AnalysisModel&) = delete;
  AnalysisModel& operator=(const AnalysisModel&) = delete;

  /// cf::nn::forward_backward without a gradient: B sequences of T tokens, targets (< 0 = not
  /// counted); returns the mean loss over counted positions. `hooks` (may be null): on_layer
  /// receives each layer's cf::nn::LayerActivations with the probabilities of capture_heads (the
  /// other heads' left zero, as the CPU's), computed on the device, only those heads copied back;
  /// on_scores runs on the host, per (layer, head, sequence) as on the CPU, on copies of the
  /// device's scores that then return to the device (DeviceHooks::on_scores); a linearised layer
  /// (ELU+1 linear attention) has no device path (cf::InvalidArgument). `logprobs` (may be null):
  /// log p(target) per position (0 where not counted); `logits` (may be null): [B T, V].
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                 const nn::ForwardHooks* hooks = nullptr, std::vector<float>* logprobs = nullptr,
                 std::vector<float>* logits = nullptr);

  /// cf::nn::evaluate_perplexity with every window's forward pass on this model (the same windows,
  /// checks and result; `hooks` as in forward).
  nn::PerplexityResult perplexity(const std::vector<std::int32_t>& tokens, int context, int stride,
                                  const nn::ForwardHooks* hooks = nullptr);

  /// The model's configuration (lib/nn's, as cf::hf reads it for a Hugging Face directory).
  const nn::ModelConfig& config() const { return config_; }
  /// How the matrices sit on the device: float32, or the stored bf16 / f16 (bf16 under the bf16 policy).
  WeightType weight_type() const;
  /// The linear layers' GEMM policy.
  Precision precision() const;
  /// Bytes of weights the device holds (the matrices in their dtype, the rest in float32).
  std::size_t weight_bytes() const;

  struct Impl;

 private:
  nn::ModelConfig config_;
  std::unique_ptr<Impl> impl_;
};

/// "float32", "bf16" or "f16".
std::string weight_type_name(WeightType t);

/// cf::nn::capture_model with every forward pass on the device of `where`: the same checks, the
/// same capture file and summary, numbers equal to the CPU capture to float32 round-off.
/// `precision`: the device model's GEMM policy (fp32: float32 round-off; tf32 / bf16: their own).
nn::CaptureSummary capture_model(Placement where, const nn::Model<float>& model,
                                 const std::vector<std::vector<std::int32_t>>& windows, const std::string& path,
                                 const nn::CaptureOptions& options, Precision precision = Precision::Fp32);
/// The same on a model already on the device (e.g. stored-dtype weights).
nn::CaptureSummary capture_model(AnalysisModel& model, const std::vector<std::vector<std::int32_t>>& windows,
                                 const std::string& path, const nn::CaptureOptions& options);

}  // namespace cf::gpu
