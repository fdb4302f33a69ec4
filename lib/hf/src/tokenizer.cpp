#include "cf/hf/tokenizer.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/gpt2_bpe.hpp"
#include "cf/data/unicode.hpp"
#include "cf/nn/capture.hpp"

namespace cf::hf {

namespace {

// The Split regexes of Llama-3 and Qwen2 tokenizer.json files (JSON-decoded).
const char* kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool nl(char32_t c) { return c == U'\r' || c == U'\n'; }
bool letter(char32_t c) { return data::is_letter(c); }
bool number(char32_t c) { return data::is_number(c); }
bool space(char32_t c) { return data::is_space(c); }
char32_t lower(char32_t c) { return c >= U'A' && c <= U'Z' ? c + 32 : c; }

// Length of the match of the Llama-3 / Qwen2 regex at position i of cps (>= 1).
std::size_t match_at(const std::vector<char32_t>& s, std::size_t i, int digits) {
  const std::size_t n = s.size();
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (s[i] == U'\'' && i + 1 < n) {
    const char32_t a = lower(s[i + 1]), b = i + 2 < n ? lower(s[i + 2]) : 0;
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    std::size_t j = i;
    if (!nl(s[j]) && !letter(s[j]) && !number(s[j])) ++j;
    if (j < n && letter(s[j])) {
      while (j < n && letter(s[j])) ++j;
      return j - i;
    }
    if (letter(s[i])) {  // the optional char absent
      j = i;
      while (j < n && letter(s[j])) ++j;
      return j - i;
    }
  }
  // \p{N}{1,digits}
  if (number(s[i])) {
    std::size_t j = i;
    while (j < n && number(s[j]) && static_cast<int>(j - i) < digits) ++j;
    return j - i;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  {
    std::size_t j = i;
    if (s[j] == U' ') ++j;
    const std::size_t k = j;
    while (j < n && !space(s[j]) && !letter(s[j]) && !number(s[j])) ++j;
    if (j > k) {
      while (j < n && nl(s[j])) ++j;
      return j - i;
    }
  }
  // whitespace run
  std::size_t e = i;
  while (e < n && space(s[e])) ++e;
  if (e > i) {
    // \s*[\r\n]+ : up to the last newline of the run
    for (std::size_t j = e; j > i; --j)
      if (nl(s[j - 1])) return j - i;
    // \s+(?!\S) : the run, less its last char when a non-space follows (if that leaves >= 1)
    if (e == n) return e - i;
    if (e - i >= 2) return e - i - 1;
    return e - i;  // \s+
  }
  return 1;  // unreachable for valid input (every char is in some class); keep progress
}

std::string join(const std::vector<char32_t>& cps, std::size_t a, std::size_t b) {
  std::string out;
  for (std::size_t i = a; i < b; ++i) data::utf8_append(out, cps[i]);
  return out;
}

}  // namespace

std::vector<std::string> llama3_pretokenize(std::string_view text, int digits) {
  const std::vector<char32_t> s = data::utf8_decode(text);
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t m = std::max<std::size_t>(1, match_at(s, i, digits));
    out.push_back(join(s, i, i + m));
    i += m;
  }
  return out;
}

std::shared_ptr<const HfTokenizer> HfTokenizer::load(const std::string& path0) {
  std::string path = path0;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) path = (std::filesystem::path(path) / "tokenizer.json").string();
  nlohmann::json j;
  try {
    j = cf::parse_json(read_file(path), path);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("'", path, "' is not valid JSON (", e.what(), ")"));
  }
  auto fail = [&](const std::string& what) {
    return InvalidArgument(
        str("tokenizer '", path, "': ", what, " is not supported; pass pre-tokenised ids with --tokens"));
  };
  auto t = std::shared_ptr<HfTokenizer>(new HfTokenizer());
  require(j.is_object() && j.contains("model") && j["model"].is_object(), "tokenizer '", path, "' has no model object");
  const auto& m = j["model"];
  if (m.value("type", std::string()) != "BPE") throw fail("model.type '" + m.value("type", std::string("?")) + "'");
  if (m.value("byte_fallback", false)) throw fail("model.byte_fallback = true");
  t->ignore_merges_ = m.value("ignore_merges", false);
  // normalizer: none or NFC
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const std::string nt = j["normalizer"].value("type", std::string("?"));
    if (nt != "NFC") throw fail("normalizer '" + nt + "'");
  }
  // pre-tokenizer
  auto byte_level = [&](const nlohmann::json& p, bool regex_allowed) {
    t->add_prefix_space_ = p.value("add_prefix_space", false);
    if (p.value("use_regex", true) != regex_allowed) throw fail("ByteLevel use_regex combination");
  };
  require(j.contains("pre_tokenizer") && j["pre_tokenizer"].is_object(), "tokenizer '", path, "' has no pre_tokenizer");
  const auto& pt = j["pre_tokenizer"];
  const std::string ptt = pt.value("type", std::string("?"));
  if (ptt == "ByteLevel") {
    byte_level(pt, true);
    t->split_ = SplitKind::Gpt2;
  } else if (ptt == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].is_array() &&
             pt["pretokenizers"].size() == 2) {
    const auto& sp = pt["pretokenizers"][0];
    const auto& bl = pt["pretokenizers"][1];
    if (sp.value("type", std::string()) != "Split" || bl.value("type", std::string()) != "ByteLevel")
      throw fail("pre_tokenizer sequence (need Split then ByteLevel)");
    const std::string re =
        sp.contains("pattern") && sp["pattern"].is_object() ? sp["pattern"].value("Regex", std::string()) : "";
    if (re == kLlama3)
      t->split_ = SplitKind::Llama3;
    else if (re == kQwen2)
      t->split_ = SplitKind::Qwen2;
    else
      throw fail("Split regex '" + re + "' (known: the Llama-3 and Qwen2 patterns)");
    if (sp.value("behavior", std::string()) != "Isolated" || sp.value("invert", false)) throw fail("Split behavior");
    byte_level(bl, false);
  } else {
    throw fail("pre_tokenizer '" + ptt + "'");
  }
  // vocabulary and merges
  require(m.contains("vocab") && m["vocab"].is_object(), "tokenizer '", path, "' has no model.vocab");
  int maxid = -1;
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    require(it.value().is_number_integer() && it.value().get<std::int64_t>() >= 0 &&
                it.value().get<std::int64_t>() < (1 << 24),
            "tokenizer '", path, "': vocab id of '", it.key(), "' is not an integer in [0, 2^24)");
    const int id = it.value().get<int>();
    t->vocab_[it.key()] = id;
    maxid = std::max(maxid, id);
  }
  require(m.contains("merges") && m["merges"].is_array(), "tokenizer '", path, "' has no model.merges");
  int rank = 0;
  for (const auto& mg : m["merges"]) {
    std::string key;
    if (mg.is_string())
      key = mg.get<std::string>();
    else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
      key = mg[0].get<std::string>() + " " + mg[1].get<std::string>();
    else
      throw InvalidArgument(str("tokenizer '", path, "': merge ", rank, " is neither \"a b\" nor [a, b]"));
    t->ranks_.emplace(key, rank++);
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& a : j["added_tokens"]) {
      const std::string c = a.value("content", std::string());
      const int id = a.value("id", -1);
      require(!c.empty() && id >= 0 && id < (1 << 24), "tokenizer '", path, "': malformed added token");
      t->added_[c] = id;
      maxid = std::max(maxid, id);
    }
  t->vocab_size_ = maxid + 1;
  const auto& b2u = data::gpt2_byte_to_unicode();
  t->byte_sym_.resize(256);
  for (int b = 0; b < 256; ++b) {
    data::utf8_append(t->byte_sym_[b], b2u[b]);
    t->sym_byte_[t->byte_sym_[b]] = static_cast<unsigned char>(b);
  }
  t->id_to_sym_.assign(static_cast<std::size_t>(t->vocab_size_), std::string());
  for (const auto& [s, id] : t->vocab_) t->id_to_sym_[id] = s;
  for (const auto& [s, id] : t->added_) t->id_to_sym_[id] = "\x01" + s;  // marker: raw text, not byte symbols
  return t;
}

std::vector<std::int32_t> HfTokenizer::bpe(const std::string& piece) const {
  std::vector<std::string> sym;
  std::string whole;
  for (unsigned char c : piece) {
    sym.push_back(byte_sym_[c]);
    whole += byte_sym_[c];
  }
  if (ignore_merges_) {
    const auto it = vocab_.find(whole);
    if (it != vocab_.end()) return {it->second};
  }
  while (sym.size() > 1) {
    int best = INT_MAX;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
      const auto it = ranks_.find(sym[i] + " " + sym[i + 1]);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT_MAX) break;
    // merge every occurrence of the best pair, left to right
    const std::string a = sym[at], b = sym[at + 1];
    std::vector<std::string> next;
    for (std::size_t i = 0; i < sym.size(); ++i) {
      if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) {
        next.push_back(a + b);
        ++i;
      } else {
        next.push_back(sym[i]);
      }
    }
    sym.swap(next);
  }
  std::vector<std::int32_t> ids;
  for (const auto& s : sym) {
    const auto it = vocab_.find(s);
    require(it != vocab_.end(), "tokenizer: symbol '", s, "' has no id in the vocabulary");
    ids.push_back(it->second);
  }
  return ids;
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> out;
  auto encode_plain = [&](std::string_view seg, bool first) {
    if (seg.empty()) return;
    std::string s(seg);
    if (first && add_prefix_space_ && s[0] != ' ') s = " " + s;
    const std::vector<std::string> pieces = split_ == SplitKind::Gpt2
                                                ? data::gpt2_pretokenize(s)
                                                : llama3_pretokenize(s, split_ == SplitKind::Llama3 ? 3 : 1);
    for (const auto& p : pieces) {
      const auto ids = bpe(p);
      out.insert(out.end(), ids.begin(), ids.end());
    }
  };
  std::size_t start = 0, i = 0;
  bool first = true;
  while (i < text.size()) {
    // longest added token at i (the map is ordered by content descending, so scan all)
    std::size_t best = 0;
    std::int32_t id = -1;
    for (const auto& [c, aid] : added_)
      if (c.size() > best && text.compare(i, c.size(), c) == 0) {
        best = c.size();
        id = aid;
      }
    if (best > 0) {
      encode_plain(text.substr(start, i - start), first);
      first = false;
      out.push_back(id);
      i += best;
      start = i;
    } else {
      ++i;
    }
  }
  encode_plain(text.substr(start), first);
  return out;
}

std::string HfTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    require(id >= 0 && id < vocab_size_ && !id_to_sym_[static_cast<std::size_t>(id)].empty(), "tokenizer: unknown id ",
            id);
    const std::string& s = id_to_sym_[static_cast<std::size_t>(id)];
    if (s[0] == '\x01') {
      out += s.substr(1);
      continue;
    }
    for (char32_t cp : data::utf8_decode(s)) {
      std::string one;
      data::utf8_append(one, cp);
      const auto it = sym_byte_.find(one);
      require(it != sym_byte_.end(), "tokenizer: id ", id, " holds a symbol outside the byte alphabet");
      out.push_back(static_cast<char>(it->second));
    }
  }
  return out;
}

std::vector<std::int32_t> tokenize_text_for_checkpoint(const std::string& checkpoint, int vocab_size,
                                                       const std::string& text, const std::string& gpt2_dir,
                                                       std::string* tokenizer) {
  std::error_code ec;
  const auto tj = std::filesystem::path(checkpoint) / "tokenizer.json";
  if (std::filesystem::is_directory(checkpoint, ec) && std::filesystem::exists(tj, ec)) {
    const auto tok = HfTokenizer::load(tj.string());
    if (tokenizer) *tokenizer = "tokenizer.json";
    std::vector<std::int32_t> ids = tok->encode(data::load_corpus(text));
    for (std::size_t i = 0; i < ids.size(); ++i)
      require(ids[i] < vocab_size, "'", tj.string(), "' produced id ", ids[i], " at position ", i,
              " but the model has vocab_size = ", vocab_size);
    return ids;
  }
  nn::ModelConfig c;
  c.vocab_size = vocab_size;
  return nn::tokenize_text_for(c, text, gpt2_dir, tokenizer);
}

}  // namespace cf::hf
