// The `eval` report (cf/probe/eval_report.hpp): items read once, each checkpoint loaded, its
// tokenizer applied and its items scored, then accuracies with bootstrap intervals, the paired
// comparison of two checkpoints, tables, JSON body and the optional plot.
#include "cf/probe/eval_report.hpp"

#include <algorithm>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/model.hpp"
#include "cf/probe/detail/report_util.hpp"
#include "cf/probe/multiple_choice.hpp"
#include "cf/probe/report.hpp"

namespace cf::probe {

using output::fmt;
using output::fmt_int;

BootstrapCi mean_bootstrap_ci(const std::vector<double>& a, int resamples, double level, std::uint64_t seed) {
  return paired_bootstrap_ci(a, std::vector<double>(a.size(), 0.0), resamples, level, seed);
}

namespace {

// The three decisions of an item, in report order.
const char* const kMetrics[3] = {"acc", "acc_norm_char", "acc_norm_token"};

std::vector<std::uint8_t> outcomes(const std::vector<McScore>& s, const std::vector<McItem>& items, int metric) {
  std::vector<std::uint8_t> o(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const int p = metric == 0 ? s[i].pred : metric == 1 ? s[i].pred_char : s[i].pred_token;
    o[i] = p == items[i].gold;
  }
  return o;
}

McProgress make_progress(const EvalOptions& o, const std::string& label) {
  return detail::row_progress(o.quiet, "mc-eval " + label, "(item, choice) rows");
}

}  // namespace

output::Report run_eval(const EvalOptions& o) {
  require(o.checkpoints.size() == 1 || o.checkpoints.size() == 2, "--checkpoint: give one or two (got ",
          o.checkpoints.size(), ")");
  require(o.level > 0 && o.level < 1, "--level must lie in (0, 1) (got ", o.level, ")");
  require(o.resamples >= 1 && o.resamples <= 10000000, "--resamples must be in [1, 1e7] (got ", o.resamples, ")");
  require(o.batch >= 1 && o.batch <= 65536, "--batch must be in [1, 65536] (got ", o.batch, ")");
  require(o.max_items >= 0, "--max-items must be >= 0 (got ", o.max_items, ")");
  const auto tpl = kMcTemplates.find(o.templ);
  require(tpl.has_value(), "--template must be ", kMcTemplates.list(" or "), " (got '", o.templ, "')");
  require(o.truncate == "left" || o.truncate == "refuse", "--truncate must be left or refuse (got '", o.truncate, "')");
  if (!o.plot.empty()) plot::check_plot_path(o.plot);
  McLayout layout = parse_layout(o.layout);
  const std::vector<McItem> items = read_mc_file(o.data, layout, *tpl, o.max_items, &layout);
  const std::size_t n = items.size();

  output::Report r;
  r.body["data"] = o.data;
  r.body["layout"] = layout_name(layout);
  r.body["template"] = o.templ;
  r.body["n_items"] = n;
  output::Table t;
  t.name = "accuracy";
  t.title = "mc-eval: " + o.data + " (" + layout_name(layout) + ", " + std::to_string(n) + " items, template " +
            o.templ + ")";
  t.header = {"checkpoint", "metric", "correct", "items", "accuracy", "CI lo", "CI hi"};
  plot::LinePlot lp;
  lp.title = "zero-shot multiple choice: " + layout_name(layout) + " (" + std::to_string(n) + " items, " +
             fmt(100 * o.level, 3) + "% bootstrap intervals)";
  lp.xlabel = "metric (0 = acc, 1 = acc_norm per character, 2 = acc_norm per token)";
  lp.ylabel = "accuracy";
  lp.y_min = 0;
  lp.y_max = 1.02;
  std::vector<std::vector<McScore>> all;
  // every checkpoint and its tokenizer first: a bad second checkpoint or an unused option is
  // reported before any scoring
  std::vector<nn::Model<float>> models;
  std::vector<Encoder> encoders;
  std::vector<std::string> tok_names(o.checkpoints.size());
  for (std::size_t m = 0; m < o.checkpoints.size(); ++m) {
    models.push_back(detail::load_checkpoint_model(o.checkpoints[m]));
    encoders.push_back(make_encoder(o.checkpoints[m], models[m].config.vocab_size, o.gpt2_dir, &tok_names[m]));
  }
  require(o.gpt2_dir.empty() || std::count(tok_names.begin(), tok_names.end(), "gpt2") > 0,
          "--gpt2-dir is only used with a GPT-2 BPE checkpoint (vocab_size 50,257 without a tokenizer.json), "
          "and no --checkpoint is one: drop it");
  // every model's forward pass built (a device's refusal) before the first is scored
  std::vector<LogprobForward> forwards;
  for (const auto& model : models) forwards.push_back(o.forward ? o.forward(model) : LogprobForward{});
  for (std::size_t m = 0; m < o.checkpoints.size(); ++m) {
    const std::string& ck = o.checkpoints[m];
    const nn::Model<float>& model = models[m];
    const std::string& tok_name = tok_names[m];
    const Encoder& enc = encoders[m];
    std::vector<McEncoded> coded;
    coded.reserve(n);
    for (const auto& it : items) {
      try {
        coded.push_back(encode_item(it, enc));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(str("--data '", o.data, "' line ", it.line, ": ", e.what()));
      }
    }
    std::vector<McScore> sc;
    try {
      sc = score_items(model, coded, items, o.batch, o.truncate == "left", make_progress(o, ck), forwards[m]);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(str("--data '", o.data, "' ", e.what(), " (--checkpoint '", ck, "')"));
    } catch (const Error& e) {
      throw Error(str("--checkpoint '", ck, "' on --data '", o.data, "' ", e.what()));
    }
    nlohmann::json jm = {{"checkpoint", ck},
                         {"tokenizer", tok_name},
                         {"block_size", model.config.block_size},
                         {"vocab_size", model.config.vocab_size}};
    std::int64_t truncated = 0;
    // markers only and vertical interval bars: NaN rows break gnuplot's lines between the points
    const std::string tag = o.checkpoints.size() > 1 ? std::string(1, char('A' + m)) + ": " : "";
    plot::Series acc{tag + ck, {}, {}}, bars{tag + fmt(100 * o.level, 3) + "% interval", {}, {}};
    const double off = o.checkpoints.size() > 1 ? (m == 0 ? -0.08 : 0.08) : 0.0;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int k = 0; k < 3; ++k) {
      const auto oc = outcomes(sc, items, k);
      const std::vector<double> d(oc.begin(), oc.end());
      const BootstrapCi ci = mean_bootstrap_ci(d, o.resamples, o.level, o.boot_seed);
      std::int64_t correct = 0;
      for (auto v : oc) correct += v;
      jm[kMetrics[k]] = {{"value", ci.estimate}, {"correct", correct}, {"ci_lo", ci.lo}, {"ci_hi", ci.hi}};
      t.add_row({ck, kMetrics[k], fmt_int(correct), fmt_int(static_cast<long long>(n)), fmt(ci.estimate, 4),
                 fmt(ci.lo, 4), fmt(ci.hi, 4)});
      acc.x.insert(acc.x.end(), {k + off, nan});
      acc.y.insert(acc.y.end(), {ci.estimate, nan});
      bars.x.insert(bars.x.end(), {k + off, k + off, nan});
      bars.y.insert(bars.y.end(), {ci.lo, ci.hi, nan});
    }
    nlohmann::json ji = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i) {
      const McScore& s = sc[i];
      truncated += s.dropped > 0;
      ji.push_back({{"line", items[i].line},
                    {"gold", items[i].gold},
                    {"loglik", s.loglik},
                    {"n_tokens", s.n_tokens},
                    {"n_chars", s.n_chars},
                    {"pred", s.pred},
                    {"pred_norm_char", s.pred_char},
                    {"pred_norm_token", s.pred_token},
                    {"dropped_tokens", s.dropped}});
    }
    jm["items_truncated"] = truncated;
    jm["items"] = ji;
    r.body["models"].push_back(jm);
    if (truncated > 0)
      r.notes.push_back(str(ck, ": ", truncated, " item(s) longer than block_size ", model.config.block_size,
                            ": their context was cut on the left (items[*].dropped_tokens)"));
    lp.series.push_back(bars);  // the estimates' markers are drawn over their bars
    lp.series.push_back(acc);
    all.push_back(std::move(sc));
  }
  r.tables.push_back(t);
  r.notes.push_back(
      str("log-likelihood of ' ' + choice after the context (natural log, no BOS); acc_norm_char "
          "divides by the choice's length in code points, acc_norm_token by its token count; "
          "ties go to the first choice. Intervals: percentile bootstrap over items, ",
          o.resamples, " resamples, level ", fmt(o.level, 3), ", seed ", o.boot_seed, "."));
  if (all.size() == 2) {
    output::Table pt;
    pt.name = "paired";
    pt.title = "paired: A = " + o.checkpoints[0] + " vs B = " + o.checkpoints[1];
    pt.header = {"metric", "items", "acc A", "acc B", "A-B", "CI lo", "CI hi", "A only", "B only", "McNemar p"};
    for (int k = 0; k < 3; ++k) {
      const PairedResult p =
          paired_compare(outcomes(all[0], items, k), outcomes(all[1], items, k), o.resamples, o.level, o.boot_seed);
      pt.add_row({kMetrics[k], fmt_int(p.n), fmt(p.acc_a, 4), fmt(p.acc_b, 4), fmt(p.ci.estimate, 4), fmt(p.ci.lo, 4),
                  fmt(p.ci.hi, 4), fmt_int(p.mcnemar.n01), fmt_int(p.mcnemar.n10), fmt(p.mcnemar.p_value, 4)});
      r.body["paired"][kMetrics[k]] = {{"items", p.n},
                                       {"accuracy_a", p.acc_a},
                                       {"accuracy_b", p.acc_b},
                                       {"difference", p.ci.estimate},
                                       {"ci_lo", p.ci.lo},
                                       {"ci_hi", p.ci.hi},
                                       {"a_only", p.mcnemar.n01},
                                       {"b_only", p.mcnemar.n10},
                                       {"mcnemar_p", p.mcnemar.p_value},
                                       {"mcnemar_log10_p", p.mcnemar.log10_p}};
    }
    r.tables.push_back(pt);
    r.notes.push_back(
        "Paired: exact two-sided McNemar on the discordant items 'A only' / 'B only' (p = min(1, 2 x the smaller "
        "binomial tail)); percentile bootstrap of acc A - acc B over the same items.");
  }
  const double tail = o.resamples * (1.0 - o.level) / 2.0;
  if (tail < 10)
    r.notes.push_back(str("warning: the bootstrap intervals' ends rest on ", fmt(tail, 3),
                          " resamples each (--resamples x (1 - --level) / 2 < 10): they are not reliable"));
  if (!o.plot.empty()) plot::save(lp, o.plot);
  r.meta = output::metadata("mc-eval", {{"data", o.data},
                                        {"checkpoints", o.checkpoints},
                                        {"layout", layout_name(layout)},
                                        {"layout_option", o.layout},
                                        {"template", o.templ},
                                        {"truncate", o.truncate},
                                        {"gpt2_dir", o.gpt2_dir},
                                        {"batch", o.batch},
                                        {"max_items", o.max_items},
                                        {"resamples", o.resamples},
                                        {"level", o.level},
                                        {"bootstrap_seed", o.boot_seed},
                                        {"plot", o.plot}});
  return r;
}

}  // namespace cf::probe
