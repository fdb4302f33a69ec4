#include "cf/probe/report.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/progress.hpp"
#include "cf/data/task_file.hpp"
#include "cf/data/token_file.hpp"
#include "cf/graph/schedule.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/probe/boundary_copy.hpp"
#include "cf/probe/detail/report_util.hpp"
#include "cf/probe/evaluate.hpp"
#include "cf/probe/passkey.hpp"
#include "cf/probe/ranking.hpp"
#include "cf/probe/stats.hpp"

namespace cf::probe {

using output::fmt;
using output::fmt_int;

PairedResult paired_compare(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, int resamples,
                            double level, std::uint64_t seed) {
  PairedResult r;
  r.mcnemar = mcnemar_exact(a, b);
  r.n = static_cast<std::int64_t>(a.size());
  std::vector<double> da(a.begin(), a.end()), db(b.begin(), b.end());
  for (double x : da) r.acc_a += x;
  for (double x : db) r.acc_b += x;
  if (r.n > 0) {
    r.acc_a /= double(r.n);
    r.acc_b /= double(r.n);
    r.ci = paired_bootstrap_ci(da, db, resamples, level, seed);
  }
  return r;
}

namespace detail {

std::string plot_path(const std::string& base, const std::string& suffix) {
  if (suffix.empty() || base.empty()) return base;
  const auto dot = base.rfind('.');
  return base.substr(0, dot) + "_" + suffix + base.substr(dot);
}

nn::Model<float> load_checkpoint_model(const std::string& path, const std::string& what) {
  try {
    return cf::model::load_model(path);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("--checkpoint '", path, "': cannot read the model", what, ": ", e.what()));
  }
}

ProbeModel load_checkpoint(const ProbeOptions& o, const std::string& path) {
  if (!o.load) return load_probe_model(path);
  try {
    return o.load(path);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("--checkpoint '", path, "': cannot read the model and its mask schedule: ", e.what()));
  }
}

Progress row_progress(bool quiet, const std::string& prefix, const std::string& rows) {
  // Like every tool's progress line (docs/conventions.md "Progress"): only on a terminal (or with
  // CF_PROGRESS=1), never into a redirected stderr or a log file.
  if (quiet || !cf::progress_visible()) return {};
  auto t0 = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  auto last = std::make_shared<double>(-1.0);
  return [=](std::int64_t done, std::int64_t total) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - *t0).count();
    if (done < total && el - *last < 2.0) return;
    *last = el;
    const double eta = done > 0 ? el / double(done) * double(total - done) : 0.0;
    std::cerr << prefix << ": " << done << "/" << total << " " << rows << " | " << fmt(el, 3) << " s | ETA "
              << fmt(eta, 3) << " s\n";
  };
}

Progress make_progress(const ProbeOptions& o, const std::string& label) {
  return row_progress(o.quiet, "probe " + label, "rows");
}

void add_paired(output::Report& r, const std::string& title, const PairedResult& p, const ProbeOptions& o,
                const std::string& key) {
  output::Table t;
  t.name = "paired_" + key;  // CSV `table` key; the title's slug is "paired" for every part
  t.title = title;
  t.header = {"items", "acc A", "acc B", "A-B", "CI lo", "CI hi", "A only", "B only", "McNemar p"};
  t.add_row({fmt_int(p.n), fmt(p.acc_a, 4), fmt(p.acc_b, 4), fmt(p.ci.estimate, 4), fmt(p.ci.lo, 4), fmt(p.ci.hi, 4),
             fmt_int(p.mcnemar.n01), fmt_int(p.mcnemar.n10),
             p.mcnemar.p_value > 0 ? fmt(p.mcnemar.p_value, 4) : "1e" + fmt(p.mcnemar.log10_p, 5)});
  r.tables.push_back(t);
  r.body["paired"][key] = {{"items", p.n},
                           {"accuracy_a", p.acc_a},
                           {"accuracy_b", p.acc_b},
                           {"difference", p.ci.estimate},
                           {"ci_lo", p.ci.lo},
                           {"ci_hi", p.ci.hi},
                           {"ci_level", o.level},
                           {"resamples", o.resamples},
                           {"bootstrap_seed", o.boot_seed},
                           {"a_only", p.mcnemar.n01},
                           {"b_only", p.mcnemar.n10},
                           {"mcnemar_p", p.mcnemar.p_value},
                           {"mcnemar_log10_p", p.mcnemar.log10_p}};
}

void check_pair(const std::vector<ProbeModel>& models, const std::vector<std::string>& paths) {
  if (models.size() == 2)
    require(models[0].config.vocab_size == models[1].config.vocab_size, "paired comparison needs one tokeniser: '",
            paths[0], "' has vocab_size ", models[0].config.vocab_size, " but '", paths[1], "' has ",
            models[1].config.vocab_size);
}

std::vector<ProbsForward> model_forwards(const ProbeOptions& o, const std::vector<ProbeModel>& models) {
  std::vector<ProbsForward> f;
  for (const auto& model : models) {
    require(o.forward || model.host, "--checkpoint '", model.path, "': the CPU's forward pass needs the host model");
    f.push_back(o.forward ? o.forward(model) : cpu_probs_forward(*model.host));
  }
  return f;
}

}  // namespace detail

ProbeModel load_probe_model(const std::string& path) {
  auto host = std::make_shared<const nn::Model<float>>(detail::load_checkpoint_model(path, " and its mask schedule"));
  return ProbeModel{path, host->config, host};
}

namespace {
using namespace detail;

output::Report run_boundary_copy(const ProbeOptions& o, const data::TaskData& d) {
  // The metadata is input like any file: K, b, d, the phases and the alphabet size every array
  // below (b = 0 divided by zero, an empty alphabet read past its end), so the generator's checks
  // run again here, and the rows must have the length the spec implies.
  BoundaryCopySpec s;
  try {
    s = boundary_copy_from_json(d.task);
    s.vocab_size = d.vocab_size;
    validate(s);
    require(d.row_len == s.seq_len + 1, "row_len ", d.row_len, " is not seq_len + 1 = ", s.seq_len + 1);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("task '", o.data, "': ", e.what()));
  }
  std::vector<ProbeModel> models;
  for (const auto& c : o.checkpoints) models.push_back(load_checkpoint(o, c));
  check_pair(models, o.checkpoints);
  // every model checked and its forward pass built (a device's refusal) before the first is evaluated
  for (std::size_t m = 0; m < models.size(); ++m)
    check_model_fits(models[m].config, s.seq_len, d.vocab_size, "--checkpoint '" + o.checkpoints[m] + "'");
  const auto forwards = model_forwards(o, models);
  output::Report r;
  r.body["task"] = d.task;
  r.body["alpha"] = o.alpha;
  r.body["bound_test"] = "one-sided exact binomial, H1: accuracy > pi + (1-pi)/K, Bonferroni over phases";
  std::vector<std::vector<Readout>> all;
  plot::LinePlot lp;
  lp.title = "boundary copy: accuracy per phase vs coverage bound (K = " + std::to_string(s.K) +
             ", d = " + std::to_string(s.d) + ")";
  lp.xlabel = "readout phase r = p mod b";
  lp.ylabel = "top-1 accuracy over K (bars: exact " + fmt(100 * o.level, 3) + "% binomial interval)";
  lp.y_min = 0;
  lp.y_max = 1.02;
  lp.key = "below";  // bounds run along the top (1 where a phase is covered)
  for (std::size_t m = 0; m < models.size(); ++m) {
    const std::string sched = graph::describe(model_schedule(models[m].config));
    auto ro = evaluate_boundary_copy(models[m].config, forwards[m], s, d.val, o.batch, o.max_rows,
                                     make_progress(o, o.checkpoints[m]));
    require(!ro.empty(), "task '", o.data, "' has no readouts in the rows evaluated");
    const auto ph = summarise_phases(ro, s.K, s.b, o.alpha);
    output::Table t;
    if (o.checkpoints.size() > 1) t.name = model_table_name("boundary_copy", m);  // CSV: which model
    t.title = "boundary copy: " + o.checkpoints[m] + " (schedule " + sched + ", K = " + std::to_string(s.K) +
              ", d = " + std::to_string(s.d) + ", b = " + std::to_string(s.b) + ")";
    t.header = {"phase", "readouts", "accuracy", "acc bound", "CE", "CE bound", "pi", "p (acc > bound)", "above bound"};
    nlohmann::json jp = nlohmann::json::array();
    // legend: the model (its file) and its schedule; the bound dashed, so a curve on it stays visible
    const std::string who = o.checkpoints.size() > 1 ? "model " + std::string(1, char('A' + m)) + " (" +
                                                           o.checkpoints[m] + ", " + sched + ")"
                                                     : o.checkpoints[m] + " (" + sched + ")";
    plot::Series acc{"accuracy, " + who, {}, {}};
    plot::Series bnd{
        "coverage bound, " + (o.checkpoints.size() > 1 ? "model " + std::string(1, char('A' + m)) : who), {}, {}};
    bnd.dashed = true;
    acc.colour = bnd.colour = static_cast<int>(m);  // a model's bound in its colour
    int flagged = 0;
    for (const auto& q : ph) {
      const BinomialCi ci = q.n > 0 ? binomial_ci(q.correct, q.n, o.level) : BinomialCi{std::nan(""), std::nan("")};
      t.add_row({fmt_int(q.phase), fmt_int(q.n), fmt(q.accuracy, 4), fmt(q.acc_bound, 4), fmt(q.ce, 4),
                 fmt(q.ce_bound, 4), fmt(q.pi, 4), fmt(q.p_value, 4), q.significant ? "YES" : "no"});
      jp.push_back({{"phase", q.phase},
                    {"readouts", q.n},
                    {"correct", q.correct},
                    {"accuracy", q.accuracy},
                    {"accuracy_ci", {ci.lo, ci.hi}},
                    {"accuracy_bound", q.acc_bound},
                    {"cross_entropy", q.ce},
                    {"cross_entropy_bound", q.ce_bound},
                    {"pi", q.pi},
                    {"p_value", q.p_value},
                    {"significantly_above_bound", q.significant}});
      acc.x.push_back(q.phase);
      acc.y.push_back(q.accuracy);
      acc.y_lo.push_back(ci.lo);
      acc.y_hi.push_back(ci.hi);
      bnd.x.push_back(q.phase);
      bnd.y.push_back(q.acc_bound);
      flagged += q.significant;
    }
    r.tables.push_back(t);
    std::int64_t n = 0, c = 0;
    for (const auto& x : ro) {
      ++n;
      c += x.predicted == x.label;
    }
    r.body["models"].push_back({{"checkpoint", o.checkpoints[m]},
                                {"schedule", sched},
                                {"readouts", n},
                                {"accuracy", double(c) / double(n)},
                                {"phases", jp},
                                {"phases_above_bound", flagged}});
    if (flagged > 0)
      r.notes.push_back("WARNING: " + o.checkpoints[m] + ": " + std::to_string(flagged) +
                        " phase(s) significantly above the coverage bound (contradicts Theorem 2 / Prop. 3: check "
                        "the schedule read from the checkpoint and the task's independence)");
    lp.series.push_back(acc);
    lp.series.push_back(bnd);
    all.push_back(std::move(ro));
  }
  r.notes.push_back("Bound test: one-sided exact binomial at family-wise level alpha = " + fmt(o.alpha, 3) +
                    ", Bonferroni over the phases with readouts; CE is over the K alphabet tokens (renormalised).");
  if (all.size() == 2) {
    require(all[0].size() == all[1].size(), "paired comparison: the two evaluations scored different readouts");
    std::vector<std::uint8_t> a, b;
    for (std::size_t i = 0; i < all[0].size(); ++i) {
      a.push_back(all[0][i].predicted == all[0][i].label);
      b.push_back(all[1][i].predicted == all[1][i].label);
    }
    add_paired(r, "paired: A = " + o.checkpoints[0] + " vs B = " + o.checkpoints[1] + " (all readouts)",
               paired_compare(a, b, o.resamples, o.level, o.boot_seed), o, "all");
    for (int ph = 0; ph < s.b; ++ph) {
      std::vector<std::uint8_t> pa, pb;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (all[0][i].phase == ph) {
          pa.push_back(a[i]);
          pb.push_back(b[i]);
        }
      if (pa.empty()) continue;
      add_paired(r, "paired, phase " + std::to_string(ph), paired_compare(pa, pb, o.resamples, o.level, o.boot_seed), o,
                 "phase_" + std::to_string(ph));
    }
    r.notes.push_back(
        "Paired: exact two-sided McNemar (p = min(1, 2 x smaller binomial tail) on the discordant "
        "counts 'A only' / 'B only'); percentile bootstrap of acc A - acc B, " +
        std::to_string(o.resamples) + " resamples, level " + fmt(o.level, 3) + ", seed " + std::to_string(o.boot_seed) +
        ".");
  }
  if (!o.plot.empty()) plot::save(lp, o.plot);
  return r;
}

}  // namespace

void check_probe_options(const ProbeOptions& o) {
  require(o.checkpoints.size() == 1 || o.checkpoints.size() == 2, "--checkpoint: give one or two (got ",
          o.checkpoints.size(), ")");
  require(o.alpha > 0 && o.alpha < 1, "--alpha must lie in (0, 1) (got ", o.alpha, ")");
  require(o.level > 0 && o.level < 1, "--level must lie in (0, 1) (got ", o.level, ")");
  require(o.resamples >= 1 && o.resamples <= 10000000, "--resamples must be in [1, 1e7] (got ", o.resamples, ")");
  require(o.batch >= 1 && o.batch <= 65536, "--batch must be in [1, 65536] (got ", o.batch, ")");
  require(o.max_rows >= 0, "--max-rows must be >= 0 (got ", o.max_rows, ")");
}

output::Report run_probe(const ProbeOptions& o) {
  check_probe_options(o);
  if (!o.plot.empty()) plot::check_plot_path(o.plot);
  // a damaged meta.json is reported as what it is (read_token_files names the JSON error), not as
  // "no task file"
  data::require_token_prefix(o.data, "--data");  // "--data bc.val.bin": the prefix to give is named
  if (!data::is_task_file(o.data) && std::filesystem::is_regular_file(o.data + ".meta.json"))
    data::read_token_files(o.data);
  require(data::is_task_file(o.data), "--data '", o.data, "': no task file (", o.data,
          ".meta.json with row_len; make one with prepare-data --task)");
  const data::TaskData d = data::read_task_files(o.data);
  const std::string name = d.task.value("name", std::string("?"));
  require(name == o.task, "--data '", o.data, "' holds the task '", name, "', not '", o.task, "'");
  // the heat maps written beside --plot (passkey: P_heatmapM per checkpoint, ranking: P_model2)
  // are outputs too: checked writable and against every input before any work (a derived name
  // equal to --data's or --checkpoint's file replaced it; issue 29)
  if (!o.plot.empty()) {
    std::vector<std::pair<std::string, std::string>> derived;
    for (std::size_t m = 0; m < o.checkpoints.size(); ++m) {
      const std::string k = std::to_string(m + 1);
      if (o.task == "passkey")
        derived.emplace_back(detail::plot_path(o.plot, "heatmap" + k), "--plot (heat map of checkpoint " + k + ")");
      if (o.task == "ranking" && m > 0)
        derived.emplace_back(detail::plot_path(o.plot, "model" + k), "--plot (heat map of checkpoint " + k + ")");
    }
    app::check_outputs(derived);
  }
  output::Report r;
  if (o.task == "boundary-copy")
    r = run_boundary_copy(o, d);
  else if (o.task == "passkey")
    r = run_passkey(o, d);
  else if (o.task == "ranking")
    r = run_ranking(o, d);
  else
    throw InvalidArgument(str("unknown task '", o.task, "' (known: boundary-copy, passkey, ranking)"));
  // a percentile interval's ends are single resamples when each tail holds few of them: with
  // --resamples 1 the "interval" is one resample and may exclude the estimate itself
  const double tail = o.resamples * (1.0 - o.level) / 2.0;
  if (o.checkpoints.size() == 2 && tail < 10)
    r.notes.push_back(str("warning: the bootstrap intervals' ends rest on ", fmt(tail, 3),
                          " resamples each (--resamples ", o.resamples, " x (1 - --level ", fmt(o.level, 3),
                          ") / 2 < 10): they are not reliable; use --resamples >= ",
                          static_cast<long long>(std::ceil(20.0 / (1.0 - o.level))), " (default 2000)"));
  r.meta = output::metadata("probe", {{"task", o.task},
                                      {"data", o.data},
                                      {"checkpoints", o.checkpoints},
                                      {"alpha", o.alpha},
                                      {"batch", o.batch},
                                      {"max_rows", o.max_rows},
                                      {"resamples", o.resamples},
                                      {"level", o.level},
                                      {"bootstrap_seed", o.boot_seed},
                                      {"plot", o.plot}});
  return r;
}

}  // namespace cf::probe
