#include "cf/probe/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/core/plot.hpp"
#include "cf/probe/detail/report_util.hpp"

namespace cf::probe {

using data::Token;
using output::fmt;
using output::fmt_int;

namespace {
const std::vector<std::string> kNames = {"cat",  "dog",  "bird", "fish", "horse", "lamp", "door", "ship",
                                         "tree", "road", "coat", "ring", "boat",  "cup",  "bell", "kite"};
// values of one byte length (4), so summed NLLs compare like with like under the byte tokenizer
const std::vector<std::string> kValues = {"blue", "pink", "grey", "gold", "jade", "rose",
                                          "ruby", "teal", "navy", "lime", "sand", "plum"};
std::string fact(const std::string& n, const std::string& v) { return " The " + n + " is " + v + "."; }
std::string query(const std::string& n) { return " The " + n + " is"; }
std::string paraphrase(const std::string& n) { return " The colour of the " + n + " is"; }
}  // namespace

const std::vector<std::string>& ranking_families() {
  static const std::vector<std::string> f = {"needle",         "bridge-window",       "boundary-tail",
                                             "semantic-exact", "semantic-paraphrase", "semantic-distractor"};
  return f;
}

RankingSpec ranking_spec(const TaskOptions& o) {
  RankingSpec s;
  for (const std::string& f : split_list(o.families, "--families")) {
    const auto& k = ranking_families();
    require(
        std::find(k.begin(), k.end(), f) != k.end(), "--families: unknown family '", f,
        "' (known: needle, bridge-window, boundary-tail, semantic-exact, semantic-paraphrase, semantic-distractor)");
    s.families.push_back(f);
  }
  require(!s.families.empty(), "--families: empty list");
  s.items_val = o.rows_val;
  s.rows_train = o.rows_train;
  require(o.context >= 16 && o.context <= 65536, "--context must be in [16, 65536] (got ", o.context, ")");
  // A block longer than the context has no boundary inside it; 2b in 64 bits (b near INT_MAX).
  const int b = o.b > 0 ? o.b : 32, w = o.w > 0 ? o.w : 32;  // 0: the ranking defaults (prepare.hpp)
  require(b >= 2 && b <= o.context, "--b must be in [2, --context = ", o.context, "] (got ", b, ")");
  require(w >= 2 && w % 2 == 0 && static_cast<std::int64_t>(w) <= 2 * static_cast<std::int64_t>(b),
          "--w must be even with 2 <= w <= 2b = ", 2 * static_cast<std::int64_t>(b), " (got ", w, ")");
  s.context = o.context;
  s.b = b;
  s.w = w;
  s.seed = o.seed;
  return s;
}

data::TaskData generate_ranking(const RankingSpec& s, const data::Tokenizer& tok, const std::vector<Token>& filler) {
  require(filler.size() > static_cast<std::size_t>(s.context) + 1, "filler corpus has ", filler.size(),
          " tokens, fewer than --context ", s.context);
  const int h = s.w / 2;
  auto enc = [&](const std::string& t) { return tok.encode(t); };
  struct Item {
    std::vector<Token> prompt;
    std::vector<std::vector<Token>> cands;
    int correct = 0, source_end = 0;
    std::string family;
  };
  auto make_item = [&](const std::string& fam, std::mt19937_64& rng, int slot) -> Item {
    std::uniform_int_distribution<std::size_t> pn(0, kNames.size() - 1), pv(0, kValues.size() - 1);
    const std::string name = kNames[pn(rng)];
    std::string name2 = kNames[pn(rng)];
    while (name2 == name) name2 = kNames[pn(rng)];
    const std::string val = kValues[pv(rng)];
    std::string val2 = kValues[pv(rng)];
    while (val2 == val) val2 = kValues[pv(rng)];
    Item it;
    it.family = fam;
    it.correct = slot;
    // candidates: the correct value in `slot`, the others distinct (the distractor value included)
    std::vector<std::string> vals(4);
    vals[static_cast<std::size_t>(slot)] = val;
    std::vector<std::string> others;
    if (fam == "semantic-distractor") others.push_back(val2);
    while (others.size() < 3) {
      const std::string v = kValues[pv(rng)];
      if (v != val && std::find(others.begin(), others.end(), v) == others.end()) others.push_back(v);
    }
    std::shuffle(others.begin(), others.end(), rng);
    for (int k = 0, j = 0; k < 4; ++k)
      if (k != slot) vals[static_cast<std::size_t>(k)] = others[static_cast<std::size_t>(j++)];
    for (const auto& v : vals) it.cands.push_back(enc(" " + v));
    auto window = [&](int n) {
      std::uniform_int_distribution<std::size_t> off(0, filler.size() - static_cast<std::size_t>(n) - 1);
      const std::size_t o = off(rng);
      return std::vector<Token>(filler.begin() + o, filler.begin() + o + n);
    };
    const auto value_part = enc(" The " + name + " is " + val);  // fact up to its value
    const auto dot = enc(".");
    const auto q = enc(query(name));
    if (fam == "semantic-exact" || fam == "semantic-paraphrase" || fam == "semantic-distractor") {
      it.prompt = value_part;
      it.source_end = static_cast<int>(it.prompt.size()) - 1;
      it.prompt.insert(it.prompt.end(), dot.begin(), dot.end());
      if (fam == "semantic-distractor") {
        const auto f2 = enc(fact(name2, val2));
        it.prompt.insert(it.prompt.end(), f2.begin(), f2.end());
      }
      const auto qq = fam == "semantic-paraphrase" ? enc(paraphrase(name)) : q;
      it.prompt.insert(it.prompt.end(), qq.begin(), qq.end());
      return it;
    }
    const int C = s.context, V = static_cast<int>(value_part.size()), Q = static_cast<int>(q.size());
    int value_end = 0, readout = C - 1;
    if (fam == "needle") {
      std::uniform_real_distribution<double> dep(0.1, 0.5);
      value_end = std::min(C - Q - 2, static_cast<int>(dep(rng) * C) + V - 1);
    } else if (fam == "bridge-window") {
      // the value (the source) in [p-h, p), the readout in [p, p+h), the query between them
      const int vlen = static_cast<int>(it.cands[static_cast<std::size_t>(slot)].size());
      require(h >= vlen, "--w: bridge-window items need h = w/2 >= ", vlen, " (the value's tokens; got h = ", h, ")");
      const int p = std::max(1, (C - h) / s.b) * s.b;
      bool ok = false;
      for (int tries = 0; tries < 1000 && !ok; ++tries) {
        std::uniform_int_distribution<int> so(0, h - vlen), ro(0, h - 1);
        value_end = p - 1 - so(rng);
        readout = p + ro(rng);
        ok = value_end - V + 1 >= 0 && readout - Q + 1 > value_end + 1;
      }
      require(ok, "--w: bridge width ", s.w, " leaves no room for the query (", Q,
              " tokens) inside the repaired window");
    } else {  // boundary-tail
      const int p = std::max(1, (C - Q - 4) / s.b) * s.b;
      std::vector<int> offs;
      for (int o = 1; o <= s.b; o *= 2) offs.push_back(o);
      std::uniform_int_distribution<std::size_t> po(0, offs.size() - 1);
      value_end = std::max(V - 1, p - offs[po(rng)]);
      readout = value_end + 2 + Q;
    }
    const int fact_start = value_end - V + 1;
    require(fact_start >= 0 && readout < 65536, "ranking layout does not fit --context ", C);
    it.prompt = window(readout + 1);
    std::copy(value_part.begin(), value_part.end(), it.prompt.begin() + fact_start);
    if (value_end + 1 < readout - Q + 1) it.prompt[static_cast<std::size_t>(value_end + 1)] = dot[0];
    std::copy(q.begin(), q.end(), it.prompt.begin() + (readout - Q + 1));
    it.source_end = value_end;
    return it;
  };
  data::TaskData d;
  d.vocab_size = tok.vocab_size();
  d.tokenizer = tok.name();
  d.source = "ranking";
  d.task = {{"name", "ranking"},
            {"families", s.families},
            {"items_val", s.items_val},
            {"rows_train", s.rows_train},
            {"context", s.context},
            {"b", s.b},
            {"w", s.w},
            {"seed", s.seed},
            {"values", kValues},
            {"names", kNames}};
  std::vector<Item> tr, va;
  std::mt19937_64 rt(s.seed * 7919ull + 1), rv(s.seed * 7919ull + 2);
  for (int i = 0; i < s.rows_train; ++i)
    tr.push_back(
        make_item(s.families[static_cast<std::size_t>(i) % s.families.size()], rt, (i / int(s.families.size())) % 4));
  for (const auto& f : s.families)
    for (int i = 0; i < s.items_val; ++i) va.push_back(make_item(f, rv, i % 4));
  int L = 0;
  for (const auto* v : {&tr, &va})
    for (const auto& it : *v)
      for (const auto& c : it.cands) L = std::max<int>(L, static_cast<int>(it.prompt.size() + c.size()));
  d.row_len = L + 1;
  const Token pad = enc(" ").at(0);
  auto emit = [&](data::TaskSplit& sp, const std::vector<Item>& items) {
    for (const auto& it : items) {
      std::vector<Token> row = it.prompt;
      const auto& c = it.cands[static_cast<std::size_t>(it.correct)];
      row.insert(row.end(), c.begin(), c.end());
      std::vector<std::uint8_t> m(it.prompt.size(), 0);
      m.resize(row.size(), 1);
      row.resize(static_cast<std::size_t>(d.row_len), pad);
      m.resize(row.size(), 0);
      sp.tokens.insert(sp.tokens.end(), row.begin(), row.end());
      sp.mask.insert(sp.mask.end(), m.begin(), m.end());
      sp.items.push_back({{"family", it.family},
                          {"prompt_len", it.prompt.size()},
                          {"candidates", it.cands},
                          {"correct", it.correct},
                          {"source_end", it.source_end},
                          {"readout", static_cast<int>(it.prompt.size()) - 1}});
    }
  };
  emit(d.train, tr);
  emit(d.val, va);
  return d;
}

void check_ranking_task(const data::TaskData& d) {
  try {
    const auto families = d.task.at("families").get<std::vector<std::string>>();
    auto integer_in = [](const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
      return v.is_number_integer() && v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
    };
    for (std::size_t i = 0; i < d.val.items.size(); ++i) {
      const auto& it = d.val.items[i];
      const auto& fam = it.at("family");
      require(fam.is_string() && std::find(families.begin(), families.end(), fam.get<std::string>()) != families.end(),
              "ranking task: validation item ", i, " has family ", fam.dump(), ", not one of the task's families ",
              d.task.at("families").dump());
      // prompt_len 0 read the probability at position -1; one past the row read the next row
      const auto& plen = it.at("prompt_len");
      require(integer_in(plen, 1, d.row_len - 1), "ranking task: validation item ", i, " has prompt_len ", plen.dump(),
              ", outside [1, row_len - 1 = ", d.row_len - 1, "]");
      const auto& cands = it.at("candidates");
      require(cands.is_array() && cands.size() == 4, "ranking task: validation item ", i,
              " needs 4 candidate token lists (got ", cands.dump(), ")");
      for (const auto& c : cands) {
        require(
            c.is_array() && !c.empty() && plen.get<std::int64_t>() + static_cast<std::int64_t>(c.size()) <= d.row_len,
            "ranking task: validation item ", i, ": candidate ", c.dump(), " is not a non-empty token list that fits ",
            "the row of ", d.row_len, " tokens after the prompt");
        for (const auto& t : c)
          require(integer_in(t, 0, d.vocab_size - 1), "ranking task: validation item ", i, ": candidate token ",
                  t.dump(), " outside [0, vocab_size = ", d.vocab_size, ")");
      }
      // the correct slot indexes the four candidate scores
      require(integer_in(it.at("correct"), 0, 3), "ranking task: validation item ", i, " has correct slot ",
              it.at("correct").dump(), ", outside [0, 3]");
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("ranking task: malformed metadata or items.json (", e.what(), ")"));
  }
}

std::vector<RankingOutcome> evaluate_ranking(const nn::Model<float>& model, const data::TaskData& d, int batch,
                                             int max_rows, const Progress& progress, const ProbsForward& forward) {
  return evaluate_ranking(model.config, forward ? forward : cpu_probs_forward(model), d, batch, max_rows, progress);
}

std::vector<RankingOutcome> evaluate_ranking(const nn::ModelConfig& c, const ProbsForward& probs,
                                             const data::TaskData& d, int batch, int max_rows,
                                             const Progress& progress) {
  require(static_cast<bool>(probs), "evaluate_ranking: no forward pass given");
  const std::size_t rows = d.rows(d.val);
  require(d.val.items.size() == rows, "ranking task: the validation split has no item list (items.json)");
  check_ranking_task(d);
  const std::size_t n = max_rows > 0 ? std::min<std::size_t>(rows, static_cast<std::size_t>(max_rows)) : rows;
  const int V = c.vocab_size, T = d.row_len - 1;
  check_model_fits(c, T, d.vocab_size, "ranking task");
  std::vector<RankingOutcome> out(n);
  const int per = std::max(1, batch / 4);
  std::vector<std::int32_t> x;
  for (std::size_t i0 = 0; i0 < n; i0 += static_cast<std::size_t>(per)) {
    const int NI = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(per), n - i0));
    const int B = 4 * NI;
    x.assign(static_cast<std::size_t>(B) * T, 0);
    std::vector<std::vector<Token>> seqs(static_cast<std::size_t>(B));
    for (int i = 0; i < NI; ++i) {
      const auto& it = d.val.items[i0 + i];
      const auto plen = it.at("prompt_len").get<std::size_t>();
      const std::size_t base = (i0 + i) * static_cast<std::size_t>(d.row_len);
      std::vector<Token> prompt(d.val.tokens.begin() + base, d.val.tokens.begin() + base + plen);
      for (int k = 0; k < 4; ++k) {
        auto s = prompt;
        const auto c = it.at("candidates")[k].get<std::vector<Token>>();
        s.insert(s.end(), c.begin(), c.end());
        require(s.size() <= static_cast<std::size_t>(d.row_len), "ranking item ", i0 + i,
                ": candidate longer than the row");
        for (std::size_t t = 0; t < s.size() && t < static_cast<std::size_t>(T); ++t) x[(4 * i + k) * T + t] = s[t];
        seqs[static_cast<std::size_t>(4 * i + k)] = std::move(s);
      }
    }
    const float* P = probs(x.data(), B, T);
    auto lp = [&](int row, std::size_t t, Token next) {  // log p(next | tokens <= t)
      return std::log(std::max(1e-30, double(P[(static_cast<std::size_t>(row) * T + t) * V + next])));
    };
    for (int i = 0; i < NI; ++i) {
      const auto& it = d.val.items[i0 + i];
      auto& o = out[i0 + i];
      o.family = it.at("family").get<std::string>();
      o.correct_slot = it.at("correct").get<int>();
      const auto plen = it.at("prompt_len").get<std::size_t>();
      double nll[4];
      for (int k = 0; k < 4; ++k) {
        const auto& s = seqs[static_cast<std::size_t>(4 * i + k)];
        nll[k] = 0;
        for (std::size_t t = plen; t < s.size(); ++t) nll[k] -= lp(4 * i + k, t - 1, s[t]);
      }
      o.chosen = static_cast<int>(std::min_element(nll, nll + 4) - nll);
      double best_wrong = INFINITY;
      for (int k = 0; k < 4; ++k)
        if (k != o.correct_slot) best_wrong = std::min(best_wrong, nll[k]);
      o.margin = best_wrong - nll[o.correct_slot];
      o.correct = o.margin > 0;
      const auto& s = seqs[static_cast<std::size_t>(4 * i + o.correct_slot)];
      for (std::size_t t = 1; t < plen; ++t) o.prompt_nll.push_back(-lp(4 * i + o.correct_slot, t - 1, s[t]));
    }
    if (progress) progress(static_cast<std::int64_t>(i0 + NI), static_cast<std::int64_t>(n));
  }
  return out;
}

output::Report run_ranking(const ProbeOptions& o, const data::TaskData& d) {
  using namespace detail;
  std::vector<ProbeModel> models;
  try {
    check_ranking_task(d);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("task '", o.data, "': ", e.what()));
  }
  for (const auto& c : o.checkpoints) models.push_back(load_checkpoint(o, c));
  check_pair(models, o.checkpoints);
  const auto families = d.task.at("families").get<std::vector<std::string>>();
  output::Report r;
  r.body["task"] = d.task;
  std::vector<std::vector<RankingOutcome>> all;
  std::vector<plot::Heatmap> heats;  // drawn after every model: ONE colour scale across them
  for (std::size_t m = 0; m < models.size(); ++m)
    check_model_fits(models[m].config, d.row_len - 1, d.vocab_size, "--checkpoint '" + o.checkpoints[m] + "'");
  const auto forwards = model_forwards(o, models);
  for (std::size_t m = 0; m < models.size(); ++m) {
    auto res =
        evaluate_ranking(models[m].config, forwards[m], d, o.batch, o.max_rows, make_progress(o, o.checkpoints[m]));
    output::Table t;
    if (o.checkpoints.size() > 1) t.name = model_table_name("ranking", m);
    t.title = "ranking: " + o.checkpoints[m] + " (4 balanced candidates, chance 0.25)";
    t.header = {"family", "items", "accuracy", "mean margin (nats)", "median margin"};
    std::size_t maxlen = 0;
    for (const auto& x : res) maxlen = std::max(maxlen, x.prompt_nll.size());
    Eigen::MatrixXd heat =
        Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(families.size()), static_cast<Eigen::Index>(maxlen));
    Eigen::MatrixXd cnt = heat;
    nlohmann::json jf = nlohmann::json::array();
    for (std::size_t f = 0; f < families.size(); ++f) {
      std::vector<double> margins;
      double c = 0;
      for (const auto& x : res) {
        if (x.family != families[f]) continue;
        margins.push_back(x.margin);
        c += x.correct;
        for (std::size_t i = 0; i < x.prompt_nll.size(); ++i) {
          heat(static_cast<Eigen::Index>(f), static_cast<Eigen::Index>(i)) += x.prompt_nll[i];
          cnt(static_cast<Eigen::Index>(f), static_cast<Eigen::Index>(i)) += 1;
        }
      }
      if (margins.empty()) continue;
      double mean = 0;
      for (double v : margins) mean += v;
      mean /= double(margins.size());
      std::sort(margins.begin(), margins.end());
      const std::size_t h = margins.size() / 2;  // an even count: the mean of the two middle values
      const double med = margins.size() % 2 ? margins[h] : 0.5 * (margins[h - 1] + margins[h]);
      const double acc = c / double(margins.size());
      t.add_row({families[f], fmt_int(static_cast<long long>(margins.size())), fmt(acc, 4), fmt(mean, 4), fmt(med, 4)});
      std::vector<double> by_pos;
      for (Eigen::Index i = 0; i < heat.cols(); ++i)
        by_pos.push_back(cnt(static_cast<Eigen::Index>(f), i) > 0
                             ? heat(static_cast<Eigen::Index>(f), i) / cnt(static_cast<Eigen::Index>(f), i)
                             : std::nan(""));
      jf.push_back({{"family", families[f]},
                    {"items", margins.size()},
                    {"accuracy", acc},
                    {"mean_margin", mean},
                    {"median_margin", med},
                    {"prompt_nll_by_position", by_pos}});
    }
    r.tables.push_back(t);
    r.body["models"].push_back({{"checkpoint", o.checkpoints[m]}, {"families", jf}});
    if (!o.plot.empty()) {
      plot::Heatmap h;
      h.title = "ranking: mean prompt-token NLL by position, " + o.checkpoints[m];
      h.xlabel = "prompt position (token predicted)";
      h.ylabel = "task family";
      h.value_label = "mean NLL (nats)";
      h.y_labels = families;
      h.masked_label = "grey: no prompt of this family reaches this position";
      for (Eigen::Index i = 0; i < heat.size(); ++i) heat(i) = cnt(i) > 0 ? heat(i) / cnt(i) : std::nan("");
      h.values = heat;
      h.x0 = 1;
      heats.push_back(std::move(h));
    }
    all.push_back(std::move(res));
  }
  if (!heats.empty()) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& h : heats)
      for (Eigen::Index i = 0; i < h.values.size(); ++i)
        if (std::isfinite(h.values(i))) lo = std::min(lo, h.values(i)), hi = std::max(hi, h.values(i));
    for (std::size_t m = 0; m < heats.size(); ++m) {
      if (hi > lo) heats[m].cb_min = lo, heats[m].cb_max = hi;
      if (heats.size() > 1) heats[m].title += " (colour scale shared by both models)";
      plot::save(heats[m], m == 0 ? o.plot : plot_path(o.plot, "model" + std::to_string(m + 1)));
    }
  }
  r.notes.push_back(
      "A candidate's score is the summed NLL of its tokens after the prompt; an item counts when the "
      "correct candidate's NLL is strictly the lowest. Margin = best wrong NLL - correct NLL.");
  if (all.size() == 2) {
    std::vector<std::uint8_t> a, b;
    for (std::size_t i = 0; i < all[0].size(); ++i) {
      a.push_back(all[0][i].correct);
      b.push_back(all[1][i].correct);
    }
    add_paired(r, "paired: A = " + o.checkpoints[0] + " vs B = " + o.checkpoints[1] + " (all families)",
               paired_compare(a, b, o.resamples, o.level, o.boot_seed), o, "all");
    for (const auto& f : families) {
      std::vector<std::uint8_t> pa, pb;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (all[0][i].family == f) {
          pa.push_back(a[i]);
          pb.push_back(b[i]);
        }
      if (!pa.empty())
        add_paired(r, "paired, family " + f, paired_compare(pa, pb, o.resamples, o.level, o.boot_seed), o, f);
    }
  }
  return r;
}

}  // namespace cf::probe
