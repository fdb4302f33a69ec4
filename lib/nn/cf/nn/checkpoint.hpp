#pragma once
// HDF5 checkpoints in the fixed format of docs/checkpoint_format.md (h5py opens them): /params
// with GPT-2 names and PyTorch shapes, /optim/m, /optim/v with attribute t, root attributes
// format, format_version, config (JSON), step, train_config (JSON), best_val_loss. Written
// atomically (temporary sibling + fsync + rename), so a killed write never replaces a good file.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cf/nn/model.hpp"
#include "cf/nn/optim.hpp"

namespace cf::nn {

/// Everything a checkpoint holds. best_val_loss is NaN when unknown (attribute omitted).
struct Checkpoint {
  Model<float> model;
  AdamWState optim;  ///< empty m/v when the file has no /optim group
  std::int64_t step = 0;
  nlohmann::json train_config = nlohmann::json::object();
  double best_val_loss = 0;
  bool has_best_val = false;
};

/// Write `ck` to `path` atomically. Throws cf::Error on I/O failure (the old file stays).
void save_checkpoint(const std::string& path, const Checkpoint& ck);

/// Read a checkpoint. Throws cf::InvalidArgument naming the path and the problem for a missing,
/// truncated or foreign HDF5 file, a wrong `format` attribute, a malformed config, or a tensor
/// whose shape differs from the config's layout.
Checkpoint load_checkpoint(const std::string& path, bool with_optimizer = true);

/// Throw cf::InvalidArgument naming `path`, the tensor and the element when `values` (laid out by
/// `layout`) holds a NaN or an infinity; `what` names the array ("parameter", "AdamW first moment of").
void require_finite(const std::vector<float>& values, const ParamLayout& layout, const std::string& path,
                    const char* what);

}  // namespace cf::nn
