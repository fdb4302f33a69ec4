#include "cf/hf/token_input.hpp"

#include "cf/core/error.hpp"
#include "cf/data/token_file.hpp"
#include "cf/hf/token_ids.hpp"
#include "cf/hf/tokenizer.hpp"

namespace cf::hf {

std::vector<std::int32_t> load_token_input(const TokenInput& in, const std::string& checkpoint, int vocab_size,
                                           std::string* tokenizer) {
  if (!in.tokens.empty()) {  // pre-tokenised ids (any tokenizer)
    if (tokenizer) *tokenizer = "ids from " + in.tokens;
    return read_token_ids(in.tokens, vocab_size);
  }
  if (!in.data.empty()) {
    const data::TokenData d = data::read_token_files(in.data);
    require(d.meta.vocab_size == vocab_size, "vocabulary mismatch: --data ", in.data,
            " has vocab_size = ", d.meta.vocab_size, " (", d.meta.tokenizer,
            ") but the checkpoint has vocab_size = ", vocab_size,
            "; prepare the data with the tokenizer the model was trained on");
    if (tokenizer) *tokenizer = d.meta.tokenizer;
    const auto& s = in.split == "val" ? d.val : d.train;
    return std::vector<std::int32_t>(s.begin(), s.end());
  }
  return tokenize_text_for_checkpoint(checkpoint, vocab_size, in.text, in.gpt2_dir, tokenizer);
}

}  // namespace cf::hf
