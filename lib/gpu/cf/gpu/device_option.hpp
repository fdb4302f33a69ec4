#pragma once
// The `--device` option the GPU-capable tools share (issue 14, issue 30; docs/gpu.md):
// `train` takes cpu|cuda (add_device_option); the analysers take cpu|cuda|auto
// (add_analysis_device_option) and resolve it with resolve_device, one rule for every tool.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cf/core/validators.hpp"
#include "cf/gpu/device.hpp"

namespace cf::gpu {

/// Declare --device on `app` (default "cpu"; validated to cpu|cuda by CLI11, exit 2 otherwise).
inline CLI::Option* add_device_option(CLI::App& app, std::string& device) {
  return app.add_option("--device", device, "where to compute: cpu (the default and the oracle) or cuda (docs/gpu.md)")
      ->check(app::member_of(kDevices))
      ->capture_default_str();
}

/// Declare an analyser's --device cpu|cuda|auto (default "cpu"; anything else exits 2).
inline CLI::Option* add_analysis_device_option(CLI::App& app, std::string& device) {
  return app
      .add_option("--device", device,
                  "where to compute: cpu (the default and the oracle), cuda (the tool's device path; exit 2 "
                  "without a usable device or path; CF_GPU_EMULATE=1 runs it emulated on the CPU) or auto (cuda "
                  "when usable, else the CPU, said on stderr); docs/gpu.md")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

/// Declare a model-level analyser's --weights stored|float32 (default "stored"; docs/gpu.md "Weights
/// in their stored dtype"): how a Hugging Face directory's weights sit on the device.
inline CLI::Option* add_weights_option(CLI::App& app, std::string& weights) {
  return app
      .add_option("--weights", weights,
                  "with --device cuda|auto, a Hugging Face directory's weights on the device: stored (their "
                  "stored dtype, bf16 / f16 / f32, staged shard by shard: no float32 copy of the model on the "
                  "host) or float32 (converted on the host, then uploaded); the CPU always reads float32")
      ->check(CLI::IsMember({"stored", "float32"}))
      ->capture_default_str();
}

/// Where an analyser's work runs once --device, the machine and CF_GPU_EMULATE are read (not
/// cf::gpu::Backend, the build of a device operation: an analyser may also stay on the CPU).
enum class Placement {
  Cpu,       ///< the CPU analyser (the oracle)
  Cuda,      ///< the tool's device path on a CUDA device
  Emulated,  ///< the same device path, its emulated build on the CPU (CF_GPU_EMULATE=1; a test device)
};

/// The placements' names in reports' metadata.
inline constexpr EnumTable kPlacements{std::array{
    EnumEntry<Placement>{Placement::Cpu, "cpu"},
    EnumEntry<Placement>{Placement::Cuda, "cuda"},
    EnumEntry<Placement>{Placement::Emulated, "cuda (emulated on the CPU)"},
}};

/// Resolve an analyser's --device value ("cpu" | "cuda" | "auto") for `tool` (the name that
/// starts its stderr lines). `missing` is empty when the tool, in the mode asked for, has a device
/// path, else why not (e.g. "rollout verify has no device path yet").
///  - cpu: Placement::Cpu.
///  - cuda: Placement::Emulated when CF_GPU_EMULATE=1 and there is a path; Placement::Cuda when a
///    device is usable and there is a path; otherwise throws cf::InvalidArgument ("--device cuda:
///    <reason>; use --device cpu", exit 2).
///  - auto: Placement::Cuda when a device is usable and there is a path; otherwise Placement::Cpu after
///    one line on stderr: "<tool>: --device auto: <reason>; running on the CPU". auto never picks
///    the emulated device (CF_GPU_EMULATE applies to --device cuda only).
/// A CF_GPU_EMULATE other than unset, "", "0" or "1" is refused for cuda (cf::InvalidArgument).
Placement resolve_device(const std::string& device, const std::string& tool, const std::string& missing);

/// "cpu", "cuda" or "cuda (emulated on the CPU)", for reports' metadata.
std::string backend_name(Placement b);

/// The report's "device" of a tool that places each checkpoint's model on its own (probe, mc-eval):
/// one backend_name when all agree, else "A: cpu, B: cuda" in checkpoint order (--device auto kept
/// a model the device does not run on the CPU).
std::string placements_name(const std::vector<Placement>& used);

}  // namespace cf::gpu
