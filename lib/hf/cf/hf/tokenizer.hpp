#pragma once
// Byte-level BPE from a Hugging Face tokenizer.json (issue 13), generalising lib/data's GPT-2
// encoder to the vocabularies of GPT-2, GPT-NeoX / Pythia, Llama-3 and Qwen2, as far as the file
// describes them: model.type "BPE" (vocab, merges, ignore_merges), pre_tokenizer ByteLevel
// (use_regex: the GPT-2 split of cf/data/gpt2_bpe.hpp; add_prefix_space) or Sequence[Split(the
// Llama-3 or Qwen2 regex, Isolated), ByteLevel(use_regex false)], added_tokens matched literally
// before pre-tokenisation. Not applied: normalizers other than none/NFC (NFC is treated as the
// identity, exact for text already in NFC), post-processors (no BOS/EOS is added), byte fallback.
// Anything else is refused with cf::InvalidArgument naming the field (use --tokens instead).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cf::hf {

/// The pre-tokenisation regexes recognised in tokenizer.json.
enum class SplitKind { Gpt2, Llama3, Qwen2 };

/// Split `text` into pre-tokens by the Llama-3 (digits = 3: \p{N}{1,3}) or Qwen2 (digits = 1)
/// regex (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
/// \s*[\r\n]+|\s+(?!\S)|\s+, evaluated by hand on code points. The pieces concatenate to `text`.
std::vector<std::string> llama3_pretokenize(std::string_view text, int digits);

/// A byte-level BPE tokenizer read from tokenizer.json.
class HfTokenizer {
 public:
  /// Read `path` (a tokenizer.json file, or a directory holding one). Throws cf::InvalidArgument
  /// naming the file and field for anything outside the supported subset.
  static std::shared_ptr<const HfTokenizer> load(const std::string& path);
  /// Token ids of `text`.
  std::vector<std::int32_t> encode(std::string_view text) const;
  /// Bytes of the tokens (inverse of encode for the byte-level part); throws for an unknown id.
  std::string decode(const std::vector<std::int32_t>& ids) const;
  /// 1 + the largest id of the vocabulary and the added tokens.
  int vocab_size() const { return vocab_size_; }
  SplitKind split() const { return split_; }

 private:
  std::vector<std::int32_t> bpe(const std::string& piece) const;
  void build_added_trie();  // trie_ from added_
  SplitKind split_ = SplitKind::Gpt2;
  bool add_prefix_space_ = false, ignore_merges_ = false;
  int vocab_size_ = 0;
  std::unordered_map<std::string, std::int32_t> vocab_;
  std::unordered_map<std::string, int> ranks_;                 // "left right" -> rank
  std::vector<std::string> byte_sym_;                          // byte -> its printable symbol (UTF-8)
  std::map<std::string, std::int32_t, std::greater<>> added_;  // content -> id
  // The added tokens as a byte trie (children sorted by byte): the longest one at a position is
  // found in one walk, so tokenising costs ~ bytes x the longest token, not bytes x added tokens
  // (20,000 added tokens made 720 KB take 69 s; issue 29).
  struct TrieNode {
    std::vector<std::pair<unsigned char, std::size_t>> next;
    std::int32_t id = -1;
  };
  std::vector<TrieNode> trie_;
  std::vector<std::string> id_to_sym_;
  std::unordered_map<std::string, unsigned char> sym_byte_;
};

/// The tokenizer of a model folder: HfTokenizer::load of `checkpoint`/tokenizer.json when
/// `checkpoint` is a folder holding one, nullptr when it is not a folder or has none. A
/// tokenizer.json that is a dangling symbolic link (or otherwise exists but cannot be read) throws
/// cf::InvalidArgument naming it, instead of falling back to bytes (issue 29).
std::shared_ptr<const HfTokenizer> folder_tokenizer(const std::string& checkpoint);

/// Token ids of `text` (a file path or a corpus name of data::load_corpus) for the model at
/// `checkpoint`: a Hugging Face directory with tokenizer.json uses HfTokenizer (ids checked against
/// vocab_size), anything else cf::nn::tokenize_text_for (bytes or GPT-2 BPE by vocab_size).
/// `tokenizer` (if not null) receives the tokenizer's name.
std::vector<std::int32_t> tokenize_text_for_checkpoint(const std::string& checkpoint, int vocab_size,
                                                       const std::string& text, const std::string& gpt2_dir,
                                                       std::string* tokenizer);

}  // namespace cf::hf
