#pragma once
// Shared command-line conventions (docs/conventions.md): every tool declares its options with
// CLI11, adds the common --format/--out/--plot options, and runs its body through cf::app::run,
// which maps errors to exit codes: usage errors and cf::InvalidArgument -> 2, cf::Error and any
// other exception -> 1. Apps never crash with an uncaught exception.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "cf/core/output.hpp"

namespace cf::app {

/// Options every tool shares.
struct CommonOptions {
  std::string format;  ///< "" = infer: from --out's extension (.json/.csv), else table
  std::string out;     ///< "" = stdout; otherwise written atomically
  std::string plot;    ///< "" = no plot; .svg or .png
};

/// Declare --format, the report file option and (if with_plot) --plot on `app`, plus --version.
/// The report file option is --out, or `report_flag` (e.g. "--report") for tools whose --out is a
/// data product (prepare-data, capture; docs/conventions.md).
void add_common_options(CLI::App& app, CommonOptions& opt, bool with_plot = true,
                        const std::string& report_flag = "--out");

/// The output format after inference (see CommonOptions::format).
output::Format resolve_format(const CommonOptions& opt);

/// Render `report` in the resolved format to stdout or --out (atomic).
void emit(const output::Report& report, const CommonOptions& opt);

/// Parse argv with `app`, then run `body`; returns the process exit code (0, 1 or 2) after
/// printing one error line plus a hint on stderr.
int run(CLI::App& app, int argc, char** argv, const std::function<void()>& body);

}  // namespace cf::app
