// jacobian — exact Jacobian block norms of a trained model against the runway bound of Runway (Lee & Clark)
// (Theorem 3.3; docs/spec.md §2): J_ds = ||d h_d(L+r) / d h_s(L)|| (Frobenius and spectral) beside
// B = [(I + A(L+r-1)) ... (I + A(L))]_ds from the model's head-mean attention on the same window,
// split into self term and gate; the smallest C* with J <= C*^r B, the one-layer constants C_1(l),
// the check C* <= max C_1 and exact zeros outside the mask, Spearman(J, B), tightness and the gate
// share; heat maps of measured vs bound. Thin app: an options struct, setup and run over
// cf/influence/jacobian_analysis.hpp and cf/influence/jacobian_report.hpp.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/progress.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision_option.hpp"
#include "cf/gpu/seeded_pass.hpp"
#include "cf/hf/token_input.hpp"
#include "cf/hf/token_input_options.hpp"
#include "cf/influence/capture_input.hpp"
#include "cf/influence/influence.hpp"
#include "cf/influence/jacobian_analysis.hpp"
#include "cf/influence/jacobian_report.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"

using namespace cf;

namespace {

struct Options {
  std::string checkpoint, capture;
  hf::TokenInput input;  ///< --text | --data | --tokens (or --capture), --split, --gpt2-dir
  int n = 64, window = 0, windows = 64, layer = 0, span = 0, seed_batch = 0;
  std::string device = "cpu";      ///< --device cpu|cuda|auto (lib/gpu)
  std::string precision = "fp32";  ///< --precision fp32|tf32|bf16 (the device trainer's GEMMs)
  app::CommonOptions common;
};

// Token ids of --tokens, --data or --text in the checkpoint's vocabulary (cf/hf/token_input.hpp).
std::vector<std::int32_t> load_tokens(const Options& o, const std::string& checkpoint, int vocab_size) {
  return hf::load_token_input(o.input, checkpoint, vocab_size);
}

void run(const CLI::App& app, const Options& o) {
  const gpu::Placement asked = gpu::resolve_device(o.device, "jacobian", "");  // docs/gpu.md
  gpu::resolve_analysis_precision(o.precision, asked);                         // refused on the CPU before any load
  app::refuse_unless(app, "--windows", o.capture.empty(), "--text, --data or --tokens");
  // a capture fixes the window: n = its sequence length T
  app::refuse_unless(app, "--n", o.capture.empty(), "--text, --data or --tokens (with --capture, n = T)");
  hf::check_token_input_options(app, o.input);
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  // the bound's heat map beside --plot is an output too: writable, and no input or other output
  // (--text notes_bound.svg --plot notes.svg replaced the text; issue 29), before the work
  const std::string bound_plot = o.common.plot.empty() ? "" : app::derived_path(o.common.plot, "_bound");
  app::check_outputs({{bound_plot, "--plot (its bound heat map)"}});
  const nn::Model<float> model = cf::model::load_model(o.checkpoint);
  const auto& cfg = model.config;
  require(o.layer < cfg.n_layer, "--layer = ", o.layer, " must be < n_layer = ", cfg.n_layer);
  const int r = o.span > 0 ? o.span : cfg.n_layer - o.layer;
  require(o.layer + r <= cfg.n_layer, "--layer + --span = ", o.layer + r, " exceeds n_layer = ", cfg.n_layer);
  influence::Windows w;
  if (!o.capture.empty()) {  // sequence --window of a capture of this model
    const auto cw = influence::capture_token_windows(o.capture, cfg);
    require(o.window < static_cast<int>(cw.size()), "--window = ", o.window, " but the capture holds ", cw.size(),
            " sequences");
    w.tokens = {cw[o.window]};
    w.starts = {o.window};
  } else {
    require(o.n <= cfg.block_size, "--n = ", o.n,
            " exceeds the context of the checkpoint (block_size = ", cfg.block_size, ")");
    w = influence::influence_window(load_tokens(o, o.checkpoint, cfg.vocab_size), o.n, o.window, o.windows);
  }
  const std::vector<std::int32_t>& win = w.tokens.back();
  const int n = static_cast<int>(win.size());
  // the batched vector-Jacobian products where --device puts them (docs/gpu.md "Analysers on the
  // device"); the head-mean attention A(l), one forward pass, stays on the CPU
  const gpu::Placement where = gpu::placement_for_seeded(asked, o.device, "jacobian", cfg);
  const gpu::Precision prec = gpu::resolve_analysis_precision(o.precision, where);
  nn::SeededPass<float> pass;
  if (where != gpu::Placement::Cpu)
    pass = gpu::device_seeded_pass(where, model, o.seed_batch > 0 ? std::min(o.seed_batch, cfg.d_model) : cfg.d_model,
                                   n, gpu::default_context(), prec);
  // The cost first (the README's model ran 5.5 minutes without a word): backward passes and an
  // estimate from a timed pass at the longest prefix, then a progress line with ETA (terminals)
  const influence::JacobianCost cost = influence::analysis_cost(cfg.d_model, n, r, o.seed_batch);
  if (!o.common.quiet) {
    const double t1 = influence::time_jacobian_pass(model, win, o.layer, r, o.seed_batch, pass);
    const double est = t1 * static_cast<double>(cost.token_passes) / static_cast<double>(cost.pass_tokens);
    std::cerr << "jacobian: " << output::fmt_int(cost.backward_calls) << " backward passes ("
              << output::fmt_int(cost.token_passes) << " token passes, n = " << n << ", d_model = " << cfg.d_model
              << ", " << r + (r > 1 ? 1 : 0) << " Jacobian run" << (r > 1 ? "s" : "") << "); about "
              << format_duration(est) << " (a timed pass of " << output::fmt(t1, 3) << " s)\n";
  }
  Progress progress("jacobian: token passes", cost.token_passes);  // stderr, terminals only
  const influence::JacobianAnalysis a =
      influence::analyse_jacobian(model, win, o.layer, r, o.seed_batch, 1e-4, &progress, pass);

  const nlohmann::json meta =
      output::metadata("jacobian", {{"checkpoint", o.checkpoint},
                                    {"text", o.input.text},
                                    {"data", o.input.data},
                                    {"tokens", o.input.tokens},
                                    {"n", n},
                                    {"capture", o.capture},
                                    {"window", o.window},
                                    {"windows", o.capture.empty() ? nlohmann::json(o.windows) : nlohmann::json()},
                                    {"window_start", w.starts.back()},
                                    {"layer", o.layer},
                                    {"span", r},
                                    {"seed_batch", o.seed_batch},
                                    {"device", gpu::backend_name(where)},
                                    {"precision", o.precision}});
  influence::JacobianReport jr = influence::jacobian_report(cfg, a, w.starts.back());
  jr.report.meta = meta;
  app::emit(jr.report, o.common);
  if (!o.common.plot.empty()) {
    const std::string L0 = std::to_string(o.layer), L1 = std::to_string(o.layer + r);
    const std::string layers = "d h_d(" + L1 + ") / d h_s(" + L0 + ") (" + std::to_string(r) + " layer" +
                               (r == 1 ? "" : "s") + " from layer " + L0 + ")";
    plot::save(influence::log10_lower_heatmap(a.J.frobenius, "Measured Jacobian norms ||J_ds||_F, J_ds = " + layers,
                                              "||J_ds||_F"),
               o.common.plot);
    plot::save(influence::log10_lower_heatmap(
                   a.bound.bound * std::pow(a.frobenius.c_star, r),
                   "Runway (Lee & Clark) bound C*^r B_ds, C* = " + output::fmt(a.frobenius.c_star, 4) + ", " +
                       std::to_string(r) + " layer" + (r == 1 ? "" : "s") + " from layer " + L0,
                   "C*^r B_ds"),
               bound_plot);
  }
  if (!jr.consistent)
    throw Error("jacobian: C* > max C_1 or a nonzero block outside the mask: a bug in the Jacobians or the bound");
}

void setup(CLI::App& app, Options& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "Checkpoint written by train (HDF5) or a Hugging Face directory (docs/hf.md)")
      ->required();
  hf::add_token_input_options(app, o.input, &o.capture,
                              "Capture file of this checkpoint: analyse its sequence --window (n = T)");
  app.add_option("--n", o.n, "Window length n (<= block size)")->check(CLI::Range(2, 1 << 16))->capture_default_str();
  app.add_option("--window", o.window,
                 "Which window K: window K of --windows evenly spread ones (capture's rule: the window influence "
                 "--windows W measures as its K-th); with --capture, sequence K")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--windows", o.windows, "Number W of evenly spread windows --window chooses from (not with --capture)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--layer", o.layer, "First layer L (h(L) = residual entering block L)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  // 0 is the internal "not given" value: an explicit --span 0 is refused, not read as the default
  app.add_option("--span", o.span, "Number of layers r >= 1 [default: n_layer - L]")->check(CLI::Range(1, 10000));
  app.add_option("--seed-batch", o.seed_batch,
                 "Seeds (vector-Jacobian products) per batched backward pass (0 = d_model)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  gpu::add_analysis_device_option(app, o.device);
  gpu::add_precision_option(app, o.precision, gpu::PrecisionUse::Analysis);
  app::add_common_options(app, o.common);
  app.get_option("--plot")->description(
      "Heat map of the measured Frobenius block norms to FILE.svg|png; the bound "
      "C*^r B goes to FILE_bound.svg|png");
  app.footer(
      "Examples:\n"
      "  jacobian --checkpoint run/best.h5 --text brown --n 64 --plot jac.svg\n"
      "  jacobian --checkpoint run/best.h5 --text brown --n 32 --layer 1 --span 2 --format json --out jac.json\n"
      "  jacobian --checkpoint run/best.h5 --text brown --n 64 --window 5 --windows 64   # influence's 6th window\n"
      "Exit codes: 0 ok, 1 runtime failure or a failed check (C* > max C_1, nonzero outside the mask),\n"
      "  2 invalid input (n > block size, bad layers, missing/foreign checkpoint).");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "jacobian: exact Jacobian block norms ||d h_d(L+r)/d h_s(L)|| of a trained checkpoint against the runway "
      "bound of Runway (Lee & Clark) Theorem 3.3 (C*, C_1, zeros outside the mask, Spearman, tightness, gate share).",
      "jacobian"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
