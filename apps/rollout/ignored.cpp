// rollout: the options each mode ignores, refused with exit 2 naming the option and the mode
// (issue 29; docs/options.md "What each tool refuses"). A mode is the subcommand and, for the
// default rollout, the kind of --model: a preset, a model config, a capture file, a checkpoint
// (captured in-process) or a checkpoint with --influence (the agreement table of the model's own
// windows, cf/influence/agreement_table.hpp). Refusals that lib/rollout's make_source already
// states (--dataset with a config or file, --falcon-scale with a config, ...) are left to it.
#include <filesystem>

#include "cf/core/validators.hpp"
#include "options.hpp"

namespace cf::rollout_app {

void refuse_ignored(const CLI::App& app, const Options& o, const std::string& sub) {
  using app::refuse_in_mode;
  using app::refuse_unless;
  const rollout::SourceOptions& s = o.src;
  std::error_code ec;
  const bool config = !s.model_config.empty();
  const bool file_model = !config && rollout::is_model_file(s.model);
  const bool checkpoint = file_model && std::filesystem::exists(s.model, ec) && rollout::is_checkpoint_file(s.model);
  const bool preset = !config && !file_model;
  // `rollout flow --model CHECKPOINT --influence` runs the same agreement table with a flow column
  const bool agreement = (sub.empty() || sub == "flow") && checkpoint && !o.influence.empty();
  const std::string mode = sub.empty() ? "rollout" : "rollout " + sub;

  // the agreement table: the model's own windows, kernels and measured alpha
  if (agreement) {
    refuse_in_mode(app,
                   {"--matrix", "--capture-seqs", "--kernels", "--content", "--content-scale", "--slopes",
                    "--falcon-scale", "--head-weights", "--plot-scale", "--mask", "--path", "--kernel-file"},
                   "rollout --model CHECKPOINT --influence (the agreement table of the model's own windows)");
    refuse_unless(app, "--influence-target", o.influence == "auto", "--influence auto");
  } else {
    const std::string with_ck = "--model CHECKPOINT --influence (the agreement table)";
    refuse_unless(app, "--kernel-source", false, with_ck);
    refuse_unless(app, "--influence-windows", false, with_ck);
    refuse_unless(app, "--influence-target", false, with_ck + " and --influence auto");
  }
  // what only the default mode reads
  if (sub == "flow")  // flow reads --influence and plots with --plot-scale; run_flow refuses --matrix
    refuse_in_mode(app, {"--path"}, mode);  // pointing at --flow-matrix
  else if (!sub.empty())
    refuse_in_mode(app, {"--matrix", "--influence", "--path", "--plot-scale"}, mode);
  // what a subcommand's computation does not read: the alpha schedule (monotonicity and jacobian
  // look at the kernels only; dichotomy has its own --schedule / --schedule2 and the first kernel)
  if (sub == "monotonicity" || sub == "jacobian" || sub == "dichotomy")
    refuse_in_mode(app, {"--alpha", "--alpha-kind"}, mode + " (it reads the kernels, not the alpha schedule)");
  if (sub == "dichotomy")
    refuse_in_mode(app, {"--content", "--content-scale", "--dataset"},
                   mode + " (it follows the content-free kernel of the first layer)");
  // the plot's y scale of the default mode needs a plot
  if (sub.empty() || sub == "flow") refuse_unless(app, "--plot-scale", !o.common.plot.empty(), "--plot");
  // the kind of --model decides the rest: a file that does not exist is left to make_source
  // ("--model: file '...' does not exist"), not refused for an option its kind would read
  if (file_model && !std::filesystem::exists(s.model, ec)) return;
  // what only a capture or checkpoint --model reads
  if (preset || config) {
    const std::string what = "a capture or checkpoint --model (" +
                             std::string(preset ? "a preset ships its alpha schedule" : "a model config") + ")";
    refuse_unless(app, "--alpha-kind", false, what);
    refuse_unless(app, "--kernels", false, what);
  }
  if (!checkpoint) {
    const std::string what = "a checkpoint --model (captured in-process)";
    refuse_unless(app, "--capture-text", false, what);
    refuse_unless(app, "--capture-seqs", false, what);
  }
  // a kernel file brings the kernels: the ALiBi slope, head-weight and content options of presets
  // and configs would not be read (variant (c) is not defined for it)
  if (!s.kernel_file.empty() && (preset || config) && !agreement)
    refuse_in_mode(app, {"--slopes", "--falcon-scale", "--head-weights", "--content", "--content-scale"},
                   mode + " --kernel-file (the file brings the kernels)");
}

}  // namespace cf::rollout_app
