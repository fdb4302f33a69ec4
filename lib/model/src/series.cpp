// Checkpoint series, see cf/model/series.hpp.
#include "cf/model/series.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/file_identity.hpp"
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
  std::error_code ec;
  // a path that exists is taken literally, before any list or glob reading: 'run[1].h5' and
  // 'a,b.h5' are file names, not a pattern and a list (they were refused; issue 29)
  auto exists = [&](const std::string& p) { return !p.empty() && std::filesystem::exists(p, ec); };
  for (const std::string& item : items) {
    if (exists(item)) {
      paths.push_back(item);
      continue;
    }
    for (const std::string& part : split_list(item, "--checkpoint")) {
      if (exists(part) || part.find_first_of("*?[") == std::string::npos) {
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
  // one file named twice ('a.h5,./a.h5', a link, a glob that also matches a listed file) would be
  // one point counted twice in the series: refused, naming both spellings
  std::vector<FileIdentity> ids;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    ids.push_back(file_identity(paths[i]));
    for (std::size_t k = 0; k < i; ++k)
      require(!(paths[k] == paths[i] || same_file(ids[k], ids[i])), "--checkpoint names the file '", paths[k],
              "' twice ('", paths[k], "' and '", paths[i], "'): give each checkpoint once");
  }
  std::sort(paths.begin(), paths.end());
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
