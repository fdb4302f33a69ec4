// causalflow.train: train a model config on a text, a packaged corpus or prepare-data token files with
// the CPU trainer of lib/nn (cf/nn/trainer.hpp), calling a Python function after every update. The
// model config is built as the `train` tool builds it (its defaults), the run report is lib/nn's.
#include <atomic>
#include <filesystem>

#include "cf/core/dir_lock.hpp"
#include "cf/core/error.hpp"
#include "cf/core/file_identity.hpp"
#include "cf/core/list.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/train_report.hpp"
#include "cf/nn/trainer.hpp"
#include "convert.hpp"

namespace cfpy {

using namespace cf::nn;
using cf::require;

namespace {

nlohmann::json to_json_value(const py::handle& obj) {
  const std::string text = py::module_::import("json").attr("dumps")(obj).cast<std::string>();
  return nlohmann::json::parse(text);
}

}  // namespace

void bind_train(py::module_& m) {
  m.doc() =
      "Train a causal transformer with any attention schedule of the papers (full, block, swa, bridge, pbb,\n"
      "se-bridge, runway-dot, runway-bilinear, sd, linear) on the CPU, with a Python callback per update.";

  m.def(
      "config",
      [](int n_layer, int n_head, int d_model, int block_size, int vocab_size, const std::string& attn,
         const std::string& pos, const std::string& norm, int b, int w, int e, const std::string& fusion, double sd_eps,
         bool bias) {
        require(fusion == "branch" || fusion == "union", "fusion must be 'branch' or 'union' (got '", fusion, "')");
        ModelConfig mc;
        mc.vocab_size = vocab_size;
        mc.block_size = block_size;
        mc.n_layer = n_layer;
        mc.n_head = n_head;
        mc.d_model = d_model;
        mc.pos = parse_pos_kind(pos);
        mc.norm = parse_norm_kind(norm);
        mc.bias = bias;
        mc.proj_bias = true;
        LayerConfig proto;
        proto.b = b, proto.w = w, proto.e = e, proto.sd_eps = sd_eps;
        proto.fusion = fusion == "branch" ? cf::graph::Fusion::Branch : cf::graph::Fusion::Union;
        mc.layers = parse_schedule(attn, n_layer, proto);
        validate(mc);
        return from_json(to_json(mc));
      },
      py::arg("n_layer") = 4, py::arg("n_head") = 4, py::arg("d_model") = 256, py::arg("block_size") = 256,
      py::arg("vocab_size") = 256, py::arg("attn") = "full", py::arg("pos") = "learned", py::arg("norm") = "layernorm",
      py::arg("b") = 64, py::arg("w") = 64, py::arg("e") = 32, py::arg("fusion") = "branch", py::arg("sd_eps") = 0.1,
      py::arg("bias") = true,
      "A model config dict (the checkpoint's config JSON) with the `train` tool's options and defaults; attn is\n"
      "one name or a per-layer list such as 'full,swa,bridge' or 'pbb*3,full' (b, w, e: block, window and\n"
      "SE-Bridge sizes of Boundary repair (Yang)). ValueError names the violated constraint.");

  m.def(
      "train",
      [](const py::object& config, const std::string& text, const std::string& corpus, const std::string& data,
         const std::string& out_dir, std::int64_t steps, int batch, int seq_len, int accum, double lr, double min_lr,
         std::int64_t warmup, double clip, double weight_decay, std::int64_t eval_interval, int eval_batches,
         std::int64_t ckpt_interval, std::uint64_t seed, double val_fraction, bool overwrite,
         const py::object& callback) {
        require(int(!text.empty()) + int(!corpus.empty()) + int(!data.empty()) == 1,
                "give exactly one of text (a file), corpus (kjv, brown) or data (prepare-data prefix)");
        require(val_fraction > 0 && val_fraction < 1, "val_fraction must lie in (0, 1), got ", val_fraction);
        require(steps >= 1, "steps must be >= 1 (got ", steps, ")");
        ModelConfig mc = config_from_json(to_json_value(config));
        validate(mc);
        TrainConfig tc;
        tc.out_dir = out_dir;
        tc.max_steps = steps;
        tc.batch = batch;
        tc.seq_len = seq_len;
        tc.grad_accum = accum;
        tc.lr = lr;
        tc.min_lr = min_lr;
        tc.warmup = warmup;
        tc.grad_clip = clip;
        tc.adamw.weight_decay = weight_decay;
        tc.eval_interval = eval_interval;
        tc.eval_batches = eval_batches;
        tc.ckpt_interval = ckpt_interval;
        tc.seed = seed;
        require(tc.min_lr <= tc.lr, "min_lr (", tc.min_lr, ") must be <= lr (", tc.lr, ")");
        TrainData d;
        {
          py::gil_scoped_release nogil;
          d = !text.empty()     ? load_text_bytes(text, val_fraction)
              : !corpus.empty() ? load_corpus_bytes(corpus, val_fraction)
                                : load_token_files(data);
        }
        tc.data_source = d.source;
        tc.data_checksum = data_checksum(d);
        check_train_inputs(mc, tc, d);
        // the run's files never replace its input (docs/conventions.md "Output files")
        std::vector<std::string> inputs = {text};
        for (const char* ext : {".train.bin", ".val.bin", ".meta.json", ".train.mask.bin", ".val.mask.bin"})
          if (!data.empty()) inputs.push_back(data + ext);
        for (const char* f : {"last.h5", "best.h5", "log.csv", "loss.svg"})
          for (const auto& in : inputs)
            require(in.empty() || !cf::same_file(cf::file_identity(out_dir + "/" + f), cf::file_identity(in)), "'", in,
                    "' is a file train writes into out_dir '", out_dir, "': choose another out_dir");
        // an earlier run in out_dir is not replaced unless asked (as `train --overwrite`)
        for (const char* f : {"last.h5", "best.h5", "log.csv"}) {
          std::error_code ec;
          const std::string p = out_dir + "/" + f;
          require(overwrite || !std::filesystem::exists(p, ec), "out_dir '", out_dir, "' holds an earlier run (", f,
                  "): pass overwrite=True to replace it or choose another folder");
          if (std::filesystem::exists(p, ec)) check_output_path(p, "out_dir");
        }
        const cf::DirLock lock(out_dir, "out_dir", "causalflow.train");
        std::atomic<bool> stop{false};
        // Called by the trainer after every update, on this thread, with the GIL released: take it for the
        // Python callback; Ctrl-C (a pending KeyboardInterrupt) stops the run after a checkpoint.
        std::function<void(const StepInfo&)> on_step = [&](const StepInfo& s) {
          py::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) {
            PyErr_Clear();
            stop = true;
          }
          if (callback.is_none()) return;
          py::dict info;
          info["step"] = s.step;
          info["loss"] = s.loss;
          info["lr"] = s.lr;
          info["grad_norm"] = s.grad_norm;
          info["tokens_per_s"] = s.tokens_per_s;
          info["eta_s"] = s.eta_s;
          info["val_loss"] = s.val_loss;
          const py::object r = callback(info);
          if (py::isinstance<py::bool_>(r) && !r.cast<bool>()) stop = true;  // the callback returned False: stop
        };
        TrainResult r;
        {
          py::gil_scoped_release nogil;
          r = train(mc, tc, d, "", on_step, &stop, nullptr);
        }
        cf::output::Report rep = train_report(mc, tc, d, r, param_count(mc), "");
        py::dict out = from_json(rep.body);
        std::vector<std::int64_t> step;
        std::vector<double> loss, lrs, gn, val;
        for (const auto& s : r.history)
          step.push_back(s.step), loss.push_back(s.loss), lrs.push_back(s.lr), gn.push_back(s.grad_norm),
              val.push_back(s.val_loss);
        py::dict hist;
        hist["step"] = to_numpy(std::move(step));
        hist["loss"] = to_numpy(std::move(loss));
        hist["lr"] = to_numpy(std::move(lrs));
        hist["grad_norm"] = to_numpy(std::move(gn));
        hist["val_loss"] = to_numpy(std::move(val));
        out["history"] = hist;
        out["checkpoint"] = out_dir + "/last.h5";
        return out;
      },
      py::arg("config"), py::arg("text") = "", py::arg("corpus") = "", py::arg("data") = "", py::arg("out_dir") = "run",
      py::arg("steps") = 1000, py::arg("batch") = 8, py::arg("seq_len") = 256, py::arg("accum") = 1,
      py::arg("lr") = 1e-3, py::arg("min_lr") = 1e-4, py::arg("warmup") = 100, py::arg("clip") = 1.0,
      py::arg("weight_decay") = 0.1, py::arg("eval_interval") = 100, py::arg("eval_batches") = 4,
      py::arg("ckpt_interval") = 100, py::arg("seed") = 1337, py::arg("val_fraction") = 0.1,
      py::arg("overwrite") = false, py::arg("callback") = py::none(),
      "Train `config` (causalflow.train.config(...)) on one of text (a file, bytes), corpus ('kjv', 'brown') or\n"
      "data (prepare-data token files) with AdamW and a cosine schedule, writing out_dir/last.h5 and best.h5;\n"
      "the options and defaults of the `train` tool. callback(info) is called after every update with\n"
      "{'step', 'loss', 'lr', 'grad_norm', 'tokens_per_s', 'eta_s', 'val_loss' (NaN unless validated)}; it may\n"
      "return False to stop (a checkpoint is written); Ctrl-C stops the same way. Returns the body of `train\n"
      "--format json` ('steps_done', 'last_train_loss', 'best_val_loss', 'config', 'train_config', ...) plus\n"
      "'history' (arrays per update) and 'checkpoint' (the last.h5 path).");
}

}  // namespace cfpy
