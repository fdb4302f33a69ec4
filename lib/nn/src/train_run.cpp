#include "cf/nn/train_run.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/core/output.hpp"
#include "cf/core/validators.hpp"

namespace cf::nn {
namespace {

using output::fmt;

std::string hms(double s) {
  if (!std::isfinite(s)) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

// Training options not given on the command line come from the resumed checkpoint; each value
// is type- and range-checked with the field named (a damaged train_config is exit 2, not a raw
// JSON exception).
void take_from_checkpoint(const OptionGiven& given, const nlohmann::json& j, TrainConfig& tc) {
  require(j.is_object(), "checkpoint train_config must be a JSON object (got ", j.type_name(), ")");
  auto integer = [&](const char* opt, const char* key, auto& field, long long lo, long long hi) {
    if (given(opt) || !j.contains(key)) return;
    const auto& v = j.at(key);
    require(v.is_number_integer() && v.template get<long long>() >= lo && v.template get<long long>() <= hi,
            "checkpoint train_config field '", key, "' must be an integer in [", lo, ", ", hi, "] (got ", v.dump(),
            ")");
    field = static_cast<std::decay_t<decltype(field)>>(v.template get<long long>());
  };
  auto real = [&](const char* opt, const char* key, double& field, double lo) {
    if (given(opt) || !j.contains(key)) return;
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
  if (!given("--seed") && j.contains("seed")) {
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
void note_other_data(const std::string& resume, const nlohmann::json& j, const TrainConfig& tc) {
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
void plan_resumed_schedule(const TrainRunOptions& o, const nlohmann::json& was, std::int64_t step,
                           const TrainConfig& tc, bool quiet) {
  const auto field = [&](const char* key, auto fallback) {
    return was.contains(key) && was.at(key).is_number() ? was.at(key).get<decltype(fallback)>() : fallback;
  };
  const std::int64_t old_steps = field("max_steps", tc.max_steps), old_warmup = field("warmup", tc.warmup);
  const double old_lr = field("lr", tc.lr), old_min = field("min_lr", tc.min_lr);
  const double before = lr_schedule(step, old_warmup, old_steps, old_lr, old_min);
  const double now = lr_schedule(step, tc.warmup, tc.max_steps, tc.lr, tc.min_lr);
  const bool replanned = old_steps != tc.max_steps;
  require(!replanned || o.replan, "--steps ", tc.max_steps, " differs from the ", old_steps,
          " steps the cosine schedule of --resume '", o.resume, "' was planned for: the learning rate at step ", step,
          " would jump from ", fmt(before, 3), " to ", fmt(now, 3), "; add --replan-schedule to re-plan it over ",
          tc.max_steps, " steps (or use --stop-after to stop early on the same schedule)");
  require(replanned || !o.replan, "--replan-schedule: --steps ", tc.max_steps,
          " is the checkpoint's own schedule length; there is nothing to re-plan (drop --replan-schedule)");
  if (quiet) return;
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

}  // namespace

bool any_layer(const ModelConfig& mc, std::initializer_list<AttnKind> kinds) {
  for (const auto& lc : mc.layers)
    for (AttnKind k : kinds)
      if (lc.attn == k) return true;
  return false;
}

ModelConfig model_from_options(const TrainRunOptions& o, int data_vocab) {
  ModelConfig mc;
  mc.vocab_size = o.vocab > 0 ? o.vocab : data_vocab;
  mc.block_size = o.block_size;
  mc.n_layer = o.n_layer;
  mc.n_head = o.n_head;
  mc.d_model = o.d_model;
  mc.pos = parse_pos_kind(o.pos);
  mc.norm = parse_norm_kind(o.norm);
  mc.bias = !o.no_bias;
  mc.proj_bias = true;
  LayerConfig proto;
  proto.b = o.b;
  proto.w = o.w;
  proto.e = o.e;
  const auto fusion = graph::kFusions.find(o.fusion);
  require(fusion.has_value(), "--fusion must be ", graph::kFusions.list(" or "), " (got '", o.fusion, "')");
  proto.fusion = *fusion;
  proto.sd_eps = o.sd_eps;
  mc.layers = parse_schedule(o.attn, o.n_layer, proto);
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

TrainConfig train_config_from_options(const TrainRunOptions& o) {
  TrainConfig tc;
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

void check_resume_model(const TrainRunOptions& o, const OptionGiven& given, const ModelConfig& ck) {
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
  agree("--pos", o.pos, pos_name(ck.pos));
  agree("--norm", o.norm, norm_name(ck.norm));
  agree("--no-bias", o.no_bias ? "(qkv bias off)" : "(qkv bias on)", ck.bias ? "(qkv bias on)" : "(qkv bias off)");
  std::string attn, b, w, e, fusion, sd, dh;
  for (int l = 0; l < ck.n_layer; ++l) {
    const auto& lc = ck.layers[static_cast<std::size_t>(l)];
    const std::string sep = l ? "," : "";
    attn += sep + attn_name(lc.attn);
    dh += sep + to_string(head_dim(ck, l));
    b += sep + to_string(lc.b), w += sep + to_string(lc.w), e += sep + to_string(lc.e);
    fusion += sep + graph::fusion_name(lc.fusion);
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
      for (const auto& lc : parse_schedule(o.attn, ck.n_layer, LayerConfig{}))
        mine += (mine.empty() ? "" : ",") + attn_name(lc.attn);
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
}

void continue_from_checkpoint(const TrainRunOptions& o, const OptionGiven& given, const Checkpoint& ck, TrainConfig& tc,
                              bool quiet) {
  take_from_checkpoint(given, ck.train_config, tc);
  note_other_data(o.resume, ck.train_config, tc);
  const std::int64_t end = tc.stop_after > 0 ? std::min(tc.stop_after, tc.max_steps) : tc.max_steps;
  require(end > ck.step, "--resume '", o.resume, "' is at step ", ck.step, " and the run ends at step ", end,
          " (--steps", tc.stop_after > 0 ? " / --stop-after" : "", "): nothing to train; give --steps > ", ck.step,
          end == tc.max_steps ? " with --replan-schedule" : "");
  plan_resumed_schedule(o, ck.train_config, ck.step, tc, quiet);
}

std::string step_line(const StepInfo& s, std::int64_t max_steps) {
  std::string line = str("step ", s.step, "/", max_steps, " | loss ", fmt(s.loss, 4));
  if (std::isfinite(s.val_loss)) line += " | val " + fmt(s.val_loss, 4);
  return line + " | lr " + fmt(s.lr, 3) + " | |g| " + fmt(s.grad_norm, 3) + " | " +
         output::fmt_int(static_cast<long long>(s.tokens_per_s)) + " tok/s | ETA " + hms(s.eta_s) + "\n";
}

}  // namespace cf::nn
