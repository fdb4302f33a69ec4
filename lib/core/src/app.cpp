#include "cf/core/app.hpp"

#include <exception>
#include <iostream>
#include <new>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/version.hpp"

namespace cf::app {

void add_common_options(CLI::App& app, CommonOptions& opt, bool with_plot, const std::string& report_flag) {
  app.add_option("--format", opt.format,
                 "Output format: table | csv | json (default: from " + report_flag + "'s extension, else table)")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  app.add_option(report_flag, opt.out, "Write the report to FILE (atomically) instead of stdout");
  if (with_plot)
    app.add_option("--plot", opt.plot, "Also draw a picture to FILE.svg or FILE.png")
        ->check([](const std::string& p) {
          try {
            plot::check_plot_path(p);
          } catch (const std::exception& e) {
            return std::string(e.what());
          }
          return std::string();
        });
  app.set_version_flag("--version", std::string("causalflow ") + kVersion + " (" + kGitRevision + ")");
}

output::Format resolve_format(const CommonOptions& opt) {
  if (!opt.format.empty()) return output::parse_format(opt.format);
  auto ends = [&](const char* s) {
    std::string e(s);
    return opt.out.size() >= e.size() && opt.out.compare(opt.out.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".json")) return output::Format::Json;
  if (ends(".csv")) return output::Format::Csv;
  return output::Format::Table;
}

void emit(const output::Report& report, const CommonOptions& opt) {
  const std::string text = report.render(resolve_format(opt));
  if (opt.out.empty() || opt.out == "-") {
    std::cout << text << std::flush;
  } else {
    write_file_atomic(opt.out, text);
  }
}

int run(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  const std::string name = app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    // Every error line starts with the tool's name (docs/conventions.md), parse errors included.
    std::cerr << name << ": error: " << e.what() << "\nhint: run '" << name << " --help' for the options and examples\n";
    return 2;
  }
  try {
    body();
    return 0;
  } catch (const InvalidArgument& e) {
    std::cerr << name << ": error: " << e.what() << "\nhint: run '" << name << " --help'\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << name << ": error: out of memory (try a smaller --n or fewer layers)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace cf::app
