#pragma once
// rollout's options (apps/rollout): shared by main.cpp, options.cpp (their declarations) and
// ignored.cpp (the options each mode ignores, refused with exit 2; docs/options.md).
#include <CLI/CLI.hpp>
#include <string>

#include "cf/core/app.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/rollout/source.hpp"

namespace cf::rollout_app {

struct Options {
  rollout::SourceOptions src;
  std::string path = "auto", influence, matrix, plot_scale = "linear";
  std::string capture_text = "kjv";  // checkpoint models: the text captured in-process
  int capture_seqs = 4;
  // sweep
  std::string sweep_n = "64,128,...,65536";
  // --influence with a checkpoint (issue 10): measured in process (auto) or read from a file
  std::string kernel_source = "auto", influence_target = "probability";
  int influence_windows = 64;
  // jacobian
  double C = 1.0;
  long target = -1;  // -1 = n - 1
  // dichotomy
  long depth = 100000;
  std::string deep_alpha = "const:0.5", deep_alpha2 = "power:0.5,2";
  double eps = 0;
  // verify
  int seeds = 8;
  // flow (issue 34): max-flow solver and the all-targets matrix file
  std::string flow_algorithm = "layered", flow_matrix;
  std::string device = "cpu";                    ///< --device cpu|cuda|auto (lib/gpu)
  gpu::Placement backend = gpu::Placement::Cpu;  ///< --device resolved (device_path_missing)
  app::CommonOptions common;
};

/// The options of the source and of the default mode (options.cpp); --device and the common
/// options follow them (main.cpp).
void add_options(CLI::App& app, Options& o);

/// The subcommands, each with its own options (options.cpp).
struct Subcommands {
  CLI::App *sweep, *mono, *verify, *dich, *jac, *flow;
};
Subcommands add_subcommands(CLI::App& app, Options& o);

/// Refuse (exit 2, naming the option and the mode) every option the selected mode ignores:
/// `sub` is the subcommand ("" = the default rollout, "sweep", "monotonicity", "verify",
/// "dichotomy", "jacobian", "flow"). Called after parsing, before any work (ignored.cpp).
void refuse_ignored(const CLI::App& app, const Options& o, const std::string& sub);

/// Why mode `sub` (as in refuse_ignored) has no device path, "" when it has one: the default
/// rollout (its variants, --matrix, the agreement table of --model CHECKPOINT --influence), sweep,
/// monotonicity, verify and jacobian run on a device; dichotomy and flow do not, by design
/// (device.cpp; docs/gpu.md, docs/rollout.md).
std::string device_path_missing(const std::string& sub);

}  // namespace cf::rollout_app
