#pragma once
// A tool's token input (capture, influence, jacobian): the text a checkpoint is run on, in one of
// three forms, each turned into ids of the checkpoint's own vocabulary. One loader, so that every
// tool reads a Hugging Face directory's tokenizer.json, prepare-data files and pre-tokenised ids
// the same way and refuses a vocabulary mismatch with the same message (docs/hf.md).
#include <cstdint>
#include <string>
#include <vector>

namespace cf::hf {

/// Exactly one of tokens, data, text is set (the apps' option groups enforce it).
struct TokenInput {
  std::string tokens;         ///< --tokens FILE: pre-tokenised ids (read_token_ids: text or .npy)
  std::string data;           ///< --data PREFIX: prepare-data token files
  std::string split = "val";  ///< --split of --data: val | train
  std::string text;           ///< --text FILE, or a packaged corpus name (brown, kjv)
  std::string gpt2_dir;       ///< --gpt2-dir: encoder.json / vocab.bpe for GPT-2 BPE
};

/// Token ids of `in` for the model at `checkpoint` (vocab_size entries): ids checked against the
/// vocabulary, prepare-data files required to have the same vocab_size, a text tokenised by
/// tokenize_text_for_checkpoint (the directory's tokenizer.json, else bytes or GPT-2 BPE by
/// vocab_size). `tokenizer` (if not null) receives what tokenised the input. Throws
/// cf::InvalidArgument naming the file and the mismatch.
std::vector<std::int32_t> load_token_input(const TokenInput& in, const std::string& checkpoint, int vocab_size,
                                           std::string* tokenizer = nullptr);

}  // namespace cf::hf
