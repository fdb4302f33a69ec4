// Token-set preparation (cf/data/prepare.hpp).
#include "cf/data/prepare.hpp"

#include <chrono>
#include <cmath>

#include "cf/data/corpus.hpp"
#include "cf/data/token_file.hpp"
#include "cf/data/tokenizer.hpp"

namespace cf::data {

using output::fmt;
using output::fmt_int;

std::string truncate_utf8(std::string text, long long n) {
  if (n <= 0 || static_cast<long long>(text.size()) <= n) return text;
  std::size_t cut = static_cast<std::size_t>(n);
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text;
}

output::Report prepare_token_set(const PrepareRequest& req) {
  const auto tokenizer = Tokenizer::create(req.tokenizer, req.gpt2_dir);

  const auto t0 = std::chrono::steady_clock::now();
  const std::string text = truncate_utf8(load_corpus(req.corpus), req.max_chars);
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<Token> tokens = tokenizer.encode(text);
  const auto t2 = std::chrono::steady_clock::now();
  const TokenSplit split = split_tokens(tokens, req.val_fraction);
  TokenMeta meta;
  meta.vocab_size = tokenizer.vocab_size();
  meta.tokenizer = tokenizer.name();
  meta.source = req.corpus;
  write_token_files(req.out, split, meta);

  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double enc_s = std::chrono::duration<double>(t2 - t1).count();
  const double h = unigram_entropy_nats(split.train);
  const double chars_per_token = tokens.empty() ? 0.0 : static_cast<double>(text.size()) / tokens.size();

  output::Report r;
  r.body = {{"source", req.corpus},
            {"tokenizer", tokenizer.name()},
            {"vocab_size", meta.vocab_size},
            {"bytes", text.size()},
            {"tokens", tokens.size()},
            {"n_train", split.train.size()},
            {"n_val", split.val.size()},
            {"bytes_per_token", chars_per_token},
            {"unigram_entropy_nats", h},
            {"unigram_entropy_bits", h / std::log(2.0)},
            {"encode_seconds", enc_s},
            {"load_seconds", load_s},
            {"files", {req.out + ".train.bin", req.out + ".val.bin", req.out + ".meta.json"}}};
  output::Table t;
  t.title =
      "prepare-data: " + req.corpus + " -> " + req.out + ".{train,val}.bin + .meta.json, tokenizer " + tokenizer.name();
  t.header = {"quantity", "value"};
  t.add_row({"vocab size", fmt_int(meta.vocab_size)});  // numbers only: the CSV loads as numbers
  t.add_row({"text bytes", fmt_int(static_cast<long long>(text.size()))});
  t.add_row({"tokens", fmt_int(static_cast<long long>(tokens.size()))});
  t.add_row({"n_train", fmt_int(static_cast<long long>(split.train.size()))});
  t.add_row({"n_val", fmt_int(static_cast<long long>(split.val.size()))});
  t.add_row({"bytes per token", fmt(chars_per_token, 4)});
  t.add_row({"unigram entropy (nats)", fmt(h, 6)});
  t.add_row({"unigram entropy (bits)", fmt(h / std::log(2.0), 6)});
  t.add_row({"encode time (s)", fmt(enc_s, 3)});
  r.tables.push_back(t);
  r.notes.push_back("A trained model's validation loss (nats/token) should go well below the unigram entropy.");
  return r;
}

}  // namespace cf::data
