// Multiple-choice scoring (cf/probe/multiple_choice.hpp): the checkpoint's tokenizer, the
// lm-evaluation-harness context / continuation split, and batched forward passes that sum the
// continuation's log-likelihood.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "cf/core/error.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/data/unicode.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/probe/multiple_choice.hpp"

namespace cf::probe {

Encoder make_encoder(const std::string& checkpoint, int vocab_size, const std::string& gpt2_dir, std::string* name) {
  std::error_code ec;
  const auto tj = std::filesystem::path(checkpoint) / "tokenizer.json";
  if (std::filesystem::is_directory(checkpoint, ec) && std::filesystem::exists(tj, ec)) {
    const auto tok = hf::HfTokenizer::load(tj.string());
    if (name) *name = "tokenizer.json";
    const std::string file = tj.string();
    return [tok, vocab_size, file](std::string_view s) {
      std::vector<std::int32_t> ids = tok->encode(s);
      for (auto id : ids)
        require(id >= 0 && id < vocab_size, "'", file, "' produced id ", id,
                " but the model has vocab_size = ", vocab_size);
      return ids;
    };
  }
  std::string kind;
  if (vocab_size == data::kByteVocabSize)
    kind = "byte";
  else if (vocab_size == data::kGpt2VocabSize)
    kind = "gpt2";
  else
    throw InvalidArgument(str("--checkpoint '", checkpoint,
                              "': text needs a byte (256) or GPT-2 BPE (50,257) "
                              "vocabulary, or a Hugging Face folder with tokenizer.json, but the model has "
                              "vocab_size = ",
                              vocab_size));
  const auto tok = std::make_shared<const data::Tokenizer>(data::Tokenizer::create(kind, gpt2_dir));
  if (name) *name = tok->name();
  return [tok](std::string_view s) {
    const auto t = tok->encode(s);
    return std::vector<std::int32_t>(t.begin(), t.end());
  };
}

McEncoded encode_item(const McItem& item, const Encoder& enc) {
  // _encode_pair: trailing white space of the context moves to the continuation's front
  const auto cps = data::utf8_decode(item.context);
  std::size_t keep = cps.size();
  while (keep > 0 && python_isspace(cps[keep - 1])) --keep;
  require(keep > 0, "the context is empty after removing its trailing white space");
  const std::string context =
      data::utf8_encode(std::vector<char32_t>(cps.begin(), cps.begin() + static_cast<std::ptrdiff_t>(keep)));
  const std::string moved = item.context.substr(context.size());
  McEncoded e;
  e.context = enc(context);
  require(!e.context.empty(), "the context encodes to no token");
  for (std::size_t k = 0; k < item.choices.size(); ++k) {
    const std::vector<std::int32_t> whole = enc(context + moved + " " + item.choices[k]);
    require(whole.size() > e.context.size(), "choice ", k, " encodes to no token after the context");
    e.continuations.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(e.context.size()), whole.end());
  }
  return e;
}

int argmax_first(const std::vector<double>& v) {
  require(!v.empty(), "argmax of an empty vector");
  int best = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<std::size_t>(best)]) best = static_cast<int>(i);
  return best;
}

namespace {
// Bytes of logits one forward pass may hold (the largest buffer for a 50,257-token vocabulary).
constexpr double kLogitBudget = 1024.0 * 1024.0 * 1024.0;

// One (item, choice) row: the model input and where its continuation is scored.
struct Row {
  std::size_t item = 0, choice = 0;
  std::vector<std::int32_t> input;    // (context + continuation)[start : L - 1]
  int first = 0;                      // input position that predicts the first continuation token
  std::vector<std::int32_t> targets;  // the continuation
  int dropped = 0;
};
}  // namespace

std::vector<McScore> score_items(const nn::Model<float>& model, const std::vector<McEncoded>& enc,
                                 const std::vector<McItem>& items, int batch, bool truncate_left,
                                 const McProgress& progress, const LogprobForward& forward) {
  require(batch >= 1, "--batch must be >= 1 (got ", batch, ")");
  require(enc.size() == items.size(), "score_items: ", enc.size(), " encodings for ", items.size(), " items");
  const int bs = model.config.block_size;
  std::vector<McScore> out(items.size());
  std::vector<Row> rows;
  // identical rows (a choice repeated within an item or across items with the same context) are
  // computed once: equal inputs then give bit-equal log-likelihoods, so ties stay ties in float32
  std::map<std::vector<std::int32_t>, std::size_t> seen;
  std::vector<std::pair<std::size_t, std::size_t>> copies;  // (row, index into `rows` holding its value)
  std::vector<Row> dup_rows;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& e = enc[i];
    auto& sc = out[i];
    sc.loglik.assign(e.continuations.size(), 0.0);
    for (std::size_t k = 0; k < e.continuations.size(); ++k) {
      const auto& cont = e.continuations[k];
      const int c = static_cast<int>(e.context.size()), n = static_cast<int>(cont.size()), L = c + n;
      require(n <= bs, "line ", items[i].line, ": choice ", k, " is ", n, " tokens, above the model's block_size ", bs,
              ": no context token would remain");
      const int start = std::max(0, L - 1 - bs);
      require(start == 0 || truncate_left, "line ", items[i].line, ": context + choice ", k, " is ", L - 1,
              " input tokens, above the model's block_size ", bs,
              " (--truncate refuse; --truncate left keeps the last ", bs, ")");
      Row r;
      r.item = i;
      r.choice = k;
      for (int t = start; t < L - 1; ++t)
        r.input.push_back(t < c ? e.context[static_cast<std::size_t>(t)] : cont[static_cast<std::size_t>(t - c)]);
      r.first = c - 1 - start;
      r.targets = cont;
      r.dropped = start;
      sc.n_tokens.push_back(n);
      sc.n_chars.push_back(code_points(items[i].choices[k]));
      sc.dropped = std::max(sc.dropped, start);
      std::vector<std::int32_t> key = r.input;
      key.push_back(-1);
      key.insert(key.end(), r.targets.begin(), r.targets.end());
      const auto [at, fresh] = seen.emplace(std::move(key), rows.size());
      if (fresh) {
        rows.push_back(std::move(r));
      } else {
        copies.emplace_back(dup_rows.size(), at->second);
        dup_rows.push_back(std::move(r));
      }
    }
  }
  nn::Workspace<float> ws;
  std::vector<std::int32_t> x, y;
  std::vector<float> lp;
  const std::int64_t total = static_cast<std::int64_t>(rows.size());
  // rows longest first (as the harness orders its requests), so a batch pads little; a batch also
  // stops where its logits (rows x length x vocab floats) would pass kLogitBudget bytes
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return rows[a].input.size() > rows[b].input.size(); });
  const double per_token = 4.0 * model.config.vocab_size;
  for (std::size_t r0 = 0; r0 < order.size();) {
    const int T = std::max(1, static_cast<int>(rows[order[r0]].input.size()));
    const auto fit = static_cast<std::size_t>(std::max(1.0, std::floor(kLogitBudget / (per_token * T))));
    const std::size_t r1 = std::min({order.size(), r0 + static_cast<std::size_t>(batch), r0 + fit});
    const int B = static_cast<int>(r1 - r0);
    // right padding with token 0 and no target: causal masks keep it out of the scored positions
    x.assign(static_cast<std::size_t>(B) * T, 0);
    y.assign(static_cast<std::size_t>(B) * T, -1);
    for (int b = 0; b < B; ++b) {
      const Row& r = rows[order[r0 + static_cast<std::size_t>(b)]];
      std::copy(r.input.begin(), r.input.end(), x.begin() + static_cast<std::ptrdiff_t>(b) * T);
      for (std::size_t j = 0; j < r.targets.size(); ++j)
        y[static_cast<std::size_t>(b) * T + static_cast<std::size_t>(r.first) + j] = r.targets[j];
    }
    if (forward)
      forward(x.data(), y.data(), B, T, lp);
    else
      nn::forward_backward<float>(model, x.data(), y.data(), B, T, nullptr, ws, nullptr, &lp);
    for (int b = 0; b < B; ++b) {
      const Row& r = rows[order[r0 + static_cast<std::size_t>(b)]];
      double s = 0;
      for (std::size_t j = 0; j < r.targets.size(); ++j)
        s += static_cast<double>(lp[static_cast<std::size_t>(b) * T + static_cast<std::size_t>(r.first) + j]);
      out[r.item].loglik[r.choice] = s;
    }
    r0 = r1;
    if (progress) progress(static_cast<std::int64_t>(r1), total);
  }
  for (const auto& [d, src] : copies)
    out[dup_rows[d].item].loglik[dup_rows[d].choice] = out[rows[src].item].loglik[rows[src].choice];
  for (std::size_t i = 0; i < out.size(); ++i)
    for (std::size_t k = 0; k < out[i].loglik.size(); ++k)
      if (!std::isfinite(out[i].loglik[k]))  // a NaN would lose every comparison of the argmax silently
        throw Error(str("line ", items[i].line, ", choice ", k, ": the log-likelihood is ",
                        std::isnan(out[i].loglik[k]) ? "NaN" : "infinite",
                        ": the model's forward pass is not finite (damaged weights?)"));
  for (auto& sc : out) {
    std::vector<double> by_char(sc.loglik.size()), by_token(sc.loglik.size());
    for (std::size_t k = 0; k < sc.loglik.size(); ++k) {
      by_char[k] = sc.loglik[k] / sc.n_chars[k];
      by_token[k] = sc.loglik[k] / sc.n_tokens[k];
    }
    sc.pred = argmax_first(sc.loglik);
    sc.pred_char = argmax_first(by_char);
    sc.pred_token = argmax_first(by_token);
  }
  return out;
}

}  // namespace cf::probe
