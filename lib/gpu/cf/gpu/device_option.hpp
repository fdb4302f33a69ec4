#pragma once
// The `--device cpu|cuda` option every GPU-capable tool shares (issue 14; docs/gpu.md).
#include <CLI/CLI.hpp>
#include <string>

#include "cf/gpu/device.hpp"

namespace cf::gpu {

/// Declare --device on `app` (default "cpu"; validated to cpu|cuda by CLI11, exit 2 otherwise).
inline CLI::Option* add_device_option(CLI::App& app, std::string& device) {
  return app.add_option("--device", device, "where to compute: cpu (the default and the oracle) or cuda (docs/gpu.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

}  // namespace cf::gpu
