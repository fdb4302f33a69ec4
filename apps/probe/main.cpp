// probe — evaluate trained checkpoints on task files (issue 11): K-way boundary copy against the
// coverage bound of the model's own mask schedule, passkey retrieval over length x depth, candidate
// ranking per family, and paired statistics of two checkpoints (McNemar, bootstrap). Thin app over
// cf/probe/report.hpp; docs/probe.md.
#include <limits>
#include <memory>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision_option.hpp"
#include "cf/probe/report.hpp"

using namespace cf;

namespace {

// Each checkpoint's forward passes where --device puts them (docs/gpu.md "Analysis model"): the
// device analysis model's logits through the CPU's softmax, or the CPU's forward pass for --device
// cpu and for --device auto on a model the device does not run (said on stderr). A Hugging Face
// directory goes to the device in its stored dtype with --weights stored (the host's float32 model
// stays loaded for the task's own checks). The checkpoints arrive in command-line order; `used`
// collects each one's placement and `weights` its device weights for the report's metadata.
probe::MakeForward device_forward(gpu::Placement asked, const std::string& device, const std::string& weights_opt,
                                  const std::string& precision, const std::vector<std::string>& paths,
                                  std::vector<gpu::Placement>& used, std::vector<std::string>& weights) {
  return [asked, device, weights_opt, precision, paths, &used,
          &weights](const nn::Model<float>& model) -> probe::ProbsForward {
    const gpu::Placement where = gpu::placement_for_model(asked, device, "probe", model.config);
    const gpu::Precision prec = gpu::resolve_analysis_precision(precision, where);
    const std::string& path = paths.at(used.size());
    used.push_back(where);
    if (where == gpu::Placement::Cpu) {
      weights.push_back("float32");
      return probe::cpu_probs_forward(model);
    }
    auto dev = gpu::use_stored_weights(weights_opt, where, path)
                   ? std::make_shared<gpu::AnalysisModel>(where, path, prec)
                   : std::make_shared<gpu::AnalysisModel>(where, model, prec);
    weights.push_back(gpu::weight_type_name(dev->weight_type()));
    return probe::probs_from_logits(
        [dev](const std::int32_t* tokens, int B, int T, std::vector<float>& logits) {
          const std::vector<std::int32_t> none(static_cast<std::size_t>(B) * T, -1);
          dev->forward(tokens, none.data(), B, T, nullptr, nullptr, &logits);
        },
        model.config.vocab_size);
  };
}

}  // namespace

int main(int argc, char** argv) {
  probe::ProbeOptions o;
  app::CommonOptions common;
  CLI::App app{"probe: evaluate one or two checkpoints on a task file (prepare-data --task) and compare them", "probe"};
  app.add_option("task", o.task, "boundary-copy | passkey | ranking")
      ->required()
      ->check(CLI::IsMember({"boundary-copy", "passkey", "ranking"}));
  app.add_option("--data", o.data, "task file prefix written by prepare-data --task (validation rows are scored)")
      ->required();
  app.add_option("--checkpoint", o.checkpoints,
                 "checkpoint (train's last.h5/best.h5); give two for a paired comparison")
      ->required()
      ->expected(1, 2);
  app.add_option("--alpha", o.alpha,
                 "family-wise level of the 'accuracy above the bound' test (Bonferroni over phases)")
      ->check(app::finite())
      ->capture_default_str();
  app.add_option("--batch", o.batch, "rows per forward pass")->check(app::integer(1, 65536))->capture_default_str();
  app.add_option("--max-rows", o.max_rows, "evaluate only the first N validation rows (0 = all)")
      ->check(app::integer(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--resamples", o.resamples, "paired bootstrap resamples")
      ->check(app::integer(1, 10000000))
      ->capture_default_str();
  app.add_option("--level", o.level, "paired bootstrap interval level")->check(app::finite())->capture_default_str();
  app.add_option("--bootstrap-seed", o.boot_seed, "paired bootstrap seed")
      ->check(app::unsigned_integer())
      ->capture_default_str();
  app.add_option("--max-new", o.max_new, "passkey: tokens decoded greedily")
      ->check(app::integer(1, 64))
      ->capture_default_str();
  app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
  std::string device = "cpu", weights_opt = "stored", precision = "fp32";
  gpu::add_analysis_device_option(app, device);
  gpu::add_weights_option(app, weights_opt);
  gpu::add_precision_option(app, precision, gpu::PrecisionUse::Analysis);
  app::add_common_options(app, common);
  app.footer(
      "Examples:\n"
      "  prepare-data --task boundary-copy --K 4 --b 4 --seq-len 32 --out bc\n"
      "  train --data bc --attn block --b 4 --n-layer 2 --d-model 32 --block-size 32 --out-dir runs/block\n"
      "  probe boundary-copy --data bc --checkpoint runs/block/last.h5 --plot bc.svg\n"
      "  probe boundary-copy --data bc --checkpoint runs/block/last.h5 --checkpoint runs/se/last.h5 --out cmp.json\n"
      "  probe passkey --data pk --checkpoint a.h5 --checkpoint b.h5 --plot pk.svg\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (task K < 2, context above the model's block size,\n"
      "unreadable checkpoint, two checkpoints with different vocabularies for a paired test).");
  return app::run(app, argc, argv, [&] {
    const gpu::Placement asked = gpu::resolve_device(device, "probe", "");  // docs/gpu.md
    gpu::resolve_analysis_precision(precision, asked);                      // refused on the CPU before any load
    // a bad value first, then an option the task or the number of checkpoints leaves unread
    probe::check_probe_options(o);
    app::refuse_unless(app, "--alpha", o.task == "boundary-copy", "probe boundary-copy (its bound test)");
    app::refuse_unless(app, "--max-new", o.task == "passkey", "probe passkey (greedy decoding)");
    for (const char* paired : {"--resamples", "--level", "--bootstrap-seed"})
      app::refuse_unless(app, paired, o.checkpoints.size() == 2, "two --checkpoint (the paired bootstrap)");
    o.plot = common.plot;
    app::refuse_unless(app, "--weights", device != "cpu", "--device cuda|auto");
    std::vector<gpu::Placement> used;
    std::vector<std::string> weights;
    o.forward = device_forward(asked, device, weights_opt, precision, o.checkpoints, used, weights);
    output::Report r = probe::run_probe(o);
    r.meta["device"] = gpu::placements_name(used);
    r.meta["weights"] = weights;
    r.meta["precision"] = precision;
    app::emit(r, common);
  });
}
