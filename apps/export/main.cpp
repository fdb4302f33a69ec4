// export — write a causalflow checkpoint as a Hugging Face GPT-2 directory (config.json +
// model.safetensors) that GPT2LMHeadModel.from_pretrained(DIR) loads (issue 13, docs/hf.md).
// Thin app: options, set-up, run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/model.hpp"

using namespace cf;

namespace {

struct Options {
  std::string checkpoint, to;
  bool quiet = false, overwrite = false;
};

// Files of a model folder that would change how the exported folder loads or tokenises if they
// stayed beside the new weights: another model's tokenizer (a byte-vocabulary export has none)
// and an index of another model's shards.
constexpr const char* kForeignModelFiles[] = {
    "tokenizer.json", "tokenizer_config.json",       "special_tokens_map.json", "vocab.json",
    "merges.txt",     "model.safetensors.index.json"};

// --to may be missing, empty, or a folder this tool exported before (recognised by the weights'
// size and FNV-1a 64 its config.json records); anything else is a user's folder (their own
// config.json, another model), replaced only with --overwrite, as train's --out-dir (issue 29).
// Returns the foreign files to remove after the export (with --overwrite).
std::vector<std::string> check_export_folder(const Options& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(o.to, ec)) return {};
  std::vector<std::string> entries;
  for (fs::directory_iterator it(o.to, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(it->path().filename().string());
  std::sort(entries.begin(), entries.end());
  if (entries.empty()) return {};
  const bool ours = hf::is_causalflow_export(o.to);
  std::vector<std::string> foreign;
  for (const std::string& f : kForeignModelFiles)
    if (std::find(entries.begin(), entries.end(), f) != entries.end()) foreign.push_back(f);
  if (!o.overwrite && (!ours || !foreign.empty())) {
    std::string list;
    for (std::size_t i = 0; i < entries.size() && i < 4; ++i) list += (i ? ", " : "") + entries[i];
    if (entries.size() > 4) list += ", ...";
    throw InvalidArgument(
        str("--to '", o.to, "' is not empty (", list, ") and ",
            ours ? "holds files of another model beside an earlier export" : "is not an earlier export of this tool",
            ": choose a new or empty folder, or give --overwrite to replace its model (",
            "config.json, model.safetensors; a tokenizer or shard index there is removed)"));
  }
  for (const std::string& f : foreign) app::check_output((fs::path(o.to) / f).string(), "--to");
  return foreign;
}

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
    app::check_outputs({{(fs::path(o.to) / "model.safetensors").string(), "--to (model.safetensors)"},
                        {(fs::path(o.to) / "config.json").string(), "--to (config.json)"}});
  const std::vector<std::string> foreign = check_export_folder(o);
  const nn::Model<float> model = cf::model::load_model(o.checkpoint);
  hf::export_gpt2(model, o.to);
  // another model's tokenizer would tokenise text for these weights in a foreign vocabulary: with
  // --overwrite it is removed, not kept (docs/hf.md)
  for (const std::string& f : foreign) {
    fs::remove(fs::path(o.to) / f, ec);
    if (!o.quiet) std::printf("removed %s/%s (it belonged to the folder's previous model)\n", o.to.c_str(), f.c_str());
  }
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
  app.add_flag("--overwrite", o.overwrite,
               "Replace the model of a non-empty --to that is not an earlier export (its tokenizer.json and shard "
               "index are removed; docs/hf.md)");
  app.add_flag("--quiet", o.quiet, "No summary line");
  app::add_version_flag(app);
  app.footer(
      "Examples:\n"
      "  export --checkpoint runs/brown/best.h5 --to hf/brown     # then GPT2LMHeadModel.from_pretrained('hf/brown')\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (missing or foreign checkpoint, architecture not\n"
      "expressible as gpt2).");
  return app::run(app, argc, argv, [&] { run(o); });
}
