#include "cf/core/model_folder.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/json.hpp"

namespace cf {

namespace fs = std::filesystem;

namespace {
bool ends_with(const std::string& s, const std::string& e) {
  return s.size() > e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}
}  // namespace

bool is_model_folder_file(const std::string& name) {
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "special_tokens_map.json", "encoder.json", "vocab.bpe", "vocab.json", "merges.txt"})
    if (name == f) return true;
  return ends_with(name, ".safetensors") || ends_with(name, ".safetensors.index.json");
}

std::vector<std::string> model_folder_inputs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  const fs::path d(dir);
  for (const char* probed : {"config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json"})
    out.push_back((d / probed).string());
  int k = 0;  // a folder of a million files is not read whole
  for (fs::directory_iterator it(d, ec), end; !ec && it != end && k < 10000; it.increment(ec), ++k)
    if (is_model_folder_file(it->path().filename().string())) out.push_back(it->path().string());
  // the shards the index names, under whatever name (a "weights.bin" shard is read all the same)
  const fs::path idx = d / "model.safetensors.index.json";
  if (fs::is_regular_file(idx, ec)) {
    std::ifstream in(idx, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    try {
      const nlohmann::json j = parse_json(ss.str(), idx.string());
      if (j.is_object() && j.contains("weight_map") && j["weight_map"].is_object())
        for (const auto& v : j["weight_map"])
          if (v.is_string() && v.get<std::string>().find('/') == std::string::npos)
            out.push_back((d / v.get<std::string>()).string());
    } catch (const std::exception&) {
      // malformed: the loader refuses it with its own message
    }
  }
  return out;
}

void refuse_model_folder_member(const std::string& path, const std::string& option) {
  std::error_code ec;
  if (path.empty() || fs::is_directory(path, ec)) return;
  const fs::path p(path);
  const std::string name = p.filename().string();
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const bool member = ends_with(name, ".safetensors") || name == "model.safetensors.index.json" ||
                      (name == "config.json" && fs::is_directory(dir, ec));
  if (!member || !fs::exists(dir / "config.json", ec)) return;
  throw InvalidArgument(str(option, " '", path, "' is a file of the Hugging Face folder '", dir.string(),
                            "': a model is read from its folder (config.json beside the weights); give ", option, " '",
                            dir.string(), "'"));
}

}  // namespace cf
