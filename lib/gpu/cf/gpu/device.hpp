#pragma once
// Which device a tool runs on (`--device cpu|cuda`, issue 14). The CPU path is the default and
// the oracle; `cuda` needs a CUDA device at run time, and a build with CUDA (CF_ENABLE_CUDA).
#include <string>

#include "cf/core/enum_table.hpp"

namespace cf::gpu {

enum class Device { Cpu, Cuda };

/// The devices' names (train --device).
inline constexpr EnumTable kDevices{std::array{
    EnumEntry<Device>{Device::Cpu, "cpu"},
    EnumEntry<Device>{Device::Cuda, "cuda"},
}};

/// Parse "cpu" | "cuda" (case-sensitive); throws cf::InvalidArgument naming the value otherwise.
Device parse_device(const std::string& name);

/// What the CUDA runtime reports on this machine.
struct DeviceStatus {
  bool compiled = false;  ///< this build has the CUDA path (CF_ENABLE_CUDA and nvcc found)
  int count = 0;          ///< cudaGetDeviceCount (0 when the call fails)
  int error = 0;          ///< the cudaError_t of that call (35 = no driver: no GPU on this machine)
  std::string message;    ///< one line for users: what was found and why it cannot run
};
DeviceStatus device_status();

/// For `--device cuda` in a tool: throws cf::InvalidArgument (exit 2) with device_status()'s
/// message unless a device is usable, and also when the tool has no CUDA path yet (`supported`
/// false: the message says what the tool would need). The message starts with "--device cuda:";
/// cf::app::run puts the tool's name in front ("rollout: error: --device cuda: ..."). Does nothing
/// for Device::Cpu.
void require_device(Device d, bool supported);

/// Whether the environment asks `--device cuda` to run the emulated twin on the CPU instead of a
/// device (CF_GPU_EMULATE=1; a test device for CI, docs/gpu.md). Any other value than "1" or "0"
/// or unset throws cf::InvalidArgument naming the variable.
bool emulation_requested();

}  // namespace cf::gpu
