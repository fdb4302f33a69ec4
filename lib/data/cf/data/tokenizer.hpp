#pragma once
// Tokenizers for the embedded trainer: bytes (vocabulary 256) and GPT-2 byte-level BPE
// (vocabulary 50,257; gpt2_bpe.hpp). Token ids fit in 16 bits, the element type of token files.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cf::data {

/// A token id; < 65,536 (GPT-2 uses 50,257 ids).
using Token = std::uint16_t;

/// Vocabulary sizes of the two tokenizers.
inline constexpr int kByteVocabSize = 256;
inline constexpr int kGpt2VocabSize = 50257;

/// Byte tokenizer: one token per byte of `text` (ids 0..255).
std::vector<Token> byte_encode(std::string_view text);
/// Inverse of byte_encode; throws cf::InvalidArgument for an id >= 256.
std::string byte_decode(const std::vector<Token>& tokens);

class Gpt2Bpe;

/// A tokenizer chosen by name at run time ("byte" or "gpt2").
class Tokenizer {
 public:
  /// "byte" or "gpt2" (GPT-2 vocabulary read from `gpt2_dir`, default gpt2_default_dir()).
  /// Throws cf::InvalidArgument for another name or missing vocabulary files.
  static Tokenizer create(const std::string& name, const std::string& gpt2_dir = "");

  /// "byte" or "gpt2".
  const std::string& name() const { return name_; }
  /// 256 or 50,257.
  int vocab_size() const;
  std::vector<Token> encode(std::string_view text) const;
  std::string decode(const std::vector<Token>& tokens) const;

 private:
  std::string name_;
  std::shared_ptr<const Gpt2Bpe> bpe_;
};

}  // namespace cf::data
