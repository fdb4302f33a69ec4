// export — write a causalflow checkpoint as a Hugging Face GPT-2 directory (config.json +
// model.safetensors) that GPT2LMHeadModel.from_pretrained(DIR) loads (issue 13, docs/hf.md).
// Thin app: options, set-up, run.
#include <filesystem>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/nn/model.hpp"
#include "cf/model/load.hpp"

using namespace cf;

namespace {

struct Options {
  std::string checkpoint, to;
  bool quiet = false;
};

void run(const Options& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Both files are checked before anything is written: --to naming the Hugging Face folder being
  // exported replaced the files it was read from, and a config.json that cannot be replaced (a
  // folder, a read-only mount) failed only after model.safetensors had been overwritten.
  require(!(fs::is_directory(o.checkpoint, ec) && fs::equivalent(o.checkpoint, o.to, ec)), "--to '", o.to,
          "' is the checkpoint folder '", o.checkpoint,
          "': the export would replace the config.json and model.safetensors it reads; choose another folder");
  app::check_output_dir(o.to, "--to");
  if (fs::is_directory(o.to, ec))
    for (const char* f : {"model.safetensors", "config.json"}) app::check_output((fs::path(o.to) / f).string(), "--to");
  const nn::Model<float> model = cf::model::load_model(o.checkpoint);
  hf::export_gpt2(model, o.to);
  const auto s = [](int n) { return n == 1 ? "" : "s"; };  // "1 layer", "2 layers"
  if (!o.quiet)
    std::printf("exported %s (%d layer%s x %d, %d head%s, vocab %d) to %s/{config.json, model.safetensors}\n",
                o.checkpoint.c_str(), model.config.n_layer, s(model.config.n_layer), model.config.d_model,
                model.config.n_head, s(model.config.n_head), model.config.vocab_size, o.to.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "export: write a checkpoint (HDF5 from `train`, or a Hugging Face directory) as a Hugging Face GPT-2 "
      "directory: config.json + model.safetensors (F32, __metadata__ {\"format\": \"pt\"}). Models the "
      "gpt2 layout cannot express (RoPE/ALiBi, masked or S-D attention, RMSNorm, ...) are refused with "
      "exit 2 and nothing is written.",
      "export"};
  app.add_option("--checkpoint", o.checkpoint, "Checkpoint: HDF5 written by train, or a Hugging Face directory")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("--to", o.to,
                 "Output directory (created if missing; config.json and model.safetensors replaced "
                 "atomically)")
      ->required();
  app.add_flag("--quiet", o.quiet, "No summary line");
  app::add_version_flag(app);
  app.footer(
      "Examples:\n"
      "  export --checkpoint runs/brown/best.h5 --to hf/brown     # then GPT2LMHeadModel.from_pretrained('hf/brown')\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (missing or foreign checkpoint, architecture not\n"
      "expressible as gpt2).");
  return app::run(app, argc, argv, [&] { run(o); });
}
