#pragma once
// Shared command-line conventions (docs/conventions.md): every tool declares its options with
// CLI11, adds the common options (--format, --out or --report, --plot, --threads, --quiet,
// --version), and runs its body through cf::app::run, which
//   - after parsing, applies the common options: the thread policy (cf/core/threads.hpp), progress
//     lines on or off (cf/core/progress.hpp), raw numbers for CSV, and checks that the report and
//     plot files can be written BEFORE any long work (exit 2 naming the option otherwise);
//   - installs the handler that removes temporaries on SIGINT/SIGTERM (cf/core/atomic_file.hpp);
//   - maps errors to exit codes: usage errors and cf::InvalidArgument -> 2, cf::Error and any
//     other exception -> 1. Apps never crash with an uncaught exception.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cf/core/output.hpp"

namespace cf::app {

/// Options every tool shares.
struct CommonOptions {
  std::string format;                 ///< "" = infer: from --out's extension (.json/.csv/.h5), else table
  std::string out;                    ///< "" or "-" = stdout; otherwise written through cf::write_file_atomic
  std::string plot;                   ///< "" = no plot; .svg or .png
  int threads = 0;                    ///< 0 = the measured default (cf::default_threads)
  bool quiet = false;                 ///< no progress lines
  std::string report_flag = "--out";  ///< name of the report option (messages)
};

/// Declare --format, the report file option and (if with_plot) --plot on `app`, plus --threads,
/// --quiet and --version (--threads / --quiet are skipped when the tool already declares them).
/// The report file option is --out, or `report_flag` (e.g. "--report") for tools whose --out is a
/// data product (prepare-data, capture; docs/conventions.md). `opt` must outlive cf::app::run.
void add_common_options(CLI::App& app, CommonOptions& opt, bool with_plot = true,
                        const std::string& report_flag = "--out");

/// Declare --version on `app`: prints "causalflow VERSION (GIT_REVISION)" and exits 0, before any
/// required option is checked. add_common_options calls it; a tool without the common options
/// (export) calls it itself, so that every tool answers --version.
void add_version_flag(CLI::App& app);

/// The output format after inference (see CommonOptions::format).
output::Format resolve_format(const CommonOptions& opt);

/// Render `report` in the resolved format to stdout or --out. A --out ending in .h5 writes the
/// report as HDF5 (output::write_report_h5: long vectors as datasets).
void emit(const output::Report& report, const CommonOptions& opt);

/// Throws cf::InvalidArgument naming `option` unless `path` can be written (cf::check_output_writable)
/// and is not a file that another option names (an input: --checkpoint X --out X would destroy the
/// checkpoint) nor another output checked before (--out X --plot X): cf/core/file_identity.hpp.
/// Call at the start of a tool's run for every output option beyond --out/--report/--plot (which
/// cf::app::run checks itself). Empty paths are skipped.
void check_output(const std::string& path, const std::string& option);
/// check_output for every file a run writes, derived names included (jacobian --plot P also writes
/// P_bound.svg, probe P_heatmap2.svg / P_model2.svg): all are checked writable first, then each
/// against every input (files, prefix files, a model folder's files and shards) and every other
/// output, so a refusal comes before anything is written. Pairs are (path, option label), e.g.
/// {"j_bound.svg", "--plot (bound heat map)"}; empty paths are skipped. `probe_writable` = false
/// skips the writability probe (files in a folder that is created later: train --out-dir).
void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs, bool probe_writable = true);

/// `path` with `suffix` inserted before its extension ("j.svg", "_bound" -> "j_bound.svg"); a name
/// without an extension gets the suffix at its end. The one rule for derived output names.
std::string derived_path(const std::string& path, const std::string& suffix);

/// The same for an output folder (train --out-dir): it must exist writable or be creatable.
void check_output_dir(const std::string& dir, const std::string& option);

/// The long option of `app` (or of a subcommand) closest to the mistyped `typed` ("--stepz",
/// "--seq_len=8", "-steps"), for "did you mean --steps?" after CLI11's "The following argument was
/// not expected" (CLI11 suggests nothing). Closest = smallest Levenshtein distance between the
/// names without their leading dashes and any "=value", accepted when at most max(1, length / 3)
/// (at most 3); otherwise the one option the typed name is a prefix of ("--check" ->
/// "--checkpoint"). "" when nothing is close or two options tie.
std::string closest_option(const CLI::App& app, const std::string& typed);

/// Parse argv with `app`, then run `body`; returns the process exit code (0, 1 or 2) after
/// printing one error line plus a hint on stderr.
int run(CLI::App& app, int argc, char** argv, const std::function<void()>& body);

}  // namespace cf::app
