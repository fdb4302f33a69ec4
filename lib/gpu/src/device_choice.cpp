// --device cpu|cuda|auto for the analysers (cf/gpu/device_option.hpp) and CF_GPU_EMULATE: one
// rule for every tool, so that each refuses, falls back and emulates the same way (issue 30).
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "cf/core/error.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/device_option.hpp"

namespace cf::gpu {

// CF_GPU_EMULATE is read once, by the default context (ContextOptions::from_environment).
bool emulation_requested() { return default_context().options().emulate; }

namespace {
// Why a real device cannot run the tool here ("" when it can): no device first (the reason users
// can act on), then a tool without a device path.
std::string device_unusable(const std::string& missing) {
  const DeviceStatus s = device_status();
  if (!s.compiled || s.count == 0) return s.message;
  return missing;
}
}  // namespace

Placement resolve_device(const std::string& device, const std::string& tool, const std::string& missing) {
  if (device == "cpu") return Placement::Cpu;
  if (device == "cuda") {
    if (emulation_requested()) {
      require(missing.empty(), "--device cuda: ", missing, " (CF_GPU_EMULATE=1 emulates existing device paths only; ",
              "docs/gpu.md); use --device cpu");
      return Placement::Emulated;
    }
    const std::string why = device_unusable(missing);
    require(why.empty(), "--device cuda: ", why, "; use --device cpu");
    return Placement::Cuda;
  }
  require(device == "auto", "--device: unknown device '", device, "' (use cpu, cuda or auto)");
  const std::string why = device_unusable(missing);
  if (why.empty()) return Placement::Cuda;
  std::cerr << tool << ": --device auto: " << why << "; running on the CPU\n";
  return Placement::Cpu;
}

std::string backend_name(Placement b) { return std::string(kPlacements.name(b)); }

std::string placements_name(const std::vector<Placement>& used) {
  if (!used.empty() && std::all_of(used.begin(), used.end(), [&](Placement p) { return p == used.front(); }))
    return backend_name(used.front());
  std::string s;
  for (std::size_t m = 0; m < used.size(); ++m)
    s += (m ? ", " : "") + std::string(1, char('A' + m)) + ": " + backend_name(used[m]);
  return s;
}

}  // namespace cf::gpu
