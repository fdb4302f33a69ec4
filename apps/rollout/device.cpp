// rollout: which modes have a device path (--device cuda|auto, cf::gpu::resolve_device; issue 30,
// docs/gpu.md "What has run where").
#include <filesystem>

#include "options.hpp"

namespace cf::rollout_app {

std::string device_path_missing(const Options& o, const std::string& sub) {
  if (!sub.empty() && sub != "sweep")
    return "rollout " + sub + " has no device path yet (the default rollout and sweep have one)";
  const rollout::SourceOptions& s = o.src;
  std::error_code ec;
  const bool checkpoint = s.model_config.empty() && rollout::is_model_file(s.model) &&
                          std::filesystem::exists(s.model, ec) && rollout::is_checkpoint_file(s.model);
  if (checkpoint && !o.influence.empty())
    return "rollout --model CHECKPOINT --influence (the agreement table) has no device path yet";
  if (sub.empty() && !o.matrix.empty()) return "rollout --matrix (the full n x n rollout) has no device path yet";
  return "";
}

}  // namespace cf::rollout_app
