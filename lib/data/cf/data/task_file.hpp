#pragma once
// Task files: aligned, fixed-length training sequences with a per-token loss mask (issue 11,
// docs/probe.md). They extend the token files of token_file.hpp, which plain readers still accept:
//   <prefix>.train.bin, <prefix>.val.bin        uint16 little-endian, rows x row_len tokens
//   <prefix>.train.mask.bin, <prefix>.val.mask.bin  uint8 0/1 per token: mask[i] = 1 means token i
//                                               of its row is a scored target (predicted from
//                                               position i-1); the first token of a row is never
//                                               scored
//   <prefix>.items.json                         optional per-row item descriptions {"train": [...],
//                                               "val": [...]} (passkey answers, ranking candidates)
//   <prefix>.meta.json                          the token-file fields plus "row_len", "rows_train",
//                                               "rows_val" and "task" (a JSON description of the
//                                               generator and its parameters)
// The trainer reads one row per sequence (never a random offset), so a position's phase within a
// row means the same thing in every batch.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/data/tokenizer.hpp"

namespace cf::data {

/// One split of a task: rows of row_len tokens and their loss masks (same size).
struct TaskSplit {
  std::vector<Token> tokens;
  std::vector<std::uint8_t> mask;
  nlohmann::json items = nlohmann::json::array();  ///< one description per row, or empty
};

/// A whole task data set.
struct TaskData {
  int vocab_size = 0;
  std::string tokenizer;  ///< "byte" | "gpt2" | "synthetic"
  std::string source;     ///< filler corpus or "random"
  int row_len = 0;        ///< tokens per row (model sequence length + 1)
  nlohmann::json task = nlohmann::json::object();
  TaskSplit train, val;
  std::size_t rows(const TaskSplit& s) const { return row_len > 0 ? s.tokens.size() / row_len : 0; }
};

/// Write all files of a task (meta last, every file atomically). Throws cf::InvalidArgument for
/// row_len < 2, a split that is empty or not a whole number of rows, masks of another size, a
/// mask value other than 0/1, a scored first token or a token >= vocab_size.
void write_task_files(const std::string& prefix, const TaskData& d);

/// Whether <prefix>.meta.json describes a task file (has "row_len"). False if the file is missing.
bool is_task_file(const std::string& prefix);

/// Read and validate a task written by write_task_files (sizes against the metadata, mask values,
/// token ids). Throws cf::InvalidArgument naming the file and the problem.
TaskData read_task_files(const std::string& prefix);

}  // namespace cf::data
