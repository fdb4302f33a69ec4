// rollout: which modes have a device path (--device cuda|auto, cf::gpu::resolve_device; issue 30,
// docs/gpu.md "What has run where", docs/rollout.md "On a device").
#include "options.hpp"

namespace cf::rollout_app {

std::string device_path_missing(const std::string& sub) {
  // by design, not yet: neither has a dense part worth a device (docs/rollout.md "On a device")
  if (sub == "dichotomy")
    return "rollout dichotomy has no device path by design (it follows one row of the layer product in "
           "50-digit multi-precision arithmetic, which has no device form)";
  if (sub == "flow")
    return "rollout flow has no device path by design (its work is max-flow: augmenting-path and "
           "push-relabel searches on the sparse layered graph, which a device does not speed up)";
  return "";
}

}  // namespace cf::rollout_app
