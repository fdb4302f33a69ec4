#include "cf/core/app.hpp"

#include <glob.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <vector>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/file_identity.hpp"
#include "cf/core/model_folder.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/progress.hpp"
#include "cf/core/threads.hpp"
#include "cf/core/validators.hpp"
#include "cf/core/version.hpp"

namespace cf::app {
namespace {
CommonOptions* g_common = nullptr;  // the options of the tool being run (add_common_options)

// What the command line names, for check_output: every option value that is an existing regular
// file (an input, or an output that exists already), and the outputs checked so far. A tool that
// wrote an output over its own --checkpoint or corpus, or two outputs over each other, would
// destroy what the user saved and still exit 0 (found by a hostile-input sweep, 2026-11-27).
struct NamedFile {
  std::string option, value;
  FileIdentity id;
};
std::vector<NamedFile> g_named;    // existing files named by any option (filled after parsing)
std::vector<NamedFile> g_outputs;  // outputs passed through check_output (new names included)

// An input may also name files without naming them: a folder (a Hugging Face checkpoint's
// config.json and *.safetensors, --gpt2-dir's encoder.json) or a prefix of prepare-data files
// (--data P: P.meta.json, P.train.bin, ...). Their files count as named too, for the options that
// read them (an output folder or prefix such as --out-dir / --to is not an input).
bool output_option(const std::string& option) {
  for (const char* o : {"--out", "--report", "--plot", "--to", "--h5", "--matrix", "--export"})
    if (option.rfind(o, 0) == 0) return true;
  return false;
}
constexpr const char* kPrefixFiles[] = {".meta.json",      ".train.bin",    ".val.bin",
                                        ".train.mask.bin", ".val.mask.bin", ".items.json"};

// An option value may be a path, a comma list of paths or a quoted glob (influence --checkpoint
// 'run/step_*.h5'): each existing regular file it names (and, for an input, the files behind a
// prefix or in a model folder, above).
void note_files(const std::string& option, const std::string& value) {
  const bool input = !output_option(option);
  auto note = [&](const std::string& p) {
    const FileIdentity id = file_identity(p);
    if (id.kind == FileIdentity::Kind::File) {
      g_named.push_back({option, value, id});
    } else if (input && !p.empty()) {
      for (const char* ext : kPrefixFiles)  // a prefix of prepare-data files
        if (const FileIdentity f = file_identity(p + ext); f.kind == FileIdentity::Kind::File)
          g_named.push_back({option, value, f});
    }
    // the files a loader reads or probes in an input folder (cf/core/model_folder.hpp): shards
    // under any name, and names not yet taken (a new index.json would change what it loads as)
    if (input)
      for (const std::string& f : model_folder_inputs(p))
        if (const FileIdentity fi = file_identity(f); fi.kind != FileIdentity::Kind::None)
          g_named.push_back({option, value, fi});
  };
  note(value);
  // a value that exists as a path is that path, not a list or a pattern ('run[1].h5', 'a,b.h5'),
  // as the tools read it (cf/model/series.hpp)
  if (std::error_code ec; !value.empty() && std::filesystem::exists(value, ec)) return;
  std::vector<std::string> parts;
  for (std::size_t a = 0; a <= value.size();) {
    const std::size_t b = std::min(value.find(',', a), value.size());
    if (b > a && b - a < value.size()) parts.push_back(value.substr(a, b - a));
    a = b + 1;
  }
  if (value.find_first_of("*?[") != std::string::npos) parts.push_back(value);
  for (const auto& p : parts) {
    if (p.find_first_of("*?[") == std::string::npos) {
      note(p);
      continue;
    }
    glob_t g{};
    if (::glob(p.c_str(), 0, nullptr, &g) == 0)
      for (std::size_t i = 0; i < g.gl_pathc && i < 100000; ++i) note(g.gl_pathv[i]);
    ::globfree(&g);
  }
}

void note_command_line(CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    const std::string name = o->get_name().empty() ? std::string("argument") : o->get_name();
    for (const std::string& v : o->results()) {
      // an option typed with an empty value ("--runways ''") is a request the tool would drop
      // silently where it tests "given" as "non-empty": refused for every option that takes a value
      if (v.empty() && o->get_expected_min() > 0)
        throw InvalidArgument(str(name, ": empty value (give a value, or leave the option out)"));
      note_files(name, v);
    }
  }
  // option groups are nameless subcommands; a filter that admits all also lists unused ones
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) note_command_line(*sub);
}

// Refuses `path` (written by `option`) when it is a file another option names, or another output.
void check_distinct(const std::string& path, const std::string& option) {
  const FileIdentity id = file_identity(path);
  if (id.kind == FileIdentity::Kind::None) return;
  for (const auto* list : {&g_named, &g_outputs})
    for (const NamedFile& f : *list)
      if (f.option != option && same_file(id, f.id))
        throw InvalidArgument(str(option, " '", path, "' is the same file as ", f.option, " '", f.value,
                                  "': the run would overwrite it; choose another path"));
  g_outputs.push_back({option, path, id});
}

bool ends_with(const std::string& s, const char* e) {
  const std::string x(e);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// After parsing: the common options take effect before the tool's body runs.
void apply_common(const CommonOptions& opt) {
  configure_threads(opt.threads);
  set_progress_enabled(!opt.quiet);
  output::set_number_style(resolve_format(opt) == output::Format::Csv ? output::NumberStyle::Raw
                                                                      : output::NumberStyle::Human);
  if (!opt.out.empty()) check_output(opt.out, opt.report_flag);
  if (!opt.plot.empty()) check_output(opt.plot, "--plot");
}
}  // namespace

void add_common_options(CLI::App& app, CommonOptions& opt, bool with_plot, const std::string& report_flag) {
  opt.report_flag = report_flag;
  app.add_option("--format", opt.format,
                 "Output format: " + output::kFormats.list(" | ") + " (default: from " + report_flag +
                     "'s extension, else table)")
      ->check(member_of(output::kFormats));
  app.add_option(report_flag, opt.out,
                 "Write the report to FILE instead of stdout (atomically; '-' = stdout; .json/.csv/.h5 pick the "
                 "format)");
  if (with_plot)
    app.add_option("--plot", opt.plot, "Also draw a picture to FILE.svg or FILE.png")->check([](const std::string& p) {
      try {
        plot::check_plot_path(p);
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string();
    });
  if (!app.get_option_no_throw("--threads"))
    app.add_option("--threads", opt.threads,
                   "OpenMP and OpenBLAS threads (0 = default: the cores not busy with other work, measured at "
                   "start); results are reproducible per thread count")
        ->check(CLI::Range(0, 4096))
        ->capture_default_str();
  if (!app.get_option_no_throw("--quiet"))
    app.add_flag("--quiet", opt.quiet, "No progress lines on stderr (they appear only on a terminal anyway)");
  add_version_flag(app);
  g_common = &opt;
}

void add_version_flag(CLI::App& app) {
  app.set_version_flag("--version", std::string("causalflow ") + kVersion + " (" + kGitRevision + ")");
}

output::Format resolve_format(const CommonOptions& opt) {
  if (!opt.format.empty()) return output::parse_format(opt.format);
  if (ends_with(opt.out, ".json")) return output::Format::Json;
  if (ends_with(opt.out, ".csv")) return output::Format::Csv;
  return output::Format::Table;
}

void emit(const output::Report& report, const CommonOptions& opt) {
  if (ends_with(opt.out, ".h5") && opt.format.empty()) return output::write_report_h5(report, opt.out);
  const std::string text = report.render(resolve_format(opt));
  write_file_atomic(opt.out.empty() ? std::string("-") : opt.out, text);
}

void check_output(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  try {
    check_output_writable(path);
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {
    throw InvalidArgument(str(option, ": ", e.what()));
  }
  check_distinct(path, option);
}

void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs, bool probe_writable) {
  // every one writable first, then none the same file as an input or another output: a run that
  // fails on its third file must not have replaced the first two
  for (const auto& [path, option] : outputs) {
    if (path.empty() || !probe_writable) continue;
    try {
      check_output_writable(path);
    } catch (const Error& e) {  // a derived name is not on the command line: say whose it is
      throw InvalidArgument(str(option, ": ", e.what()));
    }
  }
  for (const auto& [path, option] : outputs)
    if (!path.empty()) check_distinct(path, option);
}

std::string derived_path(const std::string& path, const std::string& suffix) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return has_ext ? path.substr(0, dot) + suffix + path.substr(dot) : path + suffix;
}

void check_output_dir(const std::string& dir, const std::string& option) {
  try {
    check_output_dir_writable(dir);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str(option, ": ", e.what()));
  } catch (const Error& e) {
    throw InvalidArgument(str(option, ": ", e.what()));
  }
}

// A library message may already begin with the tool's name ("capture: seq_len T ..." from the
// capture functions the capture tool calls): printed once, not "capture: error: capture: ...".
static std::string without_own_name(const std::string& name, const char* what) {
  const std::string m = what, prefix = name + ": ";
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

// CLI11 2.1 converts integers with strtoll(..., 0): "010" is octal 8 and "0x10" is 16. Every
// integer option of every tool (option groups included) is held to plain decimal here, so an
// option declared with CLI::Range instead of app::integer cannot read a different number than typed.
void require_decimal_integers(CLI::App& app) {
  // the shared validators, without a description (the help keeps each option's own type text)
  CLI::Validator decimal = integer(), non_negative = unsigned_integer();
  decimal.description("");
  non_negative.description("");
  for (CLI::Option* o : app.get_options()) {
    const std::string t = o->get_type_name();  // "INT", or "INT:<validator descriptions>"
    if (t == "INT" || t.rfind("INT:", 0) == 0) o->check(decimal);
    if (t == "UINT" || t.rfind("UINT:", 0) == 0) o->check(non_negative);  // "-1" would wrap to 2^64 - 1
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_integers(*sub);
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// (long name, subcommand path that declares it: "" for the tool itself, "sweep", ...)
void long_names(const CLI::App& app, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  for (const CLI::Option* o : app.get_options())
    for (const std::string& n : o->get_lnames()) out.emplace_back(n, path);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    long_names(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
}

// The subcommand that declares `--name` when the tool itself does not ("" otherwise)
std::string owner_of(const CLI::App& app, const std::string& option) {
  std::vector<std::pair<std::string, std::string>> all;
  long_names(app, "", all);
  std::string owner;
  for (const auto& [n, path] : all)
    if ("--" + n == option) {
      if (path.empty()) return "";
      if (owner.empty()) owner = path;
    }
  return owner;
}

// "did you mean --steps?" for each mistyped option among CLI11's unexpected arguments
std::string suggestions(const CLI::App& app) {
  std::string out;
  for (const std::string& arg : app.remaining(true)) {
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9') || arg[1] == '.') continue;  // -5
    const std::string best = closest_option(app, arg);
    if (best.empty()) continue;
    const std::string typed = arg.substr(0, arg.find('='));
    const std::string owner = owner_of(app, best);  // `rollout --seeds`: an option of `rollout verify`
    const std::string of = owner.empty() ? "" : "an option of '" + app.get_name() + " " + owner + "'";
    if (!owner.empty() && best == typed)
      out += "\nhint: '" + typed + "' is " + of;
    else
      out += "\nhint: '" + typed + "': did you mean " + best + (of.empty() ? "" : " (" + of + ")") + "?";
  }
  return out;
}

}  // namespace

std::string closest_option(const CLI::App& app, const std::string& typed) {
  std::string name = typed.substr(0, typed.find('='));
  name.erase(0, name.find_first_not_of('-'));
  if (name.empty()) return "";
  std::vector<std::pair<std::string, std::string>> owned;
  long_names(app, "", owned);
  std::vector<std::string> names;
  for (const auto& p : owned) names.push_back(p.first);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const std::size_t limit = std::min<std::size_t>(3, std::max<std::size_t>(1, name.size() / 3));
  std::string best;
  std::size_t best_d = limit + 1;
  bool tie = false;
  for (const std::string& n : names) {
    const std::size_t d = edit_distance(name, n);
    if (d < best_d) {
      best = n, best_d = d, tie = false;
    } else if (d == best_d) {
      tie = true;
    }
  }
  if (!best.empty() && !tie) return "--" + best;
  if (!best.empty()) return "";
  std::string prefix_of;
  for (const std::string& n : names)
    if (n.size() > name.size() && n.compare(0, name.size(), name) == 0) {
      if (!prefix_of.empty()) return "";  // "--c": many options start with it
      prefix_of = n;
    }
  return prefix_of.empty() ? "" : "--" + prefix_of;
}

int run(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  const std::string name = app.get_name();
  install_temp_cleanup_handlers();
  require_decimal_integers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    // Every error line starts with the tool's name (docs/conventions.md), parse errors included.
    // CLI11 names a mistyped option without suggesting the one meant: the closest long option to
    // each unexpected argument (also when another error, "--checkpoint is required", came first)
    const std::string meant = suggestions(app);
    std::cerr << name << ": error: " << e.what() << meant << "\nhint: run '" << name
              << " --help' for the options and examples\n";
    return 2;
  }
  try {
    g_named.clear();
    g_outputs.clear();
    note_command_line(app);
    if (g_common) apply_common(*g_common);
    body();
    return 0;
  } catch (const InvalidArgument& e) {
    std::cerr << name << ": error: " << without_own_name(name, e.what()) << "\nhint: run '" << name << " --help'\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << name
              << ": error: out of memory: the problem's sizes (sequence length, model, batch, n) need more "
                 "memory than this machine has\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << name << ": error: " << without_own_name(name, e.what()) << "\n";
    return 1;
  }
}

}  // namespace cf::app
