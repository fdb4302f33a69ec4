// The train tool's report and loss plot (cf/nn/train_report.hpp).
#include "cf/nn/train_report.hpp"

#include <cmath>

namespace cf::nn {

using output::fmt;
using output::fmt_int;

output::Report train_report(const ModelConfig& used, const TrainConfig& tc, const TrainData& data, const TrainResult& r,
                            std::int64_t nparams, const std::string& resume_from) {
  double mean_tps = 0;
  for (const auto& s : r.history) mean_tps += s.tokens_per_s;
  if (!r.history.empty()) mean_tps /= double(r.history.size());
  output::Report rep;
  rep.body = {{"steps_done", r.steps_done},
              {"interrupted", r.interrupted},
              {"parameters", nparams},
              {"last_train_loss", r.last_loss},
              {"best_val_loss", r.best_val_loss},
              {"unigram_entropy", data.unigram_entropy},
              {"mean_tokens_per_s", mean_tps},
              {"out_dir", tc.out_dir},
              {"config", to_json(used)},
              {"train_config", tc.to_json()}};
  output::Table t;
  t.title = "train";
  t.header = {"quantity", "value"};
  t.add_row({"steps done", fmt_int(r.steps_done)});
  t.add_row({"parameters", fmt_int(nparams)});
  t.add_row({"last train loss", fmt(r.last_loss, 6)});
  t.add_row({"best val loss", fmt(r.best_val_loss, 6)});
  t.add_row({"unigram entropy (nats)", fmt(data.unigram_entropy, 6)});
  t.add_row({"mean tokens/s", fmt_int(static_cast<long long>(mean_tps))});
  rep.tables.push_back(t);
  rep.notes.push_back("checkpoints: " + tc.out_dir + "/last.h5, " + tc.out_dir + "/best.h5");
  if (r.interrupted) rep.notes.push_back("interrupted: last.h5 saved at step " + std::to_string(r.steps_done));
  nlohmann::json params = tc.to_json();
  params["model"] = to_json(used);
  params["data"] = data.source;
  params["resume"] = resume_from;
  rep.meta = output::metadata("train", params);
  return rep;
}

plot::LinePlot loss_plot(const TrainResult& r, double unigram_entropy) {
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
    un.y = {unigram_entropy, unigram_entropy};
  }
  lp.series = {tr, va, un};
  return lp;
}

}  // namespace cf::nn
