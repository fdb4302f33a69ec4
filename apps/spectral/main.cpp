// spectral — routing/filtering decomposition of every attention head of a checkpoint (Routing/filtering (Jamil &
// Kapadia), docs/spec.md §3): per-head table, per-layer profile (the spectral cascade), CSV/JSON, cascade plot. Thin
// app: an options struct, setup (CLI11 declarations with validators) and run (analyse with lib/spectral, write the
// report that cf/spectral/report.hpp assembles; docs/conventions.md).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/spectral_backend.hpp"
#include "cf/model/series.hpp"
#include "cf/spectral/checkpoint.hpp"
#include "cf/spectral/model.hpp"
#include "cf/spectral/report.hpp"
#include "cf/spectral/sequence.hpp"
#include "cf/spectral/series.hpp"

using namespace cf;
using namespace cf::spectral;

namespace {

struct Options {
  std::string checkpoint, texts, level = "both", layers = "all", erank = "entropy", tokenizer = "auto";
  std::string gpt2_dir;
  int max_tokens = 1024;
  bool summary_only = false, no_eigen = false;
  std::string device = "cpu";  ///< --device cpu|cuda|auto (lib/gpu)
  app::CommonOptions common;
};

// Several checkpoints (a comma list or a glob, e.g. train --keep-every's step_*.h5): the weight-level
// cascade against the training step (cf/spectral/series.hpp).
void run_series(const Options& o, const std::vector<model::CheckpointEntry>& cks, ErankForm form,
                const SymEigenSolver* device) {
  require(o.level == "weight", "several checkpoints are analysed at the weight level: add --level weight");
  std::vector<std::pair<std::string, std::int64_t>> list;
  for (const auto& c : cks) list.emplace_back(c.path, c.step);
  AnalysisOptions aopt;
  aopt.eigenvalues = !o.no_eigen;
  const auto s = spectral_series(list, o.layers, aopt, form, device);
  output::Report rep = series_report(s);
  rep.meta = output::metadata("spectral", {{"checkpoints", o.checkpoint}, {"level", "weight"}, {"layers", o.layers}});
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(series_plot(s, form), o.common.plot);
}

// The sequence level's forward passes where --device puts them (docs/gpu.md "Analysis model"): the
// device analysis model, its score matrices copied to the host's analysis per (layer, head), or the
// CPU's forward pass for --device cpu and for --device auto on a model the device does not run (said
// on stderr). `used` receives the placement for the report's metadata.
std::function<ScoresForward(const nn::Model<float>&)> sequence_forward(gpu::Placement asked, const std::string& device,
                                                                       gpu::Placement& used) {
  return [asked, device, &used](const nn::Model<float>& model) -> ScoresForward {
    used = gpu::placement_for_model(asked, device, "spectral", model.config);
    if (used == gpu::Placement::Cpu) return {};
    auto dev = std::make_shared<gpu::AnalysisModel>(used, model);
    return [dev](const std::vector<std::int32_t>& tokens, const nn::ForwardHooks& hooks) {
      const std::vector<std::int32_t> none(tokens.size(), -1);
      dev->forward(tokens.data(), none.data(), 1, static_cast<int>(tokens.size()), &hooks);
    };
  };
}

void run(const CLI::App& app, const Options& o) {
  // the weight level's eigenproblems batched on the device; the sequence level's forward passes on
  // the device analysis model
  const gpu::Placement backend = gpu::resolve_device(o.device, "spectral", "");
  const SymEigenSolver eig = gpu::make_spectral_eigensolver(backend);  // docs/gpu.md
  const SymEigenSolver* device = eig.solve ? &eig : nullptr;           // null: the CPU path
  // Sequence-level options with --level weight would be ignored: refused instead.
  for (const char* name : {"--texts", "--tokenizer", "--gpt2-dir", "--max-tokens"})
    app::refuse_unless(app, name, o.level != "weight", "--level sequence or --level both");
  const ErankForm form = parse_erank_form(o.erank);
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  std::error_code ec;  // an existing path is one checkpoint, whatever characters its name holds
  if (o.checkpoint.find_first_of("*?[,") != std::string::npos && !std::filesystem::exists(o.checkpoint, ec)) {
    const auto cks = model::expand_checkpoints({o.checkpoint});
    if (cks.size() > 1) {
      // the series table has one row per checkpoint and layer: no per-head table to leave out
      app::refuse_in_mode(app, {"--summary-only"}, "spectral over several checkpoints (the series table)");
      return run_series(o, cks, form, device);
    }
  }
  const bool want_weight = o.level != "sequence", want_seq = o.level != "weight";
  const std::string texts_path = o.texts.empty() ? std::string(CF_DATA_DIR) + "/texts/routing_eval.txt" : o.texts;
  const AttentionWeights w = read_attention_weights(o.checkpoint);
  const std::vector<int> layers = parse_layer_spec(o.layers, w.n_layer);
  AnalysisOptions aopt;
  aopt.eigenvalues = !o.no_eigen;

  CascadeReport cr = begin_cascade_report(form, o.summary_only);
  nlohmann::json params = {{"checkpoint", o.checkpoint},
                           {"level", o.level},
                           {"layers", o.layers},
                           {"erank", o.erank},
                           {"eigenvalues", !o.no_eigen},
                           {"n_layer", w.n_layer},
                           {"n_head", w.n_head},
                           {"d_model", w.d_model},
                           {"pos", w.pos},
                           {"norm", w.norm},
                           {"device", gpu::backend_name(backend)}};
  if (want_weight)
    add_weight_level(cr, device ? analyse_weights(w, layers, aopt, *device) : analyse_weights(w, layers, aopt));
  bool seq_done = false;
  if (want_seq) {
    SequenceOptions so;
    so.texts_path = texts_path;
    so.tokenizer = o.tokenizer;
    so.gpt2_dir = o.gpt2_dir;
    so.max_tokens = o.max_tokens;
    so.analysis = aopt;
    gpu::Placement seq_where = gpu::Placement::Cpu;
    so.forward = sequence_forward(backend, o.device, seq_where);
    const SequenceAnalysis sa = analyse_sequences(o.checkpoint, layers, so);
    params["sequence_device"] = gpu::backend_name(seq_where);
    add_sequence_level(cr, sa.spectrum, sa.token_counts, sa.tokenizer);
    params["texts"] = texts_path;
    params["tokenizer"] = sa.tokenizer;
    seq_done = true;
  }
  if (want_seq && !seq_done)
    cr.report.notes.push_back("sequence level skipped: this build has no trainer forward pass (lib/nn)");
  cr.report.meta = output::metadata("spectral", params);
  app::emit(cr.report, o.common);
  if (!o.common.plot.empty()) plot::save(cr.plot, o.common.plot);
}

void setup(CLI::App& app, Options& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "Checkpoint written by `train` (HDF5, docs/checkpoint_format.md) or a Hugging Face directory "
                 "(docs/hf.md); a comma list or a quoted glob (e.g. 'run/step_*.h5' from train --keep-every) plots "
                 "the weight-level cascade against the step (with --level weight)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& s) {
            return s.find_first_of("*?[,") != std::string::npos ? std::string() : CLI::ExistingPath(s);
          },
          "PATH|LIST|GLOB"));
  app.add_option("--texts", o.texts,
                 "Text set for the sequence level, one text per non-empty line [default: data/texts/routing_eval.txt, "
                 "the six sentences of Routing/filtering (Jamil & Kapadia) App. A]");
  app.add_option("--level", o.level, "weight (W_Q W_K^T) | sequence (Q K^T / sqrt(d_k) on the texts) | both")
      ->check(CLI::IsMember({"weight", "sequence", "both"}))
      ->capture_default_str();
  app.add_option("--layers", o.layers, "Layers to analyse: all | L | A-B | A,B,C-D")->capture_default_str();
  app.add_option("--erank", o.erank, "Effective-rank form of the profile and plot: entropy | participation")
      ->check(app::member_of(spectral::kErankForms))
      ->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer,
                 "Tokenizer for --texts: auto (byte for vocab 256, gpt2 for 50257) | byte | gpt2")
      ->check(CLI::IsMember({"auto", "byte", "gpt2"}))
      ->capture_default_str();
  app.add_option("--gpt2-dir", o.gpt2_dir, "Folder of the GPT-2 vocabulary (gpt2 tokenizer) [default: lib/data's]");
  app.add_option("--max-tokens", o.max_tokens, "Truncate each text to at most this many tokens (and block_size)")
      ->check(app::integer(2, 1 << 20))
      ->capture_default_str();
  app.add_flag("--summary-only", o.summary_only, "Print the per-layer profile only (no per-head table)");
  app.add_flag("--no-eigenvalues", o.no_eigen, "Skip max Re lambda (general eigensolver)");
  gpu::add_analysis_device_option(app, o.device);
  app::add_common_options(app, o.common);
  app.footer(
      "Examples:\n"
      "  spectral --checkpoint ckpt.h5                          # weight + sequence level, six App. A texts\n"
      "  spectral --checkpoint ckpt.h5 --level weight --summary-only --plot cascade.svg\n"
      "  spectral --checkpoint ckpt.h5 --texts my_texts.txt --format csv --out heads.csv\n"
      "  spectral --checkpoint ckpt.h5 --layers 0-3 --erank participation --format json\n"
      "  spectral --checkpoint 'run/step_*.h5' --level weight --plot series.svg   # cascade over training\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (missing attention weights, layers out of range).");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "spectral: routing/filtering decomposition M = F + R of every attention head of a checkpoint "
      "(Routing/filtering (Jamil & Kapadia), docs/spec.md §3): rho, effective ranks, singular spectra, max Re lambda, "
      "per head, per layer "
      "(the spectral cascade) and per model.",
      "spectral"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
