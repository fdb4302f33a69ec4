#include "cf/model/load.hpp"

#include <filesystem>

#include "cf/core/model_folder.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/nn/checkpoint.hpp"

namespace cf::model {

nn::Model<float> load_model(const std::string& path) {
  // DIR/model.safetensors said "not an HDF5 file" without pointing at the folder
  refuse_model_folder_member(path);
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return nn::load_checkpoint(path, false).model;
  nn::Model<float> m = hf::load_hf_model(path);
  nn::require_finite(m.params, m.layout, path, "parameter");  // HDF5 files are checked on load
  return m;
}

}  // namespace cf::model
