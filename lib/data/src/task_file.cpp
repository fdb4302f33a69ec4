#include "cf/data/task_file.hpp"

#include <filesystem>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/data/token_file.hpp"

namespace cf::data {

namespace {
void check_split(const TaskData& d, const TaskSplit& s, const char* name) {
  const auto L = static_cast<std::size_t>(d.row_len);
  require(!s.tokens.empty() && s.tokens.size() % L == 0, "task ", name, " split holds ", s.tokens.size(),
          " tokens: not a positive multiple of row_len ", d.row_len);
  require(s.mask.size() == s.tokens.size(), "task ", name, " split: mask has ", s.mask.size(), " entries for ",
          s.tokens.size(), " tokens");
  for (std::size_t i = 0; i < s.mask.size(); ++i) {
    require(s.mask[i] <= 1, "task ", name, " split: mask value ", int(s.mask[i]), " at ", i, " is not 0/1");
    require(!(s.mask[i] && i % L == 0), "task ", name, " split: the first token of row ", i / L,
            " is marked scored (no position predicts it)");
  }
  require(s.items.is_array() && (s.items.empty() || s.items.size() == s.tokens.size() / L), "task ", name,
          " split: items must be empty or one per row");
}
}  // namespace

void write_task_files(const std::string& prefix, const TaskData& d) {
  require(d.row_len >= 2, "task row_len must be >= 2 (got ", d.row_len, ")");
  check_split(d, d.train, "training");
  check_split(d, d.val, "validation");
  TokenSplit ts{d.train.tokens, d.val.tokens};
  TokenMeta m;
  m.vocab_size = d.vocab_size;
  m.tokenizer = d.tokenizer;
  m.source = d.source;
  auto bytes = [](const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); };
  std::vector<ExtraFile> extra{{"train.mask", ".train.mask.bin", bytes(d.train.mask)},
                               {"val.mask", ".val.mask.bin", bytes(d.val.mask)}};
  if (!d.train.items.empty() || !d.val.items.empty())
    extra.push_back(
        {"items", ".items.json", nlohmann::json{{"train", d.train.items}, {"val", d.val.items}}.dump() + "\n"});
  const nlohmann::json task_meta = {{"row_len", d.row_len},
                                    {"rows_train", d.train.tokens.size() / d.row_len},
                                    {"rows_val", d.val.tokens.size() / d.row_len},
                                    {"task", d.task}};
  // tokens, masks, items and the task meta as ONE unit, the meta (the manifest of all) last: a
  // process killed between two renames leaves a set the reader refuses, never a mixed one it reads
  write_files_atomic(token_file_set(prefix, ts, m, extra, task_meta));
}

bool is_task_file(const std::string& prefix) {
  const std::string path = prefix + ".meta.json";
  if (!std::filesystem::is_regular_file(path)) return false;
  try {
    const auto j = cf::parse_json(read_file(path), path);
    return j.is_object() && j.contains("row_len");
  } catch (const std::exception&) {
    return false;
  }
}

TaskData read_task_files(const std::string& prefix) {
  const TokenData td = read_token_files(prefix);  // validates the token part
  const std::string path = prefix + ".meta.json";
  const auto j = cf::parse_json(read_file(path), path);
  require(j.contains("row_len") && j["row_len"].is_number_integer() && j["row_len"].get<long long>() >= 2 &&
              j["row_len"].get<long long>() <= 1 << 20,
          "'", path, "': row_len must be an integer >= 2 (is this a task file? make one with prepare-data --task)");
  TaskData d;
  d.vocab_size = td.meta.vocab_size;
  d.tokenizer = td.meta.tokenizer;
  d.source = td.meta.source;
  d.row_len = j["row_len"].get<int>();
  require(!j.contains("task") || j["task"].is_object(), "'", path, "': field 'task' must be an object (got ",
          j.contains("task") ? j["task"].dump() : "", ")");
  d.task = j.value("task", nlohmann::json::object());
  d.train.tokens = td.train;
  d.val.tokens = td.val;
  auto read_mask = [&](const std::string& p, std::size_t n, const char* key) {
    const std::string bytes = read_file(p);
    require(bytes.size() == n, "mask file '", p, "' has ", bytes.size(), " bytes for ", n, " tokens");
    check_manifest_entry(prefix, key, bytes);
    return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
  };
  d.train.mask = read_mask(prefix + ".train.mask.bin", d.train.tokens.size(), "train.mask");
  d.val.mask = read_mask(prefix + ".val.mask.bin", d.val.tokens.size(), "val.mask");
  if (std::filesystem::is_regular_file(prefix + ".items.json")) {
    nlohmann::json it;
    const std::string text = read_file(prefix + ".items.json");
    check_manifest_entry(prefix, "items", text);
    try {
      it = cf::parse_json(text, prefix + ".items.json");
    } catch (const std::exception& e) {
      throw InvalidArgument(str("'", prefix, ".items.json' is not valid JSON: ", e.what()));
    }
    if (it.contains("train")) d.train.items = it["train"];
    if (it.contains("val")) d.val.items = it["val"];
  }
  check_split(d, d.train, "training");
  check_split(d, d.val, "validation");
  return d;
}

}  // namespace cf::data
