#include "cf/nn/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/output.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/task_file.hpp"
#include "cf/data/token_file.hpp"
#include "cf/nn/gemm_backend.hpp"
#include "cf/nn/model.hpp"

namespace cf::nn {

namespace {

double unigram_entropy(const std::vector<std::int32_t>& t, int V) {
  std::vector<double> c(static_cast<std::size_t>(V), 0.0);
  for (auto x : t) c[x] += 1;
  double h = 0;
  for (double x : c)
    if (x > 0) h -= x / t.size() * std::log(x / t.size());
  return h;
}

// Deterministic batch: sequence b of micro-batch k of update `step` starts at a position drawn
// from an engine seeded by (seed, step, k): no state to save for an exact resume.
void sample_batch(const std::vector<std::int32_t>& src, int B, int Tn, std::uint64_t seed, std::int64_t step, int k,
                  std::vector<std::int32_t>& x, std::vector<std::int32_t>& y) {
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32),
                    static_cast<std::uint32_t>(k)};
  std::mt19937_64 rng(seq);
  const std::uint64_t span = src.size() - static_cast<std::size_t>(Tn);  // start in [0, span)
  x.resize(static_cast<std::size_t>(B) * Tn);
  y.resize(x.size());
  for (int b = 0; b < B; ++b) {
    const std::uint64_t s = rng() % span;
    for (int t = 0; t < Tn; ++t) {
      x[b * Tn + t] = src[s + t];
      y[b * Tn + t] = src[s + t + 1];
    }
  }
}

// Aligned task data: sequence b of micro-batch k of update `step` is a whole row drawn from an
// engine seeded by (seed, step, k); targets outside the loss mask are -1 (not counted).
void sample_rows(const std::vector<std::int32_t>& src, const std::vector<std::uint8_t>& mask, int row_len, int B,
                 int Tn, std::uint64_t seed, std::int64_t step, int k, std::vector<std::int32_t>& x,
                 std::vector<std::int32_t>& y) {
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32),
                    static_cast<std::uint32_t>(k)};
  std::mt19937_64 rng(seq);
  const std::uint64_t rows = src.size() / static_cast<std::size_t>(row_len);
  x.resize(static_cast<std::size_t>(B) * Tn);
  y.resize(x.size());
  for (int b = 0; b < B; ++b) {
    const std::size_t s = static_cast<std::size_t>(rng() % rows) * static_cast<std::size_t>(row_len);
    for (int t = 0; t < Tn; ++t) {
      x[b * Tn + t] = src[s + t];
      y[b * Tn + t] = mask[s + t + 1] ? src[s + t + 1] : -1;
    }
  }
}

void write_log(const std::string& path, const std::vector<StepInfo>& h) {
  std::ostringstream os;
  os << "step,loss,val_loss,lr,grad_norm,tokens_per_s\n";
  using output::fmt_exact;  // full precision: a resumed run reads these back
  for (const auto& s : h) {
    os << s.step << ',' << fmt_exact(s.loss) << ',';
    if (std::isfinite(s.val_loss)) os << fmt_exact(s.val_loss);
    os << ',' << fmt_exact(s.lr) << ',' << fmt_exact(s.grad_norm) << ',' << fmt_exact(s.tokens_per_s) << '\n';
  }
  write_file_atomic(path, os.str());
}

std::vector<StepInfo> read_log(const std::string& path, std::int64_t upto) {
  std::vector<StepInfo> h;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return h;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string f[6];
    for (auto& x : f) std::getline(ss, x, ',');
    StepInfo s;
    try {
      s.step = std::stoll(f[0]);
      s.loss = std::stod(f[1]);
      s.val_loss = f[2].empty() ? std::nan("") : std::stod(f[2]);
      s.lr = std::stod(f[3]);
      s.grad_norm = std::stod(f[4]);
      s.tokens_per_s = std::stod(f[5]);
    } catch (const std::exception&) {
      continue;
    }
    if (s.step <= upto) h.push_back(s);
  }
  return h;
}

}  // namespace

TrainData bytes_from_text(const std::string& text, const std::string& source, double val_fraction) {
  require(val_fraction > 0 && val_fraction < 1, "val_fraction must be in (0, 1) (got ", val_fraction, ")");
  require(!text.empty(), "corpus '", source, "' is empty (an empty corpus cannot be trained on)");
  TrainData d;
  d.vocab_size = 256;
  d.source = source;
  const std::size_t nval = static_cast<std::size_t>(std::llround(val_fraction * text.size()));
  require(nval >= 2 && text.size() - nval >= 2, "corpus '", source, "' has ", text.size(),
          " bytes: too short for a train/validation split with val_fraction ", val_fraction);
  for (std::size_t i = 0; i < text.size(); ++i)
    (i < text.size() - nval ? d.train : d.val).push_back(static_cast<unsigned char>(text[i]));
  d.unigram_entropy = unigram_entropy(d.train, 256);
  return d;
}

TrainData load_text_bytes(const std::string& path, double val_fraction) {
  // a regular file or a pipe (`--text <(zcat corpus.gz)`: read to its end); not a folder
  require(std::filesystem::exists(path), "text file '", path, "' does not exist");
  require(!std::filesystem::is_directory(path), "text file '", path, "' is a folder");
  return bytes_from_text(read_file(path), path, val_fraction);
}

TrainData load_corpus_bytes(const std::string& spec, double val_fraction) {
  return bytes_from_text(data::load_corpus(spec), spec, val_fraction);
}

TrainData load_token_files(const std::string& prefix) {
  const data::TokenData td = data::read_token_files(prefix);
  TrainData d;
  d.vocab_size = td.meta.vocab_size;
  d.source = prefix + " (" + td.meta.source + ")";
  d.train.assign(td.train.begin(), td.train.end());
  d.val.assign(td.val.begin(), td.val.end());
  if (data::is_task_file(prefix)) {
    data::TaskData task = data::read_task_files(prefix);
    d.row_len = task.row_len;
    d.train_mask = std::move(task.train.mask);
    d.val_mask = std::move(task.val.mask);
    d.source = prefix + " (task " + task.task.value("name", std::string("?")) + ", rows of " +
               std::to_string(task.row_len) + " tokens)";
  }
  require(!d.train.empty() && !d.val.empty(), "token data '", prefix, "' has an empty split (train ", d.train.size(),
          ", val ", d.val.size(), ")");
  d.unigram_entropy = unigram_entropy(d.train, d.vocab_size);
  return d;
}

nlohmann::json TrainConfig::to_json() const {
  return {{"max_steps", max_steps},
          {"batch", batch},
          {"seq_len", seq_len},
          {"grad_accum", grad_accum},
          {"lr", lr},
          {"min_lr", min_lr},
          {"warmup", warmup},
          {"grad_clip", grad_clip},
          {"beta1", adamw.beta1},
          {"beta2", adamw.beta2},
          {"eps", adamw.eps},
          {"weight_decay", adamw.weight_decay},
          {"eval_interval", eval_interval},
          {"eval_batches", eval_batches},
          {"ckpt_interval", ckpt_interval},
          {"seed", seed},
          {"data_source", data_source},
          {"data_checksum", data_checksum},
          {"precision", precision}};
}

std::string data_checksum(const TrainData& data) {
  data::Fnv1a64 h;  // over the bytes as they lie in memory
  // the split sizes first: moving the boundary between train and val changes the checksum
  const std::uint64_t sizes[2] = {data.train.size(), data.val.size()};
  h.add(sizes, sizeof sizes);
  for (const auto* v : {&data.train, &data.val}) h.add(v->data(), v->size() * sizeof(std::int32_t));
  h.add(&data.row_len, sizeof data.row_len);
  for (const auto* m : {&data.train_mask, &data.val_mask}) h.add(m->data(), m->size());
  return h.hex();
}

namespace {

// validation_loss with the loss of one B x T micro-batch given by `eval` (the CPU forward pass, or
// a backend's forward pass on the device).
using BatchLoss = std::function<double(const std::int32_t*, const std::int32_t*)>;
double validation_loss_with(const TrainConfig& cfg, const TrainData& data, const BatchLoss& eval) {
  const int Tn = cfg.seq_len, B = cfg.batch;
  if (data.row_len > 0) {  // aligned rows: the first B * eval_batches rows (cycled), masked targets
    require(Tn <= data.row_len - 1, "seq_len ", Tn, " exceeds the task rows' length - 1 = ", data.row_len - 1);
    std::vector<std::int32_t> x(static_cast<std::size_t>(B) * Tn), y(x.size());
    const std::size_t rows = data.val.size() / static_cast<std::size_t>(data.row_len);
    double sum = 0;
    int counted = 0;
    for (int k = 0; k < cfg.eval_batches; ++k) {
      bool any = false;
      for (int b = 0; b < B; ++b) {
        const std::size_t s = (static_cast<std::size_t>(k * B + b) % rows) * static_cast<std::size_t>(data.row_len);
        for (int t = 0; t < Tn; ++t) {
          x[b * Tn + t] = data.val[s + t];
          y[b * Tn + t] = data.val_mask[s + t + 1] ? data.val[s + t + 1] : -1;
          any = any || y[b * Tn + t] >= 0;
        }
      }
      if (!any) continue;
      sum += eval(x.data(), y.data());
      ++counted;
    }
    require(counted > 0, "validation rows score no target (all loss-mask bytes are 0 within seq_len)");
    return sum / counted;
  }
  require(data.val.size() > static_cast<std::size_t>(Tn) + 1, "validation split has ", data.val.size(),
          " tokens: needs more than seq_len + 1 = ", Tn + 1);
  std::vector<std::int32_t> x(static_cast<std::size_t>(B) * Tn), y(x.size());
  const std::size_t span = data.val.size() - Tn - 1;
  const int nwin = B * cfg.eval_batches;
  double sum = 0;
  for (int k = 0; k < cfg.eval_batches; ++k) {
    for (int b = 0; b < B; ++b) {
      const std::size_t s = span * static_cast<std::size_t>(k * B + b) / std::max(1, nwin - 1);
      for (int t = 0; t < Tn; ++t) {
        x[b * Tn + t] = data.val[s + t];
        y[b * Tn + t] = data.val[s + t + 1];
      }
    }
    sum += eval(x.data(), y.data());
  }
  return sum / cfg.eval_batches;
}

}  // namespace

double validation_loss(const Model<float>& model, const TrainConfig& cfg, const TrainData& data) {
  Workspace<float> ws;
  ws.set_finite_check(false);  // the trainer's own NaN/Inf stop reports a diverging run
  return validation_loss_with(cfg, data, [&](const std::int32_t* x, const std::int32_t* y) {
    return double(forward_backward<float>(model, x, y, cfg.batch, cfg.seq_len, nullptr, ws));
  });
}

std::string kept_path(const std::string& out_dir, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%06lld.h5", static_cast<long long>(step));
  return out_dir + "/" + name;
}

void check_train_inputs(const ModelConfig& model, const TrainConfig& cfg, const TrainData& data) {
  require(cfg.batch >= 1 && cfg.grad_accum >= 1 && cfg.max_steps >= 1 && cfg.eval_batches >= 1,
          "batch, grad_accum, max_steps and eval_batches must be >= 1");
  require(cfg.ckpt_interval >= 1 && cfg.eval_interval >= 1, "ckpt_interval and eval_interval must be >= 1");
  require(cfg.keep_every >= 0, "keep_every must be >= 0 (got ", cfg.keep_every, ")");
  (void)gemm_backend();  // a bad CF_GEMM is refused before any work (exit 2), not at the first step
  require(cfg.seq_len >= 1 && cfg.seq_len <= model.block_size, "seq_len must be in [1, block_size = ", model.block_size,
          "] (got ", cfg.seq_len, ")");
  require(data.vocab_size <= model.vocab_size, "data vocabulary ", data.vocab_size, " exceeds the model's vocab_size ",
          model.vocab_size);
  if (data.row_len > 0) {  // aligned rows: a batch takes whole rows, one row per split suffices
    require(cfg.seq_len <= data.row_len - 1, "seq_len ", cfg.seq_len,
            " exceeds the task rows' length - 1 = ", data.row_len - 1, " (aligned task data: use --seq-len ",
            data.row_len - 1, ")");
    const auto rows = [&](const std::vector<std::int32_t>& v) {
      return v.size() / static_cast<std::size_t>(data.row_len);
    };
    require(rows(data.train) >= 1 && rows(data.val) >= 1, "aligned task data needs a row of ", data.row_len,
            " tokens in each split (train ", data.train.size(), ", validation ", data.val.size(), " tokens)");
  } else {
    require(data.train.size() > static_cast<std::size_t>(cfg.seq_len) + 1, "training split has ", data.train.size(),
            " tokens: needs more than seq_len + 1 = ", cfg.seq_len + 1);
    require(data.val.size() > static_cast<std::size_t>(cfg.seq_len) + 1, "validation split has ", data.val.size(),
            " tokens: needs more than seq_len + 1 = ", cfg.seq_len + 1);
  }
  if (data.row_len > 0 && data.val_mask.size() == data.val.size()) {
    // the rows validation_loss reads (the first batch x eval_batches, cycled) must score a
    // target within seq_len; found here, not at the first evaluation after eval_interval steps
    const std::size_t L = static_cast<std::size_t>(data.row_len), rows = data.val.size() / L;
    const std::size_t n = std::min<std::size_t>(rows, static_cast<std::size_t>(cfg.batch) * cfg.eval_batches);
    bool any = false;
    for (std::size_t r = 0; r < n && !any; ++r)
      for (int t = 1; t <= cfg.seq_len && !any; ++t) any = data.val_mask[r * L + static_cast<std::size_t>(t)] != 0;
    require(any, "validation rows score no target (all loss-mask bytes are 0 within seq_len)");
  }
}

namespace {

// The run from `ck` (a fresh model at step 0, or a resumed checkpoint: its log's rows up to its
// step are kept), inputs already checked.
TrainResult train_from(Checkpoint ck, bool resumed, const TrainConfig& cfg, const TrainData& data,
                       const std::function<void(const StepInfo&)>& on_step, const std::atomic<bool>* stop,
                       UpdateBackend* backend) {
  Model<float>& model = ck.model;
  std::filesystem::create_directories(cfg.out_dir);
  const std::string last = cfg.out_dir + "/last.h5", best = cfg.out_dir + "/best.h5", log = cfg.out_dir + "/log.csv";
  ck.train_config = cfg.to_json();
  TrainResult res;
  if (resumed) res.history = read_log(log, ck.step);
  if (ck.has_best_val) res.best_val_loss = ck.best_val_loss;

  // A backend (the device trainer) owns parameters and moments between updates; `sync` brings
  // them back before anything on the host reads them (validation, checkpoints, finiteness).
  if (backend) backend->load(model, ck.optim, cfg.batch, cfg.seq_len);
  bool backend_ahead = false;
  auto sync = [&]() {
    if (backend && backend_ahead) backend->store(model.params, ck.optim);
    backend_ahead = false;
  };
  Workspace<float> ws;
  ws.set_finite_check(false);  // the trainer's own NaN/Inf stop reports a diverging run
  std::vector<float> grad(backend ? 0 : model.params.size());
  std::vector<std::int32_t> x, y;
  const std::int64_t end = cfg.stop_after > 0 ? std::min(cfg.stop_after, cfg.max_steps) : cfg.max_steps;
  const double tokens_per_step = double(cfg.batch) * cfg.seq_len * cfg.grad_accum;
  auto t_start = std::chrono::steady_clock::now();
  const std::int64_t first = ck.step;
  // What this run has put on disk, for NaN-stop messages that tell the truth about last.h5.
  std::int64_t saved_step = -1;
  double applied_lr = 0;  // learning rate of the latest update
  auto on_disk = [&]() {
    return saved_step >= 0 ? str("'", last, "' holds the finite parameters of step ", saved_step)
                           : str("this run wrote no checkpoint to '", last, "' (an existing file there is untouched)");
  };
  // Never persist non-finite values: parameters and AdamW moments are checked before each write.
  auto require_finite = [&](const char* when) {
    const auto bad = [](const std::vector<float>& v) {
      return !std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
    };
    const bool bad_params = bad(model.params);
    if (bad_params || bad(ck.optim.m) || bad(ck.optim.v))
      throw Error(str("non-finite ", bad_params ? "parameters" : "optimizer state", " after the update of step ",
                      ck.step, " (learning rate ", applied_lr, ", weight decay ", cfg.adamw.weight_decay, ")", when,
                      ": training stopped; ", on_disk(), " (lower --lr or raise --warmup)"));
  };
  auto save_last = [&]() {
    sync();
    require_finite(" before writing a checkpoint");
    save_checkpoint(last, ck);
    saved_step = ck.step;
  };
  while (ck.step < end) {
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(grad.begin(), grad.end(), 0.f);
    if (backend) backend->zero_grad();
    double loss = 0;
    for (int k = 0; k < cfg.grad_accum; ++k) {
      if (data.row_len > 0)
        sample_rows(data.train, data.train_mask, data.row_len, cfg.batch, cfg.seq_len, cfg.seed, ck.step, k, x, y);
      else
        sample_batch(data.train, cfg.batch, cfg.seq_len, cfg.seed, ck.step, k, x, y);
      loss += backend ? backend->micro_batch(x.data(), y.data())
                      : forward_backward<float>(model, x.data(), y.data(), cfg.batch, cfg.seq_len, &grad, ws);
    }
    loss /= cfg.grad_accum;
    if (cfg.grad_accum > 1 && !backend)
      for (auto& g : grad) g /= static_cast<float>(cfg.grad_accum);
    const double gn = backend ? backend->clip(cfg.grad_accum, cfg.grad_clip) : clip_grad_norm(grad, cfg.grad_clip);
    if (!std::isfinite(loss) || !std::isfinite(gn))
      throw Error(str("non-finite ", std::isfinite(loss) ? "gradient norm" : "loss", " at step ", ck.step + 1,
                      " (loss ", loss, ", grad norm ", gn, "): training stopped; ", on_disk(),
                      " (lower --lr or raise --warmup)"));
    StepInfo si;
    si.lr = lr_schedule(ck.step, cfg.warmup, cfg.max_steps, cfg.lr, cfg.min_lr);
    if (backend) {
      ck.optim.t += 1;
      backend->apply(si.lr, cfg.adamw, ck.optim.t);
      backend_ahead = true;
    } else {
      adamw_step(model.params, grad, ck.optim, model.layout, si.lr, cfg.adamw);
    }
    applied_lr = si.lr;
    ck.step += 1;
    if (backend && !backend->finite()) sync();  // the host check below then names what failed
    if (!backend || !backend_ahead) require_finite("");
    const auto t1 = std::chrono::steady_clock::now();
    si.step = ck.step;
    si.loss = loss;
    si.grad_norm = gn;
    si.tokens_per_s = tokens_per_step / std::max(1e-9, std::chrono::duration<double>(t1 - t0).count());
    const double el = std::chrono::duration<double>(t1 - t_start).count();
    si.eta_s = el / double(ck.step - first) * double(end - ck.step);
    if (ck.step % cfg.eval_interval == 0 || ck.step == end) {
      si.val_loss = backend ? validation_loss_with(
                                  cfg, data,
                                  [&](const std::int32_t* vx, const std::int32_t* vy) { return backend->loss(vx, vy); })
                            : validation_loss(model, cfg, data);
      res.final_val_loss = si.val_loss;
      if (!std::isfinite(si.val_loss))
        throw Error(str("non-finite validation loss at step ", ck.step, ": training stopped; ", on_disk()));
      if (!ck.has_best_val || si.val_loss < ck.best_val_loss) {
        ck.best_val_loss = si.val_loss;
        ck.has_best_val = true;
        res.best_val_loss = si.val_loss;
        sync();
        require_finite(" before writing a checkpoint");
        save_checkpoint(best, ck);
      }
    }
    res.history.push_back(si);
    res.last_loss = loss;
    if (on_step) on_step(si);
    const bool stopping = stop && stop->load();
    if (cfg.keep_every > 0 && ck.step % cfg.keep_every == 0)
      sync(), save_checkpoint(kept_path(cfg.out_dir, ck.step), ck);
    if (ck.step % cfg.ckpt_interval == 0 || ck.step == end || stopping) {
      // the log first: a kill between the two leaves a log ahead of last.h5 (resume keeps its rows
      // up to the checkpoint's step), never a checkpoint ahead of its log (rows lost for good)
      write_log(log, res.history);
      save_last();
    }
    if (stopping) {
      res.interrupted = true;
      break;
    }
  }
  res.steps_done = ck.step;
  return res;
}

}  // namespace

TrainResult train(const ModelConfig& model_config, const TrainConfig& cfg, const TrainData& data,
                  const std::string& resume_from, const std::function<void(const StepInfo&)>& on_step,
                  const std::atomic<bool>* stop, UpdateBackend* backend) {
  if (!resume_from.empty()) return train(load_checkpoint(resume_from, true), cfg, data, on_step, stop, backend);
  // a fresh run is checked before the model is initialised
  check_train_inputs(model_config, cfg, data);
  Checkpoint ck;
  ck.model = init_model<float>(model_config, cfg.seed);
  return train_from(std::move(ck), false, cfg, data, on_step, stop, backend);
}

TrainResult train(Checkpoint resumed, const TrainConfig& cfg, const TrainData& data,
                  const std::function<void(const StepInfo&)>& on_step, const std::atomic<bool>* stop,
                  UpdateBackend* backend) {
  check_train_inputs(resumed.model.config, cfg, data);  // once its config is read
  return train_from(std::move(resumed), true, cfg, data, on_step, stop, backend);
}

}  // namespace cf::nn
