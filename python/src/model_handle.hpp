#pragma once
// The loaded model shared by causalflow.model, causalflow.influence and causalflow.spectral
// (python/src/model.cpp defines the Python class).
#include <memory>
#include <string>

#include "cf/nn/model.hpp"
#include "convert.hpp"

namespace cfpy {

/// A loaded causalflow checkpoint or Hugging Face folder; Python's causalflow.model.Model.
struct ModelHandle {
  std::string path;
  std::shared_ptr<const cf::nn::Model<float>> model;
};

/// A ModelHandle from a Model object or a path (loaded on the fly; the GIL is released while loading).
ModelHandle as_model(const py::object& m);

/// Token ids: an int array / list (checked against the vocabulary) or, for a str, the tokenised
/// text of that file or packaged corpus name ('kjv', 'brown') in the model's tokenizer.
std::vector<std::int32_t> as_tokens(const ModelHandle& m, const py::object& tokens);

}  // namespace cfpy
