#include "cf/data/token_file.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"

namespace cf::data {

TokenSplit split_tokens(const std::vector<Token>& tokens, double val_fraction) {
  require(val_fraction > 0.0 && val_fraction < 1.0, "val_fraction must satisfy 0 < val_fraction < 1 (got ",
          val_fraction, ")");
  const std::size_t n = tokens.size();
  const auto n_val = static_cast<std::size_t>(std::llround(val_fraction * static_cast<double>(n)));
  require(n_val >= 1 && n_val < n, "cannot split ", n, " tokens with val_fraction ", val_fraction,
          ": both the training and the validation split need at least one token");
  TokenSplit s;
  s.train.assign(tokens.begin(), tokens.end() - static_cast<std::ptrdiff_t>(n_val));
  s.val.assign(tokens.end() - static_cast<std::ptrdiff_t>(n_val), tokens.end());
  return s;
}

namespace {
std::string pack_le(const std::vector<Token>& t, int vocab_size, const std::string& what) {
  std::string bytes(2 * t.size(), '\0');
  for (std::size_t i = 0; i < t.size(); ++i) {
    require(static_cast<int>(t[i]) < vocab_size, what, " token ", i, " has id ", t[i], " >= vocab_size ", vocab_size);
    bytes[2 * i] = static_cast<char>(t[i] & 0xFF);
    bytes[2 * i + 1] = static_cast<char>(t[i] >> 8);
  }
  return bytes;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> token_file_set(const std::string& prefix, const TokenSplit& split,
                                                                const TokenMeta& meta,
                                                                const std::vector<ExtraFile>& extra,
                                                                const nlohmann::json& extra_meta) {
  require(!prefix.empty(), "token file prefix must not be empty");
  require(meta.vocab_size >= 1 && meta.vocab_size <= 65536, "vocab_size must be in 1..65536 (got ", meta.vocab_size,
          ")");
  const std::string train = pack_le(split.train, meta.vocab_size, "training");
  const std::string val = pack_le(split.val, meta.vocab_size, "validation");
  const auto s = prefix.rfind('/');
  const std::string base = s == std::string::npos ? prefix : prefix.substr(s + 1);
  auto entry = [&](const std::string& suffix, const std::string& bytes) {
    return nlohmann::json{{"name", base + suffix}, {"bytes", bytes.size()}, {"fnv1a64", fnv1a64_hex(bytes)}};
  };
  nlohmann::json j = {{"vocab_size", meta.vocab_size},
                      {"tokenizer", meta.tokenizer},
                      {"n_train", split.train.size()},
                      {"n_val", split.val.size()},
                      {"source", meta.source},
                      {"files", {{"train", entry(".train.bin", train)}, {"val", entry(".val.bin", val)}}}};
  std::vector<std::pair<std::string, std::string>> files{{prefix + ".train.bin", train}, {prefix + ".val.bin", val}};
  for (const ExtraFile& f : extra) {
    j["files"][f.key] = entry(f.suffix, f.bytes);
    files.emplace_back(prefix + f.suffix, f.bytes);
  }
  if (extra_meta.is_object())
    for (const auto& [k, v] : extra_meta.items()) j[k] = v;
  files.emplace_back(prefix + ".meta.json", j.dump(2) + "\n");  // the manifest last
  return files;
}

void write_token_files(const std::string& prefix, const TokenSplit& split, const TokenMeta& meta) {
  write_files_atomic(token_file_set(prefix, split, meta));
}

void Fnv1a64::add(const void* bytes, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < n; ++i) {
    h_ ^= p[i];
    h_ *= 1099511628211ULL;  // FNV-1a 64 prime
  }
}

std::string Fnv1a64::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
  return buf;
}

std::string fnv1a64_hex(const std::string& bytes) {
  Fnv1a64 h;
  h.add(bytes.data(), bytes.size());
  return h.hex();
}

void require_token_prefix(const std::string& prefix, const std::string& option, bool input) {
  for (const char* ext : {".train.bin", ".val.bin", ".meta.json", ".train.mask.bin", ".val.mask.bin", ".items.json"}) {
    const std::string e = ext;
    if (prefix.size() <= e.size() || prefix.compare(prefix.size() - e.size(), e.size(), e) != 0) continue;
    std::error_code ec;
    if (input && std::filesystem::exists(prefix + ".meta.json", ec)) return;  // a set really named so
    const std::string p = prefix.substr(0, prefix.size() - e.size());
    throw InvalidArgument(str(option, " takes the prefix of a token set (", input ? "it reads" : "it writes", " P",
                              ".meta.json, P.train.bin, P.val.bin), not one of its files: give ", option, " '", p,
                              "' instead of '", prefix, "'"));
  }
}

TokenMeta read_token_meta(const std::string& prefix) {
  require_token_prefix(prefix, "--data");
  const std::string path = prefix + ".meta.json";
  const std::string text = read_file(path);  // throws InvalidArgument naming the path
  nlohmann::json j;
  try {
    j = cf::parse_json(text);
  } catch (const std::exception& e) {
    throw InvalidArgument(str("'", path, "' is not valid JSON: ", e.what()));
  }
  require(j.is_object(), "'", path, "' must hold a JSON object");
  auto need = [&](const char* key) -> const nlohmann::json& {
    require(j.contains(key), "'", path, "' lacks the field \"", key, "\"");
    return j.at(key);
  };
  TokenMeta m;
  const auto& vs = need("vocab_size");
  require(vs.is_number_integer() && vs.get<long long>() >= 1 && vs.get<long long>() <= 65536, "'", path,
          "': vocab_size must be an integer in 1..65536 (got ", vs.dump(), ")");
  m.vocab_size = vs.get<int>();
  const auto& tk = need("tokenizer");
  require(tk.is_string(), "'", path, "': tokenizer must be a string");
  m.tokenizer = tk.get<std::string>();
  for (const char* key : {"n_train", "n_val"}) {
    const auto& v = need(key);
    require(v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0), "'", path, "': ", key,
            " must be a non-negative integer (got ", v.dump(), ")");
  }
  m.n_train = j["n_train"].get<std::size_t>();
  m.n_val = j["n_val"].get<std::size_t>();
  if (j.contains("source") && j["source"].is_string()) m.source = j["source"].get<std::string>();
  return m;
}

std::vector<Token> read_token_bin(const std::string& path, int vocab_size) {
  const std::string bytes = read_file(path);
  require(!bytes.empty(), "token file '", path, "' is empty");
  require(bytes.size() % 2 == 0, "token file '", path, "' has ", bytes.size(),
          " bytes, not a multiple of 2 (uint16 tokens): truncated?");
  std::vector<Token> t(bytes.size() / 2);
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<Token>(static_cast<unsigned char>(bytes[2 * i]) |
                              (static_cast<unsigned>(static_cast<unsigned char>(bytes[2 * i + 1])) << 8));
    if (static_cast<int>(t[i]) >= vocab_size)
      throw InvalidArgument(str("token file '", path, "': token ", i, " (byte offset ", 2 * i, ") has id ", t[i],
                                " >= vocab_size ", vocab_size));
  }
  return t;
}

void check_manifest_entry(const std::string& prefix, const std::string& key, const std::string& bytes) {
  const std::string path = prefix + ".meta.json";
  nlohmann::json j;
  try {
    j = cf::parse_json(read_file(path), path);
  } catch (const std::exception&) {
    return;  // read_token_meta reported it already
  }
  if (!j.contains("files") || !j["files"].is_object() || !j["files"].contains(key)) return;  // older sets
  const auto& f = j["files"][key];
  const std::string name = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : key;
  const bool size_ok =
      !f.contains("bytes") || (f["bytes"].is_number_unsigned() && f["bytes"].get<std::size_t>() == bytes.size());
  const bool sum_ok =
      !f.contains("fnv1a64") || (f["fnv1a64"].is_string() && f["fnv1a64"].get<std::string>() == fnv1a64_hex(bytes));
  require(size_ok && sum_ok, "mixed or partial file set: '", name, "' does not match the ",
          (size_ok ? "checksum" : "size"), " recorded in '", path, "' (an interrupted prepare-data? run it again)");
}

namespace {
// The manifest check of a split: its bytes must be those the meta file was written with.
void check_manifest(const std::string& prefix, const char* which, const std::vector<Token>& t) {
  std::string bytes(2 * t.size(), '\0');
  for (std::size_t i = 0; i < t.size(); ++i) {
    bytes[2 * i] = static_cast<char>(t[i] & 0xFF);
    bytes[2 * i + 1] = static_cast<char>(t[i] >> 8);
  }
  check_manifest_entry(prefix, which, bytes);
}
}  // namespace

TokenData read_token_files(const std::string& prefix) {
  TokenData d;
  d.meta = read_token_meta(prefix);
  d.train = read_token_bin(prefix + ".train.bin", d.meta.vocab_size);
  d.val = read_token_bin(prefix + ".val.bin", d.meta.vocab_size);
  require(d.train.size() == d.meta.n_train, "'", prefix, ".train.bin' holds ", d.train.size(),
          " tokens but the meta file says n_train = ", d.meta.n_train);
  require(d.val.size() == d.meta.n_val, "'", prefix, ".val.bin' holds ", d.val.size(),
          " tokens but the meta file says n_val = ", d.meta.n_val);
  check_manifest(prefix, "train", d.train);
  check_manifest(prefix, "val", d.val);
  return d;
}

double unigram_entropy_nats(const std::vector<Token>& tokens) {
  if (tokens.empty()) return 0.0;
  std::vector<std::size_t> count(65536, 0);
  for (Token t : tokens) ++count[t];
  const double n = static_cast<double>(tokens.size());
  double h = 0.0;
  for (std::size_t c : count)
    if (c) {
      const double p = static_cast<double>(c) / n;
      h -= p * std::log(p);
    }
  return h;
}

}  // namespace cf::data
