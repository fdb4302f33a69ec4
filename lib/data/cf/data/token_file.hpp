#pragma once
// Binary token files for the trainer: raw little-endian uint16 per split (<prefix>.train.bin,
// <prefix>.val.bin) plus <prefix>.meta.json {"vocab_size", "tokenizer", "n_train", "n_val",
// "source"}. numpy reads a split with np.fromfile(path, dtype='<u2').
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cf/data/tokenizer.hpp"

namespace cf::data {

/// Contents of <prefix>.meta.json.
struct TokenMeta {
  int vocab_size = 0;       ///< every token id is < vocab_size (1..65536)
  std::string tokenizer;    ///< "byte" | "gpt2"
  std::size_t n_train = 0;  ///< tokens in <prefix>.train.bin
  std::size_t n_val = 0;    ///< tokens in <prefix>.val.bin
  std::string source;       ///< corpus name or text file path
};

/// A train/validation split of one token stream.
struct TokenSplit {
  std::vector<Token> train, val;
};

/// Contiguous split: the last round(val_fraction * n) tokens form the validation set, the rest
/// the training set. Requires 0 < val_fraction < 1 and both parts non-empty (throws
/// cf::InvalidArgument naming n and val_fraction otherwise).
TokenSplit split_tokens(const std::vector<Token>& tokens, double val_fraction);

/// Write the two splits and the metadata (n_train/n_val taken from `split`) as ONE unit
/// (cf::write_files_atomic): all three go to temporaries and are fsynced first, so a failed write
/// (disk full) leaves every old file untouched and no temporary; then the splits are renamed and
/// the meta file LAST. The meta file is the manifest: it records each split's byte count and
/// FNV-1a 64 checksum ("files"), and read_token_files refuses a split that does not match, so a
/// reader never accepts a mixed set even if the process dies between two renames. Throws
/// cf::InvalidArgument if a token is >= meta.vocab_size, cf::Error on I/O failure.
void write_token_files(const std::string& prefix, const TokenSplit& split, const TokenMeta& meta);

/// A file committed with the token set (task files: the loss masks, items.json): `key` names it
/// in the manifest, the file is <prefix><suffix>.
struct ExtraFile {
  std::string key, suffix, bytes;
};
/// What write_token_files commits, as (path, bytes) pairs with the meta file last, plus `extra`
/// files (recorded in the manifest too) and the fields of the JSON object `extra_meta` merged into
/// the meta file (a task's row_len and task description; null = none). Task files use it to
/// commit tokens, masks, items and the task meta as ONE unit (cf::write_files_atomic).
std::vector<std::pair<std::string, std::string>> token_file_set(const std::string& prefix, const TokenSplit& split,
                                                                const TokenMeta& meta,
                                                                const std::vector<ExtraFile>& extra = {},
                                                                const nlohmann::json& extra_meta = nullptr);

/// Refuses `bytes` read from <prefix>'s file `key` when the meta file's manifest records another
/// size or checksum for it (a mixed set after an interrupted write); no manifest entry: accepted.
void check_manifest_entry(const std::string& prefix, const std::string& key, const std::string& bytes);

/// Refuse (cf::InvalidArgument naming `option` and the prefix to give) a token-set prefix that is
/// one of the set's own files: "P.train.bin", "P.val.bin", "P.meta.json", "P.train.mask.bin",
/// "P.val.mask.bin" or "P.items.json" (the tools would read "P.train.bin.meta.json"). `input`:
/// an input prefix is refused only when "<prefix>.meta.json" does not exist (a set really named
/// "x.val.bin" still reads); an output prefix (prepare-data --out) always.
void require_token_prefix(const std::string& prefix, const std::string& option, bool input = true);

/// Read <prefix>.meta.json; throws cf::InvalidArgument naming the file and the missing or bad
/// field (and, for a prefix that is one of the set's files, the prefix to give: --data P).
TokenMeta read_token_meta(const std::string& prefix);

/// Read one split file: its size must be a positive multiple of 2 bytes and every id must be
/// < vocab_size (throws cf::InvalidArgument naming the file, the offset and the value).
std::vector<Token> read_token_bin(const std::string& path, int vocab_size);

/// A prepared data set.
struct TokenData {
  TokenMeta meta;
  std::vector<Token> train, val;
};

/// Read and validate all three files (counts must match the metadata; when the meta file carries
/// the "files" manifest, sizes and checksums too: a mismatch is reported as a mixed token set).
TokenData read_token_files(const std::string& prefix);

/// FNV-1a 64-bit hash over bytes added piece by piece (the token-set manifest checksum, the
/// trainer's data checksum); hex() gives 16 lower-case hex digits.
class Fnv1a64 {
 public:
  void add(const void* bytes, std::size_t n);
  std::string hex() const;

 private:
  std::uint64_t h_ = 14695981039346656037ULL;  // FNV-1a 64 offset basis
};

/// FNV-1a 64-bit hash of `bytes`, as 16 lower-case hex digits (the token-set manifest checksum).
std::string fnv1a64_hex(const std::string& bytes);

/// Entropy (nats) of the unigram distribution of `tokens`: the cross-entropy of the best
/// context-free predictor, the bar a trained model's loss should go well below. 0 for empty input.
double unigram_entropy_nats(const std::vector<Token>& tokens);

}  // namespace cf::data
