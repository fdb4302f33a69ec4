// influence — measured influence of the input positions on the next-token prediction (Position bias (Herasimchyk et
// al.), Eq. 6; docs/spec.md §2): I_j = mean over windows of ||d p(yhat | x) / d e_j||, normalised to sum 1, from the
// model's own backward pass. One checkpoint: the profile (table / CSV / JSON, HDF5 with the per-window matrix on
// request) and its plot; several (a list or a glob, e.g. the step_*.h5 of `train --keep-every`): summary metrics
// against the training step and their plot. Thin app: an options struct, setup and run over cf/influence/influence.hpp
// and cf/influence/influence_report.hpp (docs/influence.md).
#include <cmath>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision_option.hpp"
#include "cf/gpu/seeded_pass.hpp"
#include "cf/hf/token_input.hpp"
#include "cf/hf/token_input_options.hpp"
#include "cf/influence/capture_input.hpp"
#include "cf/influence/influence.hpp"
#include "cf/influence/influence_report.hpp"
#include "cf/influence/profile_io.hpp"
#include "cf/model/load.hpp"
#include "cf/model/series.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/rollout.hpp"

using namespace cf;
using output::fmt;

namespace {

struct Options {
  std::vector<std::string> checkpoints;
  hf::TokenInput input;  ///< --text | --data | --tokens (or --capture), --split, --gpt2-dir
  std::string capture, target = "probability", h5;
  int n = 0;  // 0 = min(256, block_size)
  int windows = 64;
  int batch = 0;
  std::string device = "cpu";      ///< --device cpu|cuda|auto (lib/gpu)
  std::string precision = "fp32";  ///< --precision fp32|tf32|bf16 (the device trainer's GEMMs)
  app::CommonOptions common;
};

// Token ids of --tokens, --data or --text in the checkpoint's vocabulary (cf/hf/token_input.hpp).
std::vector<std::int32_t> load_tokens(const Options& o, const std::string& checkpoint, int vocab_size) {
  return hf::load_token_input(o.input, checkpoint, vocab_size);
}

struct Measured {
  influence::InfluenceResult r;
  influence::Windows w;
  int n = 0;
  gpu::Placement where = gpu::Placement::Cpu;  ///< where the backward passes ran
};

// The windows' seeded backward passes where --device puts them (docs/gpu.md "Analysers on the
// device"): the device trainer, or the CPU for --device cpu and for --device auto on a model the
// device trainer does not run (said on stderr).
Measured measure(const Options& o, const nn::Model<float>& model, const std::string& path, gpu::Placement asked) {
  const auto& cfg = model.config;
  const int n = o.n > 0 ? o.n : std::min(256, cfg.block_size);
  require(n <= cfg.block_size, "--n = ", n, " exceeds the context of checkpoint '", path,
          "' (block_size = ", cfg.block_size, ")");
  Measured m;
  m.n = n;
  if (!o.capture.empty()) {  // the capture's own windows (same model required); starts = sequence indices
    m.w.tokens = influence::capture_token_windows(o.capture, cfg);
    m.n = static_cast<int>(m.w.tokens[0].size());
    require(o.n == 0 || o.n == m.n, "--n = ", o.n, " differs from the capture's sequence length T = ", m.n);
    require(m.n >= 2, "the capture's sequences have T = ", m.n, " tokens; influence needs n >= 2");
    for (std::size_t i = 0; i < m.w.tokens.size(); ++i) m.w.starts.push_back(static_cast<std::int64_t>(i));
  } else {
    m.w = influence::influence_windows(load_tokens(o, path, cfg.vocab_size), n, o.windows);
  }
  m.where = gpu::placement_for_seeded(asked, o.device, "influence", cfg);
  const gpu::Precision prec = gpu::resolve_analysis_precision(o.precision, m.where);
  nn::SeededPass<float> pass;
  if (m.where != gpu::Placement::Cpu)
    pass = gpu::device_seeded_pass(m.where, model,
                                   influence::influence_batch(cfg, m.n, static_cast<int>(m.w.tokens.size()), o.batch),
                                   m.n, gpu::default_context(), prec);
  m.r = influence::measure_influence(model, m.w.tokens, influence::parse_target(o.target), o.batch, pass);
  return m;
}

void run_single(const Options& o, const std::string& path, gpu::Placement asked) {
  const nn::Model<float> model = cf::model::load_model(path);
  const Measured m = measure(o, model, path, asked);
  const auto& r = m.r;
  if (!o.h5.empty())
    influence::write_profile_h5(o.h5, r, m.w.starts, path,
                                !o.capture.empty()     ? o.capture
                                : o.input.data.empty() ? o.input.text
                                                       : o.input.data);
  influence::InfluenceReport ir = influence::influence_report(r, m.w.starts, path, o.target, o.h5);
  ir.report.meta = output::metadata("influence", {{"checkpoint", path},
                                                  {"text", o.input.text},
                                                  {"data", o.input.data},
                                                  {"tokens", o.input.tokens},
                                                  {"capture", o.capture},
                                                  {"split", o.input.split},
                                                  {"n", m.n},
                                                  {"windows", o.windows},
                                                  {"target", o.target},
                                                  {"batch", o.batch},
                                                  {"h5", o.h5},
                                                  {"device", gpu::backend_name(m.where)},
                                                  {"precision", o.precision}});
  app::emit(ir.report, o.common);
  if (!o.common.plot.empty()) plot::save(ir.plot, o.common.plot);
}

void run_series(const Options& o, const std::vector<model::CheckpointEntry>& cks, gpu::Placement asked) {
  nlohmann::json meta = output::metadata("influence", {{"checkpoints", o.checkpoints},
                                                       {"text", o.input.text},
                                                       {"data", o.input.data},
                                                       {"tokens", o.input.tokens},
                                                       {"n", o.n},
                                                       {"windows", o.windows},
                                                       {"target", o.target}});
  std::vector<Eigen::VectorXd> profiles;
  std::vector<std::string> devices;  // per checkpoint (--device auto may keep one on the CPU)
  for (const auto& ck : cks) {
    const nn::Model<float> model = cf::model::load_model(ck.path);
    const Measured m = measure(o, model, ck.path, asked);
    profiles.push_back(m.r.profile);
    devices.push_back(gpu::backend_name(m.where));
    require(profiles.back().size() == profiles.front().size(), "checkpoint '", ck.path,
            "' gives n = ", profiles.back().size(), " but '", cks.front().path, "' gives n = ", profiles.front().size(),
            " (set --n)");
  }
  influence::InfluenceReport ir = influence::influence_series_report(cks, profiles, o.target);
  meta["device"] = devices;
  meta["precision"] = o.precision;
  ir.report.meta = meta;
  app::emit(ir.report, o.common);
  if (!o.common.plot.empty()) plot::save(ir.plot, o.common.plot);
}

void run(const CLI::App& app, const Options& o) {
  const gpu::Placement asked = gpu::resolve_device(o.device, "influence", "");  // docs/gpu.md
  gpu::resolve_analysis_precision(o.precision, asked);                          // refused on the CPU before any load
  app::refuse_unless(app, "--windows", o.capture.empty(), "--text, --data or --tokens");
  hf::check_token_input_options(app, o.input);
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.h5, "--h5");  // writable, and not an input or the report (before the work)
  influence::parse_target(o.target);
  const auto cks = model::expand_checkpoints(o.checkpoints);
  if (cks.size() == 1) return run_single(o, cks[0].path, asked);
  require(o.h5.empty(), "--h5 writes one profile: give a single --checkpoint");
  run_series(o, cks, asked);
}

void setup(CLI::App& app, Options& o) {
  app.add_option("--checkpoint", o.checkpoints,
                 "Checkpoint(s) written by train: a path, a comma list, a glob (quoted, e.g. 'run/step_*.h5'), or "
                 "the option repeated; several = a series over training")
      ->required();
  hf::add_token_input_options(app, o.input, &o.capture,
                              "Capture file of this checkpoint: use its N sequences as the windows (n = T)");
  app.add_option("--n", o.n, "Window length n (2 <= n <= block size) [default: min(256, block_size)]")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--windows", o.windows, "Number of windows W (spread evenly over the input, capture's rule)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--target", o.target, "Differentiated quantity: probability (the paper) | log-probability | logit")
      ->check(app::member_of(influence::kTargets))
      ->capture_default_str();
  app.add_option("--batch", o.batch,
                 "Windows per batched backward pass (0 = all in one pass when its activations fit 2 GiB, else the most "
                 "windows that do)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--h5", o.h5,
                 "Also write an HDF5 file with the per-window matrix (/per_window [W, n], /starts, /yhat)");
  gpu::add_analysis_device_option(app, o.device);
  gpu::add_precision_option(app, o.precision, gpu::PrecisionUse::Analysis);
  app::add_common_options(app, o.common);
  app.get_option("--plot")->description(
      "Plot the profile (one checkpoint) or the metrics against step (several) to FILE.svg|FILE.png");
  app.footer(
      "Examples:\n"
      "  influence --checkpoint run/best.h5 --text brown --n 128 --windows 64 --out infl.csv --plot infl.svg\n"
      "  influence --checkpoint run/best.h5 --data data/brown_byte --target log-probability --format json --out "
      "infl.json\n"
      "  influence --checkpoint 'run/step_*.h5' --text brown --n 64 --plot over_training.svg\n"
      "  rollout --model run/best.h5 --alpha measured --influence infl.csv   # Spearman / W1 per variant\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (n > block size, n < 2, unknown target, input\n"
      "  shorter than n + 1 tokens, vocabulary mismatch, missing/foreign checkpoint).");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "influence: measured influence of each input position on the next-token prediction (Position bias (Herasimchyk "
      "et al.) Eq. 6): "
      "I_j = mean over windows of ||d p(yhat|x) / d e_j||_2, normalised to sum 1, from the model's own "
      "backward pass. Several checkpoints: metrics against the training step.",
      "influence"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
