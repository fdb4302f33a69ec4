// Checkpoint series, see cf/model/series.hpp.
#include "cf/model/series.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/io/hdf5.hpp"

namespace cf::model {

std::int64_t checkpoint_step(const std::string& path) {
  require(std::filesystem::exists(path), "--checkpoint: file '", path, "' does not exist");
  require(!std::filesystem::is_directory(path), "--checkpoint '", path,
          "' is a folder (a Hugging Face directory?): a series over training is ordered by the training step "
          "train stores in its HDF5 checkpoints; give one folder alone, or train checkpoints");
  const io::File f = io::File::open(path);
  require(f.has_attr("step"), "--checkpoint '", path,
          "' has no training step (root attribute 'step'): not a checkpoint written by train");
  return f.attr_int("step");
}

std::vector<CheckpointEntry> expand_checkpoints(const std::vector<std::string>& items) {
  std::vector<std::string> paths;
  for (const std::string& item : items) {
    for (const std::string& part : split_list(item, "--checkpoint")) {
      if (part.find_first_of("*?[") == std::string::npos) {
        paths.push_back(part);
        continue;
      }
      glob_t g{};
      const int rc = ::glob(part.c_str(), 0, nullptr, &g);
      std::vector<std::string> hits;
      if (rc == 0)
        for (std::size_t i = 0; i < g.gl_pathc; ++i) hits.push_back(g.gl_pathv[i]);
      globfree(&g);
      require(!hits.empty(), "--checkpoint: the pattern '", part, "' matches no file");
      paths.insert(paths.end(), hits.begin(), hits.end());
    }
  }
  require(!paths.empty(), "--checkpoint: no checkpoint given");
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  // one checkpoint needs no order: it is not required to carry a step (an HF directory has none)
  if (paths.size() == 1) return {{paths[0], 0}};
  std::vector<CheckpointEntry> out;
  for (const auto& p : paths) out.push_back({p, checkpoint_step(p)});
  std::sort(out.begin(), out.end(), [](const CheckpointEntry& a, const CheckpointEntry& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  return out;
}

}  // namespace cf::model
