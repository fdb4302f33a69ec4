#pragma once
// Pre-tokenised input (issue 13): token ids produced by any tokenizer (e.g. the model's own Python
// tokenizer), for models whose tokenizer causalflow cannot run. Two forms: a text file of
// whitespace-separated non-negative integers, or a NumPy .npy file of int8 / int16 / uint16 / int32 /
// int64 (little-endian, C order, any shape; read flattened).
#include <cstdint>
#include <string>
#include <vector>

namespace cf::hf {

/// Read token ids from `path` (.npy by its magic bytes, else text). Every id must be in
/// [0, vocab_size). Throws cf::InvalidArgument naming the file, the position and the value for a
/// malformed file, a non-integer entry, an unsupported .npy dtype/order, or an id out of range.
std::vector<std::int32_t> read_token_ids(const std::string& path, int vocab_size);

}  // namespace cf::hf
