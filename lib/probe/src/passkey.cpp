#include "cf/probe/passkey.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/probe/detail/report_util.hpp"

namespace cf::probe {

using output::fmt;
using output::fmt_int;

PasskeySpec passkey_spec(const TaskOptions& o) {
  PasskeySpec s;
  s.lengths = parse_int_list(o.lengths, "--lengths");
  require(!s.lengths.empty(), "--lengths: give a list of context lengths, not 'all'");
  for (int L : s.lengths) require(L >= 1 && L <= 65536, "--lengths: context length ", L, " outside [1, 65536]");
  s.depths = parse_real_list(o.depths, "--depths");
  for (double x : s.depths) require(x >= 0.0 && x <= 1.0, "--depths: depth ", x, " outside [0, 1]");
  require(o.reps >= 1 && o.reps <= 100000, "--reps must be in [1, 100000] (got ", o.reps, ")");
  s.reps = o.reps;
  s.rows_train = o.rows_train;
  s.seed = o.seed;
  return s;
}

std::string passkey_needle(const std::string& digits) { return " The passkey is " + digits + "."; }

data::TaskData generate_passkey(const PasskeySpec& s, const data::Tokenizer& tok,
                                const std::vector<data::Token>& filler) {
  const auto prompt = tok.encode(kPasskeyPrompt);
  const auto pad = tok.encode(" ");
  require(!pad.empty(), "tokenizer produced no token for a space");
  int max_ans = 0;
  for (const char* dg : {"00000", "99999", "12345", "54321", "10101"})
    max_ans = std::max<int>(max_ans, static_cast<int>(tok.encode(std::string(" ") + dg + ".").size()));
  const int needle_len_max = static_cast<int>(tok.encode(passkey_needle("00000")).size()) + 3;
  const int maxL = *std::max_element(s.lengths.begin(), s.lengths.end());
  for (int L : s.lengths)
    require(L >= needle_len_max + static_cast<int>(prompt.size()) + 1, "--lengths: context length ", L,
            " is too short for the needle and the prompt (need >= ", needle_len_max + prompt.size() + 1, " tokens)");
  require(s.in_context >= 0, "passkey: in-context length ", s.in_context, " is negative");
  require(filler.size() > static_cast<std::size_t>(maxL) + 1, "filler corpus has ", filler.size(),
          " tokens, fewer than the longest context ", maxL);
  data::TaskData d;
  d.vocab_size = tok.vocab_size();
  d.tokenizer = tok.name();
  d.row_len = maxL + max_ans + 2;
  d.task = {{"name", "passkey"},          {"lengths", s.lengths},
            {"depths", s.depths},         {"reps", s.reps},
            {"rows_train", s.rows_train}, {"seed", s.seed},
            {"prompt", kPasskeyPrompt},   {"needle", passkey_needle("NNNNN")},
            {"tokenizer", tok.name()}};
  if (s.in_context > 0) d.task["in_context"] = s.in_context;
  auto make = [&](data::TaskSplit& sp, int rows, std::uint64_t salt, bool grid) {
    std::mt19937_64 rng(s.seed * 1000003ull + salt);
    std::uniform_int_distribution<int> digit(0, 9);
    const std::size_t cells = s.lengths.size() * s.depths.size();
    for (int i = 0; i < rows; ++i) {
      const std::size_t cell = grid ? static_cast<std::size_t>(i) / static_cast<std::size_t>(s.reps) % cells
                                    : static_cast<std::size_t>(i) % cells;
      const int L = s.lengths[cell / s.depths.size()];
      const double depth = s.depths[cell % s.depths.size()];
      std::string dg(5, '0');
      for (auto& c : dg) c = static_cast<char>('0' + digit(rng));
      const auto needle = tok.encode(passkey_needle(dg));
      const auto ans = tok.encode(" " + dg + ".");  // the period teaches the model to stop
      const int F = L - static_cast<int>(needle.size()) - static_cast<int>(prompt.size());
      std::uniform_int_distribution<std::size_t> off(0, filler.size() - static_cast<std::size_t>(F) - 1);
      const std::size_t o = off(rng);
      const int k = static_cast<int>(std::lround(depth * F));
      std::vector<data::Token> row(filler.begin() + o, filler.begin() + o + k);
      row.insert(row.end(), needle.begin(), needle.end());
      row.insert(row.end(), filler.begin() + o + k, filler.begin() + o + F);
      row.insert(row.end(), prompt.begin(), prompt.end());
      std::vector<std::uint8_t> m(row.size(), 0);
      row.insert(row.end(), ans.begin(), ans.end());
      m.resize(row.size(), 1);
      row.resize(static_cast<std::size_t>(d.row_len), pad[0]);
      m.resize(row.size(), 0);
      sp.tokens.insert(sp.tokens.end(), row.begin(), row.end());
      sp.mask.insert(sp.mask.end(), m.begin(), m.end());
      sp.items.push_back({{"length", L}, {"depth", depth}, {"passkey", dg}, {"needle_pos", k}, {"prompt_len", L}});
    }
  };
  make(d.train, s.rows_train, 1, false);
  make(d.val, static_cast<int>(s.lengths.size() * s.depths.size()) * s.reps, 2, true);
  d.source = "passkey";
  return d;
}

PasskeyScore score_passkey_answer(const std::string& decoded, const std::string& passkey) {
  std::size_t k = 0;
  while (k < decoded.size() && decoded[k] == ' ') ++k;
  std::string digits;
  while (k < decoded.size() && decoded[k] >= '0' && decoded[k] <= '9') digits += decoded[k++];
  return {digits == passkey, digits.size() >= 5 && digits.compare(0, 5, passkey) == 0};
}

std::string passkey_regime(const data::TaskData& d, int length) {
  const std::int64_t in = d.task.value("in_context", std::int64_t{0});
  if (in <= 0) return "";
  return length <= in ? "in-context" : "out-of-context";
}

void check_passkey_task(const data::TaskData& d) {
  try {
    const auto lengths = d.task.at("lengths").get<std::vector<int>>();
    const auto depths = d.task.at("depths").get<std::vector<double>>();
    require(!lengths.empty() && !depths.empty(), "passkey task: the metadata lists no context lengths or no depths");
    if (d.task.contains("in_context"))
      require(d.task["in_context"].is_number_integer() && d.task["in_context"].get<std::int64_t>() >= 0,
              "passkey task: the metadata's in_context is ", d.task["in_context"].dump(),
              ", not a context length >= 0");
    for (std::size_t i = 0; i < d.val.items.size(); ++i) {
      const auto& it = d.val.items[i];
      const auto& L = it.at("length");
      const auto& depth = it.at("depth");
      const auto& pk = it.at("passkey");
      // a length outside the list indexed past the result grid; one beyond the row read the next row
      require(L.is_number_integer() && L.get<std::int64_t>() >= 1 && L.get<std::int64_t>() <= d.row_len &&
                  std::find(lengths.begin(), lengths.end(), L.get<std::int64_t>()) != lengths.end(),
              "passkey task: validation item ", i, " has length ", L.dump(), ", not one of the task's lengths ",
              d.task.at("lengths").dump(), " within the row of ", d.row_len, " tokens");
      require(depth.is_number() && std::find(depths.begin(), depths.end(), depth.get<double>()) != depths.end(),
              "passkey task: validation item ", i, " has depth ", depth.dump(), ", not one of the task's depths ",
              d.task.at("depths").dump());
      // an empty passkey would count every answer without digits as correct
      require(pk.is_string() && !pk.get<std::string>().empty() &&
                  pk.get<std::string>().find_first_not_of("0123456789") == std::string::npos,
              "passkey task: validation item ", i, " has passkey ", pk.dump(), ", not a string of digits");
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("passkey task: malformed metadata or items.json (", e.what(), ")"));
  }
}

std::vector<PasskeyOutcome> evaluate_passkey(const nn::Model<float>& model, const data::TaskData& d,
                                             const data::Tokenizer& tok, int max_new, int batch, int max_rows,
                                             const Progress& progress, const ProbsForward& forward) {
  return evaluate_passkey(model.config, forward ? forward : cpu_probs_forward(model), d, tok, max_new, batch, max_rows,
                          progress);
}

std::vector<PasskeyOutcome> evaluate_passkey(const nn::ModelConfig& c, const ProbsForward& probs,
                                             const data::TaskData& d, const data::Tokenizer& tok, int max_new,
                                             int batch, int max_rows, const Progress& progress) {
  require(static_cast<bool>(probs), "evaluate_passkey: no forward pass given");
  require(max_new >= 1 && max_new <= 64, "--max-new must be in [1, 64] (got ", max_new, ")");
  const std::size_t rows = d.rows(d.val);
  require(d.val.items.size() == rows, "passkey task: the validation split has no item list (items.json)");
  check_passkey_task(d);
  const std::size_t n = max_rows > 0 ? std::min<std::size_t>(rows, static_cast<std::size_t>(max_rows)) : rows;
  const int V = c.vocab_size;
  std::vector<PasskeyOutcome> out(n);
  std::map<int, std::vector<std::size_t>> by_len;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& it = d.val.items[i];
    out[i].length = it.at("length").get<int>();
    out[i].depth = it.at("depth").get<double>();
    out[i].passkey = it.at("passkey").get<std::string>();
    check_model_fits(c, out[i].length, d.vocab_size, "passkey item " + std::to_string(i));
    by_len[out[i].length].push_back(i);
  }
  std::int64_t done = 0;
  for (const auto& [L, idx] : by_len) {
    for (std::size_t b0 = 0; b0 < idx.size(); b0 += static_cast<std::size_t>(batch)) {
      const int B = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(batch), idx.size() - b0));
      std::vector<std::vector<std::int32_t>> seq(static_cast<std::size_t>(B));
      for (int b = 0; b < B; ++b) {
        const std::size_t base = idx[b0 + b] * static_cast<std::size_t>(d.row_len);
        seq[b].assign(d.val.tokens.begin() + base, d.val.tokens.begin() + base + L);
      }
      std::vector<std::vector<data::Token>> gen(static_cast<std::size_t>(B));
      for (int step = 0; step < max_new && L + step <= c.block_size; ++step) {
        const int T = L + step;
        std::vector<std::int32_t> x(static_cast<std::size_t>(B) * T);
        for (int b = 0; b < B; ++b)
          std::copy(seq[b].begin(), seq[b].end(), x.begin() + static_cast<std::ptrdiff_t>(b) * T);
        const float* P = probs(x.data(), B, T);
        for (int b = 0; b < B; ++b) {
          const float* p = P + (static_cast<std::size_t>(b) * T + T - 1) * V;
          const int arg = static_cast<int>(std::max_element(p, p + V) - p);
          seq[b].push_back(arg);
          gen[b].push_back(static_cast<data::Token>(arg));
        }
      }
      for (int b = 0; b < B; ++b) {
        auto& o = out[idx[b0 + b]];
        o.decoded = tok.decode(gen[b]);
        const PasskeyScore sc = score_passkey_answer(o.decoded, o.passkey);
        o.correct = sc.exact;
        o.prefix_match = sc.prefix_match;
      }
      done += B;
      if (progress) progress(done, static_cast<std::int64_t>(n));
    }
  }
  return out;
}

output::Report run_passkey(const ProbeOptions& o, const data::TaskData& d) {
  using namespace detail;
  try {
    check_passkey_task(d);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("task '", o.data, "': ", e.what()));
  }
  // the answer is decoded with the task's tokeniser: a metadata file naming another one than its
  // token ids were made with (tokenizer "gpt2" over byte ids) decoded every answer wrongly, exit 0
  require(d.tokenizer == "gpt2" || d.tokenizer == "byte", "task '", o.data, "': passkey answers are decoded with ",
          "the tokenizer 'byte' or 'gpt2', not '", d.tokenizer, "'");
  const auto tok = data::Tokenizer::create(d.tokenizer);
  require(tok.vocab_size() == d.vocab_size, "task '", o.data, "': the tokenizer '", d.tokenizer, "' has ",
          tok.vocab_size(), " tokens but the task's vocab_size is ", d.vocab_size);
  std::vector<ProbeModel> models;
  for (const auto& c : o.checkpoints) models.push_back(load_checkpoint(o, c));
  check_pair(models, o.checkpoints);
  const auto lengths = d.task.at("lengths").get<std::vector<int>>();
  const auto depths = d.task.at("depths").get<std::vector<double>>();
  const std::int64_t in_context = d.task.value("in_context", std::int64_t{0});
  output::Report r;
  r.body["task"] = d.task;
  std::vector<std::vector<PasskeyOutcome>> all;
  plot::LinePlot curve;
  curve.title = "passkey: exact match by depth (all lengths)";
  curve.xlabel = "needle depth (% of the context)";
  curve.ylabel = "exact-match accuracy";
  curve.y_min = 0;
  curve.y_max = 1.02;
  // every model checked before the first is evaluated: the answers are generated tokens decoded
  // with the task's tokenizer, so the vocabularies must be the same (a larger one could emit ids the
  // tokenizer cannot decode, found only at the end, or not at all)
  for (std::size_t m = 0; m < models.size(); ++m) {
    const std::string what = "--checkpoint '" + o.checkpoints[m] + "'";
    for (int L : lengths) check_model_fits(models[m].config, L, d.vocab_size, what);
    require(models[m].config.vocab_size == d.vocab_size, what, ": the model has vocab_size ",
            models[m].config.vocab_size, " but the task's tokenizer '", d.tokenizer, "' has ", d.vocab_size,
            ": its generated answers could not be decoded (evaluate a model trained with that tokenizer)");
  }
  const auto forwards = model_forwards(o, models);
  for (std::size_t m = 0; m < models.size(); ++m) {
    auto res = evaluate_passkey(models[m].config, forwards[m], d, tok, o.max_new, o.batch, o.max_rows,
                                make_progress(o, o.checkpoints[m]));
    Eigen::MatrixXd acc = Eigen::MatrixXd::Zero(lengths.size(), depths.size()), cnt = acc;
    for (const auto& x : res) {
      const auto li = std::find(lengths.begin(), lengths.end(), x.length) - lengths.begin();
      const auto di = std::find(depths.begin(), depths.end(), x.depth) - depths.begin();
      acc(li, di) += x.correct;
      cnt(li, di) += 1;
    }
    output::Table t;
    if (o.checkpoints.size() > 1) t.name = model_table_name("passkey_exact_match", m);
    t.title = "passkey exact match: " + o.checkpoints[m] + " (rows = context length, columns = depth)";
    t.header = {"length"};
    if (in_context > 0) t.header.push_back("regime");
    for (double x : depths) t.header.push_back("depth " + fmt(x, 3));
    if (in_context > 0) t.header.push_back("all depths");
    nlohmann::json grid = nlohmann::json::array();
    for (std::size_t li = 0; li < lengths.size(); ++li) {
      std::vector<std::string> row{fmt_int(lengths[li])};
      if (in_context > 0) row.push_back(passkey_regime(d, lengths[li]));
      for (std::size_t di = 0; di < depths.size(); ++di) {
        const double a = cnt(li, di) > 0 ? acc(li, di) / cnt(li, di) : std::nan("");
        row.push_back(fmt(a, 4));  // accuracies: 4 significant digits in every table
        grid.push_back({{"length", lengths[li]}, {"depth", depths[di]}, {"items", cnt(li, di)}, {"exact_match", a}});
      }
      if (in_context > 0) row.push_back(fmt(acc.row(li).sum() / std::max(1.0, cnt.row(li).sum()), 4));
      t.add_row(row);
    }
    r.tables.push_back(t);
    plot::Series s{o.checkpoints[m], {}, {}};  // the legend names the model
    for (std::size_t di = 0; di < depths.size(); ++di) {
      s.x.push_back(100.0 * depths[di]);
      s.y.push_back(acc.col(di).sum() / std::max(1.0, cnt.col(di).sum()));
    }
    curve.series.push_back(s);
    double tot = 0;
    for (const auto& x : res) tot += x.correct;
    double pre = 0;
    for (const auto& x : res) pre += x.prefix_match;
    const double nres = std::max<double>(1, res.size());
    r.body["models"].push_back({{"checkpoint", o.checkpoints[m]},
                                {"items", res.size()},
                                {"exact_match", tot / nres},
                                {"first_five_digits_match", pre / nres},
                                {"grid", grid}});
    std::string by_regime;
    if (in_context > 0)
      for (const char* regime : {"in-context", "out-of-context"}) {
        double hit = 0, n = 0;
        for (const auto& x : res)
          if (passkey_regime(d, x.length) == regime) hit += x.correct, n += 1;
        if (n == 0) continue;
        std::string key = "exact_match_" + std::string(regime);  // exact_match_in_context, as paired.in_context
        std::replace(key.begin(), key.end(), '-', '_');
        r.body["models"].back()[key] = hit / n;
        by_regime += std::string(", ") + regime + " " + fmt(hit / n, 4);
      }
    r.notes.push_back(o.checkpoints[m] + ": exact match " + fmt(tot / nres, 4) + by_regime +
                      "; first five decoded digits correct (more digits may follow) " + fmt(pre / nres, 4));
    if (!o.plot.empty()) {
      plot::Heatmap h;
      h.title = "passkey exact match: " + o.checkpoints[m] + " (colour scale 0..1, the same for every model)";
      h.xlabel = "needle depth (% of the context)";
      h.ylabel = in_context > 0 ? "context length (tokens; in = in-context, trained up to " +
                                      std::to_string(in_context) + "; out = beyond)"
                                : "context length (tokens)";
      h.value_label = "exact-match accuracy";
      h.y_up = true;
      for (double x : depths) h.x_labels.push_back(fmt(100.0 * x, 3));
      for (int L : lengths)
        h.y_labels.push_back(std::to_string(L) + (in_context <= 0 ? "" : L <= in_context ? " in" : " out"));
      h.cb_min = 0;  // ONE scale: 0.75 of one model is the colour of 0.75 of the other
      h.cb_max = 1;
      for (Eigen::Index i = 0; i < acc.size(); ++i) acc(i) = cnt(i) > 0 ? acc(i) / cnt(i) : std::nan("");
      h.values = acc;
      h.masked_label = "grey: no items at this length and depth";
      plot::save(h, plot_path(o.plot, "heatmap" + std::to_string(m + 1)));
    }
    all.push_back(std::move(res));
  }
  if (!o.plot.empty()) plot::save(curve, o.plot);
  r.notes.push_back(
      "Greedy decoding of " + std::to_string(o.max_new) +
      " tokens; an item counts when the leading digit run of the decoded text equals the 5-digit passkey.");
  if (all.size() == 2) {
    std::vector<std::uint8_t> a, b;
    for (std::size_t i = 0; i < all[0].size(); ++i) {
      a.push_back(all[0][i].correct);
      b.push_back(all[1][i].correct);
    }
    const std::string title = "paired: A = " + o.checkpoints[0] + " vs B = " + o.checkpoints[1];
    add_paired(r, title, paired_compare(a, b, o.resamples, o.level, o.boot_seed), o, "all");
    // the paper's claim is about the regimes apart: rewiring keeps accuracy beyond the trained length
    if (in_context > 0)
      for (const char* regime : {"in-context", "out-of-context"}) {
        std::vector<std::uint8_t> ra, rb;
        for (std::size_t i = 0; i < all[0].size(); ++i)
          if (passkey_regime(d, all[0][i].length) == regime) ra.push_back(a[i]), rb.push_back(b[i]);
        if (ra.empty()) continue;
        std::string key = regime;
        std::replace(key.begin(), key.end(), '-', '_');
        add_paired(r, title + ", " + regime + " lengths", paired_compare(ra, rb, o.resamples, o.level, o.boot_seed), o,
                   key);
      }
  }
  return r;
}

}  // namespace cf::probe
