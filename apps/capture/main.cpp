// capture — record what the analysers read from a trained model (issue 4): per layer and head the
// attention probabilities, Q and K, and the residual-stream norms entering and leaving attention
// with alpha_l in both docs/spec.md §2 forms, into an HDF5 capture file (docs/checkpoint_format.md).
// Thin app: an options struct, setup and run over cf/nn/capture.hpp and cf/nn/capture_report.hpp;
// `rollout --model CAPTURE.h5` consumes the file.
#include <optional>
#include <sstream>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision_option.hpp"
#include "cf/hf/token_input.hpp"
#include "cf/hf/token_input_options.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/capture_report.hpp"
#include "cf/nn/checkpoint.hpp"

using namespace cf;

namespace {

struct Options {
  std::string checkpoint, heads = "all", out = "capture.h5";
  hf::TokenInput input;  ///< --text | --data | --tokens, --split, --gpt2-dir
  int seq_len = 0;       // 0 = min(256, block_size)
  int n_seq = 4;
  bool no_qk = false, no_probs = false;
  std::string device = "cpu";      ///< --device cpu|cuda|auto (lib/gpu)
  std::string weights = "stored";  ///< --weights stored|float32 (a Hugging Face directory on the device)
  std::string precision = "fp32";  ///< --precision fp32|tf32|bf16 (the device model's GEMMs)
  app::CommonOptions common;       // --format, --report (the report's file; --out is the capture), --plot
};

std::vector<int> parse_heads(const std::string& spec) {
  if (spec == "all") return {};
  std::vector<int> heads;
  for (const std::string& item : split_list(spec, "--heads")) {
    const std::string msg = app::integer(0, 1 << 20)(item);
    require(msg.empty(), "--heads: expected 'all' or a comma list of head indices >= 0, got '", spec, "' (", msg, ")");
    heads.push_back(std::stoi(item));
  }
  return heads;
}

void run(const CLI::App& app, const Options& o) {
  const gpu::Placement asked = gpu::resolve_device(o.device, "capture", "");  // docs/gpu.md "Analysis model"
  gpu::resolve_analysis_precision(o.precision, asked);                        // refused on the CPU before any load
  hf::check_token_input_options(app, o.input);
  // --heads selects what attn_probs and Q/K store: with neither stored it would select nothing
  app::refuse_unless(app, "--heads", !(o.no_qk && o.no_probs),
                     "attn_probs or Q/K stored (not both --no-qk and --no-probs)");
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.out, "--out");
  app::refuse_unless(app, "--weights", o.device != "cpu", "--device cuda|auto");
  // a Hugging Face directory kept in its stored dtype on the device: config.json only here, the
  // weights go shard by shard to the device below (docs/gpu.md "Weights in their stored dtype")
  const bool stored = gpu::use_stored_weights(o.weights, asked, o.checkpoint);
  std::optional<nn::Model<float>> model;
  if (!stored) model = cf::model::load_model(o.checkpoint);
  const nn::ModelConfig cfg = stored ? gpu::hf_model_config(o.checkpoint) : model->config;
  const gpu::Placement where = gpu::placement_for_model(asked, o.device, "capture", cfg);
  const gpu::Precision prec = gpu::resolve_analysis_precision(o.precision, where);
  if (where == gpu::Placement::Cpu && !model) model = cf::model::load_model(o.checkpoint);  // --device auto fell back
  const int T = o.seq_len > 0 ? o.seq_len : std::min(256, cfg.block_size);
  require(T <= cfg.block_size, "--seq-len T = ", T, " exceeds the checkpoint's block_size = ", cfg.block_size,
          " (T <= block_size)");
  std::string tokenizer;
  const std::vector<std::int32_t> tokens = hf::load_token_input(o.input, o.checkpoint, cfg.vocab_size, &tokenizer);
  const auto windows = nn::capture_windows(tokens, T, o.n_seq);
  nn::CaptureOptions co;
  co.store_probs = !o.no_probs;
  co.store_qk = !o.no_qk;
  co.heads = parse_heads(o.heads);
  co.source = !o.input.data.empty()     ? o.input.data + " (" + o.input.split + " split)"
              : !o.input.tokens.empty() ? o.input.tokens
                                        : o.input.text;
  // the size before the work: 2000 x 4096 started writing ~270 GB with no check (issue 29)
  require_space_for(o.out, nn::capture_bytes(cfg, static_cast<std::int64_t>(windows.size()), T, co),
                    str("--out '", o.out, "': the capture (", windows.size(), " sequences x ", T, " tokens, ",
                        cfg.n_layer, " layers", co.store_probs ? ", attention probabilities" : "",
                        co.store_qk ? ", q/k" : "", "; --no-probs, --no-qk or --heads make it smaller)"));
  std::string weights = "float32";
  const nn::CaptureSummary s = [&] {
    if (where == gpu::Placement::Cpu) return nn::capture_model(*model, windows, o.out, co);
    if (model) return gpu::capture_model(where, *model, windows, o.out, co, prec);
    gpu::AnalysisModel dev(where, o.checkpoint, prec);
    weights = gpu::weight_type_name(dev.weight_type());
    return gpu::capture_model(dev, windows, o.out, co);
  }();

  const int H = co.heads.empty() ? cfg.n_head : static_cast<int>(co.heads.size());
  const nlohmann::json meta = output::metadata("capture", {{"checkpoint", o.checkpoint},
                                                           {"text", o.input.text},
                                                           {"data", o.input.data},
                                                           {"split", o.input.split},
                                                           {"seq_len", T},
                                                           {"n_seq", o.n_seq},
                                                           {"heads", o.heads},
                                                           {"qk", !o.no_qk},
                                                           {"probs", !o.no_probs},
                                                           {"out", o.out},
                                                           {"tokenizer", tokenizer},
                                                           {"device", gpu::backend_name(where)},
                                                           {"weights", weights},
                                                           {"precision", o.precision}});
  nn::CaptureReportInput ri;
  ri.out = o.out;
  ri.seq_len = T;
  ri.heads_stored = H;
  ri.tokenizer = tokenizer;
  ri.input_tokens = tokens.size();
  nn::CaptureReport cr = nn::capture_report(cfg, s, ri);
  output::Report& rep = cr.report;
  rep.meta = meta;
  if (!o.common.plot.empty()) plot::save(cr.alpha_plot, o.common.plot);
  app::emit(rep, o.common);
}

void setup(CLI::App& app, Options& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "Checkpoint written by train (HDF5) or a Hugging Face directory (docs/hf.md)")
      ->required();
  hf::add_token_input_options(app, o.input);
  app.add_option("--seq-len", o.seq_len, "Tokens per sequence T (<= block size) [default: min(256, block_size)]")
      ->check(app::integer(1, 65536));
  app.add_option("--n-seq", o.n_seq, "Number of sequences N (windows spread evenly over the input)")
      ->check(app::integer(1, 100000))
      ->capture_default_str();
  app.add_option("--heads", o.heads, "Heads stored in attn_probs/q/k: all | comma list of indices (e.g. 0,3)")
      ->capture_default_str();
  app.add_flag("--no-qk", o.no_qk, "Do not store Q and K");
  app.add_flag("--no-probs", o.no_probs, "Do not store attention probabilities (rollout then needs --kernel-file)");
  app.add_option("--out", o.out, "Capture file (HDF5, written atomically)")->capture_default_str();
  gpu::add_analysis_device_option(app, o.device);
  gpu::add_weights_option(app, o.weights);
  gpu::add_precision_option(app, o.precision, gpu::PrecisionUse::Analysis);
  app::add_common_options(app, o.common, /*with_plot=*/true, "--report");
  app.get_option("--plot")->description("Plot alpha_l per layer (both forms) to FILE.svg|FILE.png");
  app.footer(
      "Examples:\n"
      "  capture --checkpoint runs/brown/best.h5 --text notes.txt --out runs/brown/capture.h5\n"
      "  capture --checkpoint runs/brown/best.h5 --data data/brown_byte --n-seq 16 --seq-len 128 --format json\n"
      "  capture --checkpoint run/last.h5 --text kjv --heads 0,1 --no-qk --plot alpha.svg\n"
      "  rollout --model runs/brown/capture.h5 --alpha measured      # measured alpha and kernels\n"
      "File layout: docs/checkpoint_format.md (\"Capture files\"); h5py: f['layer_0/attn_probs'] is [N, H, T, T].\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (missing/foreign checkpoint, input shorter than\n"
      "  T + 1 tokens, T > block size, vocabulary mismatch).");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "capture: run a trained checkpoint over text and record, per layer and head, the attention "
      "probabilities, Q, K and the residual-stream norms (alpha_l in both docs/spec.md §2 forms) into an HDF5 "
      "capture for rollout / spectral.",
      "capture"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
