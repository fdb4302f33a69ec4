#pragma once
// The device model for analysis (issue 30; docs/gpu.md "Analysis model") in its two builds, one
// templated body (lib/gpu/src/analysis_model_body.hpp): DeviceAnalysisModel<Backend::Emulated> runs
// on the CPU (the body's functors and GEMMs on Thrust / OpenMP and OpenBLAS; always built, compared
// with lib/nn's forward in CI), DeviceAnalysisModel<Backend::Cuda> on a CUDA device (built when CUDA
// is on). Plain types only, safe for nvcc. The host-side entry points (plans from a cf::nn model,
// the hooks of cf::nn::ForwardHooks, capture on the device) are in cf/gpu/analysis_model.hpp.
// Pointers passed to the public members are host pointers in both builds.
#include <cstddef>
#include <cstdint>

#include "cf/gpu/analysis_plan.hpp"
#include "cf/gpu/context.hpp"

namespace cf::gpu {

/// An inference-only model resident on the device: parameters uploaded once, one B x T batch per
/// forward with explicit attention (scores by batched GEMM, ALiBi, the layer's dense branch masks,
/// softmax per branch, probabilities times values), so the probabilities of every head exist on
/// the device and only the requested ones travel to the host. The CPU oracle is
/// cf::nn::forward_backward without a gradient (tests/gpu/test_analysis_model_emu.cpp).
template <Backend Bk>
class DeviceAnalysisModel {
 public:
  /// Upload `params` (plan.total floats, the lib/nn layout). Every operation runs in `ctx`, which
  /// must outlive the model.
  DeviceAnalysisModel(Context& ctx, AnalysisPlan plan, const float* params);
  /// Zeroed weights of `plan` (plan.one_array false), filled by place() (the stored-dtype loader).
  DeviceAnalysisModel(Context& ctx, AnalysisPlan plan);
  ~DeviceAnalysisModel();
  DeviceAnalysisModel(const DeviceAnalysisModel&) = delete;
  DeviceAnalysisModel& operator=(const DeviceAnalysisModel&) = delete;
  const AnalysisPlan& plan() const;
  /// A host staging buffer of `bytes` (pinned on CUDA; the model owns it until release_staging()).
  std::uint8_t* staging(std::size_t bytes);
  void release_staging();
  /// Copy chunk.data to the device (complete when this returns: the staging buffer may be reused;
  /// on the emulated build host memory is the device's, so the chunk is read in place) and place
  /// its elements (WeightChunk).
  void place(const WeightChunk& chunk);
  /// Forward over B sequences of T tokens (tokens, targets [B T]; target < 0 = not counted;
  /// 1 <= T <= block_size): losses [B T] receives -log p(target) (0 where not counted), logits
  /// [B T, V] (null = not wanted) the next-token logits; `hooks` (null = none) the host's hooks.
  /// Returns the number of counted targets. Throws cf::InvalidArgument for tokens out of range, a
  /// bad shape or a residual stream / logits that overflow (as cf::nn::forward_backward).
  std::int64_t forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T, float* losses,
                       float* logits, const DeviceHooks* hooks);

 private:
  struct Impl;
  Impl* impl_;
};

namespace emu {
using AnalysisModel = DeviceAnalysisModel<Backend::Emulated>;
}  // namespace emu

namespace cuda {
using AnalysisModel = DeviceAnalysisModel<Backend::Cuda>;
}  // namespace cuda

}  // namespace cf::gpu
