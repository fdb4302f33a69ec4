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
  const nlohmann::json doc = cf::parse_json_file_text(read_file(path), path);
  // every field through JsonRef: a mistyped field names the file and its JSON pointer (exit 2)
  const JsonRef j(doc, "tokenizer '" + path + "'");
  auto fail = [&](const std::string& what) {
    return InvalidArgument(
        str("tokenizer '", path, "': ", what, " is not supported; pass pre-tokenised ids with --tokens"));
  };
  auto t = std::shared_ptr<HfTokenizer>(new HfTokenizer());
  j.as_object();
  const JsonRef m = j.at("model").as_object();
  const std::string type = m.string_or("type", "?");
  if (type != "BPE") throw fail("model.type '" + type + "'");
  if (m.bool_or("byte_fallback", false)) throw fail("model.byte_fallback = true");
  t->ignore_merges_ = m.bool_or("ignore_merges", false);
  // normalizer: none or NFC
  if (j.has("normalizer")) {
    const std::string nt = j.at("normalizer").as_object().string_or("type", "?");
    if (nt != "NFC") throw fail("normalizer '" + nt + "'");
  }
  // pre-tokenizer
  auto byte_level = [&](const JsonRef& p, bool regex_allowed) {
    t->add_prefix_space_ = p.bool_or("add_prefix_space", false);
    if (p.bool_or("use_regex", true) != regex_allowed) throw fail("ByteLevel use_regex combination");
  };
  const JsonRef pt = j.at("pre_tokenizer").as_object();
  const std::string ptt = pt.string_or("type", "?");
  if (ptt == "ByteLevel") {
    byte_level(pt, true);
    t->split_ = SplitKind::Gpt2;
  } else if (ptt == "Sequence" && pt.has("pretokenizers") && pt.at("pretokenizers").as_array().json().size() == 2) {
    const JsonRef sp = pt.at("pretokenizers").at(0).as_object();
    const JsonRef bl = pt.at("pretokenizers").at(1).as_object();
    if (sp.string_or("type", "") != "Split" || bl.string_or("type", "") != "ByteLevel")
      throw fail("pre_tokenizer sequence (need Split then ByteLevel)");
    const std::string re = sp.has("pattern") ? sp.at("pattern").as_object().string_or("Regex", "") : "";
    if (re == kLlama3)
      t->split_ = SplitKind::Llama3;
    else if (re == kQwen2)
      t->split_ = SplitKind::Qwen2;
    else
      throw fail("Split regex '" + re + "' (known: the Llama-3 and Qwen2 patterns)");
    if (sp.string_or("behavior", "") != "Isolated" || sp.bool_or("invert", false)) throw fail("Split behavior");
    byte_level(bl, false);
  } else {
    throw fail("pre_tokenizer '" + ptt + "'");
  }
  // vocabulary and merges; ids are JSON integers in range, read exactly (4294967297 and 1.9 were
  // read as 1 by a 32-bit conversion)
  const JsonRef vocab = m.at("vocab").as_object();
  std::int64_t maxid = -1;
  for (auto it = vocab.json().begin(); it != vocab.json().end(); ++it) {
    const int id = static_cast<int>(vocab.at(it.key()).as_integer(0, (1 << 24) - 1));
    t->vocab_[it.key()] = id;
    maxid = std::max<std::int64_t>(maxid, id);
  }
  const JsonRef merges = m.at("merges").as_array();
  int rank = 0;
  for (const auto& mg : merges.json()) {
    std::string key;
    if (mg.is_string())
      key = mg.get<std::string>();
    else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
      key = mg[0].get<std::string>() + " " + mg[1].get<std::string>();
    else
      merges.at(static_cast<std::size_t>(rank)).fail("is neither \"a b\" nor [a, b]");
    t->ranks_.emplace(key, rank++);
  }
  if (j.has("added_tokens")) {
    const JsonRef added = j.at("added_tokens").as_array();
    for (std::size_t i = 0; i < added.json().size(); ++i) {
      const JsonRef a = added.at(i).as_object();
      const std::string c = a.at("content").as_string();
      if (c.empty()) a.at("content").fail("is empty (an added token needs text)");
      const int id = static_cast<int>(a.at("id").as_integer(0, (1 << 24) - 1));
      t->added_[c] = id;
      maxid = std::max<std::int64_t>(maxid, id);
    }
  }
  t->build_added_trie();
  t->vocab_size_ = static_cast<int>(maxid + 1);
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

void HfTokenizer::build_added_trie() {
  trie_.assign(1, TrieNode{});
  for (const auto& [content, id] : added_) {
    std::size_t node = 0;
    for (unsigned char c : content) {
      auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, std::size_t(0)));
      if (it == next.end() || it->first != c) {
        const std::size_t fresh = trie_.size();
        it = next.insert(it, {c, fresh});
        trie_.push_back(TrieNode{});  // invalidates `next` and `it`: read back through trie_
        node = fresh;
      } else {
        node = it->second;
      }
    }
    trie_[node].id = id;
  }
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
    // longest added token at i: one walk down the byte trie (cost: the length of the longest
    // token starting here, not bytes x added tokens as the scan of every token was)
    std::size_t best = 0, node = 0;
    std::int32_t id = -1;
    for (std::size_t k = i; k < text.size(); ++k) {
      const auto& next = trie_[node].next;
      const auto c = static_cast<unsigned char>(text[k]);
      const auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, std::size_t(0)));
      if (it == next.end() || it->first != c) break;
      node = it->second;
      if (trie_[node].id >= 0) {
        best = k + 1 - i;
        id = trie_[node].id;
      }
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

std::shared_ptr<const HfTokenizer> folder_tokenizer(const std::string& checkpoint) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(checkpoint, ec)) return nullptr;
  const fs::path tj = fs::path(checkpoint) / "tokenizer.json";
  const fs::file_status link = fs::symlink_status(tj, ec);
  if (ec || !fs::exists(link)) return nullptr;  // no such name at all
  if (fs::is_symlink(link) && !fs::exists(tj, ec)) {
    std::error_code e2;
    const fs::path target = fs::read_symlink(tj, e2);
    throw InvalidArgument(str("'", tj.string(), "' is a symbolic link to '", target.string(),
                              "', which does not exist: the model's tokenizer is missing; fix the link, or remove it "
                              "and pass the ids with --tokens"));
  }
  return HfTokenizer::load(tj.string());
}

std::vector<std::int32_t> tokenize_text_for_checkpoint(const std::string& checkpoint, int vocab_size,
                                                       const std::string& text, const std::string& gpt2_dir,
                                                       std::string* tokenizer) {
  if (const auto tok = folder_tokenizer(checkpoint)) {
    const std::string tj = (std::filesystem::path(checkpoint) / "tokenizer.json").string();
    if (tokenizer) *tokenizer = "tokenizer.json";
    std::vector<std::int32_t> ids = tok->encode(data::load_corpus(text));
    for (std::size_t i = 0; i < ids.size(); ++i)
      require(ids[i] < vocab_size, "'", tj, "' produced id ", ids[i], " at position ", i,
              " but the model has vocab_size = ", vocab_size);
    return ids;
  }
  nn::ModelConfig c;
  c.vocab_size = vocab_size;
  return nn::tokenize_text_for(c, text, gpt2_dir, tokenizer);
}

}  // namespace cf::hf
