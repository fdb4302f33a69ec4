// train — the embedded CPU trainer (issue 4): small GPT-style models with any attention schedule,
// HDF5 checkpoints (docs/checkpoint_format.md), exact --resume, best-validation checkpoint, NaN/Inf
// stop, SIGINT save, progress lines, CSV log and loss plot. Thin app over cf/nn/trainer.hpp: an
// options struct, setup (CLI11 declarations with validators) and run.
#include <atomic>
#include <cmath>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/dir_lock.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision_option.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/nn/run_folder.hpp"
#include "cf/nn/train_report.hpp"
#include "cf/nn/train_run.hpp"
#include "cf/nn/trainer.hpp"
#include "options.hpp"

using namespace cf;
using output::fmt;
using output::fmt_int;
using train_app::Options;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

// Options that the chosen schedule or data source ignores are refused (exit 2), not dropped.
void refuse_ignored(const CLI::App& app, const Options& o, const nn::ModelConfig& mc) {
  using K = nn::AttnKind;
  using nn::any_layer;
  app::refuse_unless(app, "--val-fraction", o.data.empty(), "--text or --corpus (--data files carry their own split)");
  app::refuse_unless(app, "--b", any_layer(mc, {K::Block, K::Bridge, K::Pbb, K::SeBridge}),
                     "a block, bridge, pbb or se-bridge layer in --attn");
  app::refuse_unless(app, "--w", any_layer(mc, {K::Swa, K::Bridge, K::Pbb}), "a swa, bridge or pbb layer in --attn");
  app::refuse_unless(app, "--e", any_layer(mc, {K::SeBridge}), "a se-bridge layer in --attn");
  app::refuse_unless(app, "--fusion", any_layer(mc, {K::Bridge, K::Pbb, K::SeBridge}),
                     "a bridge, pbb or se-bridge layer in --attn");
  app::refuse_unless(app, "--sd-eps", any_layer(mc, {K::Sd}), "an sd layer in --attn");
}

void run(const CLI::App& app, const Options& o) {
  // --device cuda: the device trainer (docs/gpu.md "Device trainer"); CF_GPU_EMULATE=1 runs its
  // emulated build on the CPU instead (a test device: no GPU needed)
  const gpu::Device device = gpu::parse_device(o.device);
  const bool emulate = device == gpu::Device::Cuda && gpu::emulation_requested();
  if (!emulate) gpu::require_device(device, /*supported=*/true);
  app::refuse_unless(app, "--replan-schedule", !o.resume.empty(), "--resume");
  const nn::RunFolder folder{o.out_dir,
                             o.resume,
                             o.overwrite,
                             o.common.quiet,
                             {{o.common.report_flag, o.common.out}, {"--plot", o.common.plot}}};
  nn::check_run_outputs(folder);
  nn::TrainData data = !o.text.empty()     ? nn::load_text_bytes(o.text, o.val_fraction)
                       : !o.corpus.empty() ? nn::load_corpus_bytes(o.corpus, o.val_fraction)
                                           : nn::load_token_files(o.data);
  const nn::OptionGiven given = [&](const std::string& flag) { return app.get_option(flag)->count() > 0; };
  nn::TrainConfig tc = nn::train_config_from_options(o);
  tc.data_source = data.source;
  tc.data_checksum = nn::data_checksum(data);
  if (data.row_len > 0 && !given("--seq-len"))
    tc.seq_len = data.row_len - 1;  // aligned task rows (prepare-data --task)
  nn::ModelConfig used;
  std::optional<nn::Checkpoint> resumed;  // read once: checked here, trained from below
  if (o.resume.empty()) {
    used = nn::model_from_options(o, data.vocab_size);
    refuse_ignored(app, o, used);
    nn::validate(used);
  } else {
    // options not given on the command line come from the checkpoint, so a plain --resume
    // continues the original run exactly
    resumed = nn::load_checkpoint(o.resume);
    used = resumed->model.config;
    nn::check_resume_model(o, given, used);
    app::refuse_unless(app, "--val-fraction", o.data.empty(),
                       "--text or --corpus (--data files carry their own split)");
    nn::continue_from_checkpoint(o, given, *resumed, tc, o.common.quiet);
  }
  // the GEMMs' number format (docs/gpu.md "Precision policies"): recorded in train_config, so a
  // --resume continues in it or refuses another low precision
  const gpu::Precision precision = gpu::resolve_precision(o.precision, given("--precision"), device,
                                                          resumed ? &resumed->train_config : nullptr, o.common.quiet);
  tc.precision = std::string(gpu::kPrecisions.name(precision));
  require(tc.min_lr <= tc.lr, "--min-lr (", tc.min_lr, ") must be <= --lr (", tc.lr, ")");
  // the run's input checks (seq_len within block_size and the task rows, the data's vocabulary,
  // split sizes, scored validation targets) before a device is set up, the folder locked or the
  // header line printed
  nn::check_train_inputs(used, tc, data);
  std::unique_ptr<nn::UpdateBackend> backend;
  if (device == gpu::Device::Cuda) {
    const std::string why = gpu::device_train_unsupported(used);
    require(why.empty(), "--device cuda: the device trainer does not support ", why,
            " (docs/gpu.md \"Device trainer\"); use --device cpu");
    backend = gpu::make_update_backend(emulate ? gpu::TrainerBuild::Emulated : gpu::TrainerBuild::Cuda,
                                       gpu::default_context(), precision);
  }
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  // one train per folder, once every input has been checked: a second train started into a folder
  // another one is writing is refused here, before it replaces anything (the lock is released when
  // this process ends, however it ends; a folder created here and left empty is removed again)
  const DirLock lock(o.out_dir, "--out-dir", "train");
  nn::protect_earlier_run(folder, resumed ? resumed->step : 0);
  const std::int64_t nparams = nn::param_count(used);
  if (!o.common.quiet)
    std::cerr << "train: " << fmt_int(nparams) << " parameters, " << used.n_layer
              << (used.n_layer == 1 ? " layer" : " layers") << ", data " << data.source << " ("
              << fmt_int(static_cast<long long>(data.train.size())) << " train / "
              << fmt_int(static_cast<long long>(data.val.size())) << " val tokens, unigram entropy "
              << fmt(data.unigram_entropy, 4) << " nats)"
              << (backend ? str(emulate ? ", device trainer emulated on the CPU (CF_GPU_EMULATE=1)"
                                        : ", device trainer on CUDA",
                                ", ", tc.precision, " GEMMs")
                          : std::string())
              << "\n";

  std::signal(SIGINT, on_sigint);
  auto progress = [&](const nn::StepInfo& s) {
    if (!o.common.quiet && (s.step % o.log_every == 0 || std::isfinite(s.val_loss)))
      std::cerr << nn::step_line(s, tc.max_steps);
  };
  const nn::TrainResult r = resumed ? nn::train(std::move(*resumed), tc, data, progress, &g_stop, backend.get())
                                    : nn::train(used, tc, data, "", progress, &g_stop, backend.get());
  install_temp_cleanup_handlers();  // back to: remove temporaries, then die of the signal

  const plot::LinePlot lp = nn::loss_plot(r, data.unigram_entropy);
  // loss.svg is an extra nobody asked for: without gnuplot (a bare GPU machine) the run still
  // succeeds and says so; log.csv holds the same curve
  if (plot::gnuplot_available())
    plot::save(lp, o.out_dir + "/loss.svg");
  else
    std::cerr << "train: note: loss.svg not drawn (gnuplot is not installed); log.csv holds the loss curve\n";
  if (!o.common.plot.empty()) plot::save(lp, o.common.plot);
  app::emit(nn::train_report(used, tc, data, r, nparams, o.resume), o.common);
}

void setup(CLI::App& app, Options& o) {
  train_app::add_run_options(app, o);
  gpu::add_device_option(app, o.device);
  gpu::add_precision_option(app, o.precision);
  // Before the common options, which then keep it: train's step lines are a log, printed every
  // --log-every updates whether or not stderr is a terminal (unlike the other tools' progress line).
  app.add_flag("--quiet", o.common.quiet,
               "No step lines on stderr (printed every --log-every updates, also when stderr is not a terminal)");
  app::add_common_options(app, o.common);
  app.footer(
      "Examples:\n"
      "  train --corpus brown --steps 600 --out-dir runs/brown\n"
      "  train --data data/brown_byte --attn 'swa*3,full' --w 64 --pos rope --out-dir runs/swa\n"
      "  train --text corpus.txt --attn sd --norm none --sd-eps 0.1 --steps 300\n"
      "  train --corpus brown --device cuda --precision bf16 --out-dir runs/bf16   # float32 checkpoints\n"
      "  train --corpus brown --resume runs/brown/last.h5 --out-dir runs/brown --steps 1200 --replan-schedule\n"
      "      # extend run 1: the cosine is re-planned over 1200 steps\n"
      "Writes <out-dir>/last.h5 (atomic), best.h5 (best validation), log.csv and loss.svg; Ctrl-C saves last.h5.\n"
      "--resume needs the data option again (the checkpoint records only its checksum: other data is noted)\n"
      "  and continues the checkpoint's learning-rate schedule (stated on stderr); a finished run is extended\n"
      "  with a larger --steps and --replan-schedule (another --steps alone is refused).\n"
      "Options a run does not use are refused (exit 2): --b/--w/--e/--fusion/--sd-eps without a layer that reads\n"
      "  them, --val-fraction with --data, and with --resume model options that differ from the checkpoint.");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"train: train a small GPT-style model on the CPU (every attention variant of docs/spec.md §4)", "train"};
  setup(app, o);
  const int rc = app::run(app, argc, argv, [&] { run(app, o); });
  if (rc == 0 && g_stop.load()) return 130;
  return rc;
}
