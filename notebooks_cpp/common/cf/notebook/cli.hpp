#pragma once
// The shared command line of the notebooks that train models (Runway (Lee & Clark) passkey and Jacobian,
// Boundary repair (Yang) probes, Position bias (Herasimchyk et al.) influence): one parser instead of five hand-written
// argv loops, so every notebook answers --help with exit 0, refuses unknown options and bad numbers with exit 2
// (docs/conventions.md), and sets its threads the way the tools do (cf::configure_threads).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "cf/core/app.hpp"
#include "cf/core/threads.hpp"
#include "cf/data/corpus.hpp"

namespace cf::notebook {

/// What every training notebook is told on its command line.
struct Options {
  std::string mode = "quick";  ///< quick (CI: small models, minutes) | full (the documented runs)
  std::string out;             ///< output folder (created)
  int threads = 0;             ///< 0 = the measured default of the tools (cf::default_threads)
  bool full() const { return mode == "full"; }
};

/// Options one notebook adds to the shared ones (the passkey notebook's --device, --precision):
/// `declare` puts them on the parser (their values land where the notebook's lambda says); `check`
/// (may be empty) reads them once parsed, before the output folder is created, so a refused value
/// (cf::InvalidArgument, exit 2) writes nothing.
struct ExtraOptions {
  std::function<void(CLI::App&)> declare;
  std::function<void()> check;
};

/// Parse `--mode quick|full` (alias `--full`), `--out DIR` (alias `--out-dir`), `--threads N` and
/// the notebook's `extra` options, create the output folder, line-buffer stdout, then return
/// body(options): the notebook's own exit code (0 pass, 1 a failed check, 77 skipped). Parse errors
/// and cf::InvalidArgument exit 2.
inline int run(int argc, char** argv, const std::string& name, const std::string& description,
               const std::string& default_out, const std::function<int(const Options&)>& body,
               const ExtraOptions& extra = {}) {
  Options o;
  o.out = default_out;
  CLI::App app{description, name};
  bool full_flag = false;
  app.add_option("--mode", o.mode, "quick (CI) or full (the documented runs)")
      ->check(CLI::IsMember({"quick", "full"}))
      ->capture_default_str();
  app.add_flag("--full", full_flag, "the same as --mode full");
  app.add_option("--out,--out-dir", o.out, "output folder (created if missing)")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (0 = the tools' measured default)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  if (extra.declare) extra.declare(app);
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] {
    if (full_flag) o.mode = "full";
    configure_threads(o.threads);
    if (extra.check) extra.check();
    cf::app::check_output_dir(o.out, "--out");
    std::filesystem::create_directories(o.out);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen
    rc = body(o);
  });
  return code != 0 ? code : rc;
}

/// The Brown corpus text of the probe notebooks: the whole corpus (full) or its first 20 files
/// (quick), cut to at most 1,000,000 bytes; nullopt (after printing SKIP) when it is not available.
inline std::optional<std::string> brown_text(bool full) {
  std::string text;
  try {
    text = full ? data::load_corpus("brown") : data::brown_text("", 20);
  } catch (const std::exception& e) {
    std::printf("SKIP: Brown corpus not available (%s)\n", e.what());
    return std::nullopt;
  }
  text.resize(std::min<std::size_t>(text.size(), 1000000));
  return text;
}

}  // namespace cf::notebook
