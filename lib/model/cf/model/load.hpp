#pragma once
// The one model loader (issue 28): every tool and library that reads a model calls this. A path is
// either a causalflow HDF5 checkpoint written by `train` (docs/checkpoint_format.md, read by
// cf/nn/checkpoint.hpp) or a Hugging Face checkpoint directory (config.json + safetensors,
// cf/hf/checkpoint.hpp, docs/hf.md). lib/model sits above lib/nn and lib/hf (docs/architecture.md),
// so neither of those includes the other's loader.
#include <string>

#include "cf/nn/model.hpp"

namespace cf::model {

/// Load the model at `path` as float32: a directory is read as a Hugging Face checkpoint, anything
/// else as a causalflow HDF5 checkpoint (without its optimizer state). Throws cf::InvalidArgument
/// naming the path and the problem for a missing, truncated or foreign file, an unsupported
/// config, a missing tensor, a shape mismatch or a non-finite weight.
nn::Model<float> load_model(const std::string& path);

}  // namespace cf::model
