#include "cf/data/tokenizer.hpp"

#include "cf/core/error.hpp"
#include "cf/data/gpt2_bpe.hpp"

namespace cf::data {

std::vector<Token> byte_encode(std::string_view text) {
  std::vector<Token> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string byte_decode(const std::vector<Token>& tokens) {
  std::string out(tokens.size(), '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    require(tokens[i] < kByteVocabSize, "byte token id ", tokens[i], " at position ", i, " must be < 256");
    out[i] = static_cast<char>(tokens[i]);
  }
  return out;
}

Tokenizer Tokenizer::create(const std::string& name, const std::string& gpt2_dir) {
  Tokenizer t;
  t.name_ = name;
  if (name == "byte") return t;
  if (name == "gpt2") {
    t.bpe_ = Gpt2Bpe::load(gpt2_dir);
    return t;
  }
  throw InvalidArgument(str("unknown tokenizer '", name, "' (known: byte, gpt2)"));
}

int Tokenizer::vocab_size() const { return bpe_ ? bpe_->vocab_size() : kByteVocabSize; }

std::vector<Token> Tokenizer::encode(std::string_view text) const {
  return bpe_ ? bpe_->encode(text) : byte_encode(text);
}

std::string Tokenizer::decode(const std::vector<Token>& tokens) const {
  return bpe_ ? bpe_->decode(tokens) : byte_decode(tokens);
}

}  // namespace cf::data
