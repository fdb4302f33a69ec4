// spectral-surgery — validation perplexity with each head's interaction truncated, linearised or
// replaced at run time, against the unmodified baseline (Routing/filtering (Jamil & Kapadia) §5.1, §6, App. B;
// docs/spec.md §3); per-layer and cumulative linearisation sweeps as tables and plots. Thin app: an options struct,
// setup (CLI11 declarations with validators) and run (parse the options into a cf::spectral::SurgeryRequest, write the
// report of lib/spectral; docs/conventions.md).
#include <iostream>
#include <memory>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision_option.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/model.hpp"
#include "cf/spectral/checkpoint.hpp"
#include "cf/spectral/surgery.hpp"
#include "cf/spectral/surgery_eval.hpp"
#include "cf/spectral/surgery_report.hpp"

using namespace cf;
using namespace cf::spectral;

namespace {

struct Options {
  std::string checkpoint, data, text, component = "both", layers = "all", linear_attention, sweep = "none";
  std::string sweep_mode = "linearize", scalar = "trace", tokenizer = "auto";
  int rank = -1, context = 0, stride = 0;
  long max_tokens = 8192;
  bool linearize = false;
  std::string device = "cpu";      ///< --device cpu|cuda|auto (lib/gpu)
  std::string weights = "stored";  ///< --weights stored|float32 (a Hugging Face directory on the device)
  std::string precision = "fp32";  ///< --precision fp32|tf32|bf16 (the device model's GEMMs)
  app::CommonOptions common;
};

// Options the requested run ignores are refused (exit 2) instead of silently dropped.
void refuse_ignored(const CLI::App& app, const Options& o) {
  const bool lin_sweep = o.sweep != "none" && o.sweep_mode == "linearize";
  app::refuse_unless(app, "--component", o.rank >= 0, "--rank K");
  app::refuse_unless(app, "--scalar-filtering", o.linearize || lin_sweep,
                     "--linearize or --sweep per-layer|cumulative|both with --sweep-mode linearize");
  app::refuse_unless(app, "--sweep-mode", o.sweep != "none", "--sweep per-layer|cumulative|both");
  app::refuse_unless(app, "--tokenizer", !o.text.empty(), "--text FILE");
  app::refuse_unless(app, "--layers", o.rank >= 0 || o.linearize || o.sweep != "none",
                     "--rank, --linearize or --sweep (--linear-attention takes its own layers)");
  // the plot is the sweep's curve: refused before the work, not after it
  app::refuse_unless(app, "--plot", o.sweep != "none", "--sweep per-layer|cumulative|both (the plot is the sweep)");
  app::refuse_unless(app, "--weights", o.device != "cpu", "--device cuda|auto");
}

void run(const CLI::App& app, const Options& o) {
  const gpu::Placement asked = gpu::resolve_device(o.device, "spectral-surgery", "");  // docs/gpu.md
  gpu::resolve_analysis_precision(o.precision, asked);  // refused on the CPU before any load
  require(o.data.empty() != o.text.empty(),
          "give exactly one of --data PREFIX (token files, val split) or --text FILE");
  refuse_ignored(app, o);
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  (void)read_attention_weights(o.checkpoint);  // clear message for a checkpoint without attention weights
  const nn::Model<float> model = cf::model::load_model(o.checkpoint);
  const auto& cfg = model.config;
  const std::vector<int> layers = parse_layer_spec(o.layers, cfg.n_layer);
  std::vector<int> lin_layers;
  if (!o.linear_attention.empty()) lin_layers = parse_layer_spec(o.linear_attention, cfg.n_layer, "--linear-attention");
  PerplexitySettings ps;
  ps.context = o.context > 0 ? o.context : cfg.block_size;
  require(ps.context <= cfg.block_size, "--context must be <= block_size = ", cfg.block_size, " (got ", ps.context,
          ")");
  ps.stride = o.stride > 0 ? o.stride : std::max(1, ps.context / 2);
  require(ps.stride <= ps.context, "--stride must be <= context = ", ps.context, " (got ", ps.stride, ")");
  const bool linear_attention = !lin_layers.empty() || (o.sweep != "none" && o.sweep_mode == "linear-attention");
  const gpu::Placement where =
      gpu::placement_for_model(asked, o.device, "spectral-surgery", cfg,
                               linear_attention ? "ELU+1 linear attention (--linear-attention, --sweep-mode "
                                                  "linear-attention) has no device path"
                                                : "");
  const gpu::Precision prec = gpu::resolve_analysis_precision(o.precision, where);
  std::unique_ptr<gpu::AnalysisModel> device;  // the perplexities' forward passes (docs/gpu.md "Analysis model")
  std::string weights = "float32";
  if (where != gpu::Placement::Cpu) {
    // the host's float32 model stays loaded (the surgery's own checks read it); the device's copy of
    // a Hugging Face directory is its stored dtype (docs/gpu.md "Weights in their stored dtype")
    device = gpu::use_stored_weights(o.weights, where, o.checkpoint)
                 ? std::make_unique<gpu::AnalysisModel>(where, o.checkpoint, prec)
                 : std::make_unique<gpu::AnalysisModel>(where, model, prec);
    weights = gpu::weight_type_name(device->weight_type());
    ps.evaluate = [&device](const std::vector<std::int32_t>& t, int context, int stride, const nn::ForwardHooks* h) {
      return device->perplexity(t, context, stride, h);
    };
  }
  if (o.rank >= 0) validate_rank(cfg, layers, parse_component(o.component), o.rank, ps.context);
  require(!(o.linearize && o.rank >= 0),
          "--linearize fixes the ranks itself (top routing pair, scalar filtering): "
          "drop --rank");
  std::string source;
  const std::vector<std::int32_t> tokens =
      load_validation_tokens(o.data, o.text, o.tokenizer, cfg.vocab_size, o.max_tokens, &source, o.checkpoint);

  SurgeryRequest q;
  q.surgery.spec = SurgerySpec{parse_component(o.component), o.rank};
  q.surgery.layers = layers;
  q.surgery.linearize = o.linearize;
  q.surgery.scalar = kScalarFilterings.find(o.scalar).value();  // --scalar-filtering's validator took the table's names
  q.surgery.linear_attention = lin_layers;
  q.has_surgery = o.linearize || o.rank >= 0 || !lin_layers.empty();
  q.layers = layers;
  q.per_layer = o.sweep == "per-layer" || o.sweep == "both";
  q.cumulative = o.sweep == "cumulative" || o.sweep == "both";
  q.sweep_linear_attention = o.sweep_mode == "linear-attention";
  q.ps = ps;
  q.layers_label = o.layers;
  q.linear_attention_label = o.linear_attention;
  SurgeryOutcome out = surgery_report(model, tokens, q);
  output::Report& rep = out.report;
  const plot::LinePlot& lp = out.sweep_plot;
  rep.meta = output::metadata("spectral-surgery", {{"checkpoint", o.checkpoint},
                                                   {"tokens", source},
                                                   {"component", o.component},
                                                   {"rank", o.rank},
                                                   {"layers", o.layers},
                                                   {"linearize", o.linearize},
                                                   {"linear_attention", o.linear_attention},
                                                   {"sweep", o.sweep},
                                                   {"sweep_mode", o.sweep_mode},
                                                   {"scalar_filtering", o.scalar},
                                                   {"context", ps.context},
                                                   {"stride", ps.stride},
                                                   {"max_tokens", o.max_tokens},
                                                   {"device", gpu::backend_name(where)},
                                                   {"weights", weights},
                                                   {"precision", o.precision}});
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) {
    require(!lp.series.empty(), "--plot needs --sweep per-layer|cumulative|both");
    plot::save(lp, o.common.plot);
  }
}

void setup(CLI::App& app, Options& o) {
  app.add_option("--checkpoint", o.checkpoint, "Checkpoint written by `train` (HDF5) or a Hugging Face directory")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("--data", o.data, "Token files PREFIX (PREFIX.val.bin + PREFIX.meta.json); the val split is scored");
  app.add_option("--text", o.text, "Or a text file to tokenize and score (lines joined)");
  app.add_option("--tokenizer", o.tokenizer, "Tokenizer for --text: auto | byte | gpt2")
      ->check(CLI::IsMember({"auto", "byte", "gpt2"}))
      ->capture_default_str();
  app.add_option("--component", o.component, "Part truncated to --rank: routing | filtering | both")
      ->check(app::member_of(spectral::kComponents))
      ->capture_default_str();
  app.add_option("--rank", o.rank,
                 "Target rank k (0 removes the component; -1 = full rank, no truncation). Routing ranks are even: "
                 "the singular values of the skew part R come in equal pairs (one per rotation plane)")
      ->check(app::integer(-1, 1 << 20))
      ->capture_default_str();
  app.add_option("--layers", o.layers, "Layers the surgery / sweeps apply to: all | L | A-B | A,B,C-D")
      ->capture_default_str();
  app.add_flag("--linearize", o.linearize,
               "Linearise the layers: keep the top singular pair of R, filtering -> one "
               "scalar per head (S–D: d_i -> head mean)");
  app.add_option("--scalar-filtering", o.scalar, "Scalar of linearised filtering: trace (trace F / n) | mean-diag")
      ->check(app::member_of(kScalarFilterings))
      ->capture_default_str();
  app.add_option("--linear-attention", o.linear_attention, "Replace these layers by ELU+1 linear attention: A-B | A,B");
  app.add_option("--sweep", o.sweep, "Sweeps over --layers: none | per-layer | cumulative | both")
      ->check(CLI::IsMember({"none", "per-layer", "cumulative", "both"}))
      ->capture_default_str();
  app.add_option("--sweep-mode", o.sweep_mode, "What a sweep does to a layer: linearize | linear-attention")
      ->check(CLI::IsMember({"linearize", "linear-attention"}))
      ->capture_default_str();
  app.add_option("--context", o.context, "Perplexity window length [default: block_size]")
      ->check(app::integer(2, 1 << 20));
  app.add_option("--stride", o.stride, "Window stride [default: context / 2]")->check(app::integer(1, 1 << 20));
  app.add_option("--max-tokens", o.max_tokens, "Score at most this many validation tokens")
      ->check(app::integer(2, 1LL << 40))
      ->capture_default_str();
  gpu::add_analysis_device_option(app, o.device);
  gpu::add_weights_option(app, o.weights);
  gpu::add_precision_option(app, o.precision, gpu::PrecisionUse::Analysis);
  app::add_common_options(app, o.common);
  app.footer(
      "Examples:\n"
      "  spectral-surgery --checkpoint ckpt.h5 --data data/tiny --component routing --rank 0     # remove routing\n"
      "  spectral-surgery --checkpoint ckpt.h5 --data data/tiny --component filtering --rank 4 --layers 0-3\n"
      "  spectral-surgery --checkpoint ckpt.h5 --data data/tiny --linearize --layers 0-2\n"
      "  spectral-surgery --checkpoint ckpt.h5 --data data/tiny --sweep both --plot lin.svg\n"
      "  spectral-surgery --checkpoint ckpt.h5 --text notes.txt --linear-attention 0-1\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (rank larger than possible, layers out of range).");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "spectral-surgery: validation perplexity with attention interactions truncated (routing / filtering "
      "to rank k), linearised (top routing pair + one filtering scalar per head) or replaced by ELU+1 linear "
      "attention at run time, against the unmodified baseline (Routing/filtering (Jamil & Kapadia) §5.1, §6, App. B; "
      "docs/spec.md §3).",
      "spectral-surgery"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
