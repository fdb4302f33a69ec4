#pragma once
// train's options (apps/train): the struct, and the declarations of the data, model and training
// options (options.cpp); main.cpp adds --device, --quiet and the common options after them.
#include <CLI/CLI.hpp>
#include <string>

#include "cf/core/app.hpp"
#include "cf/nn/train_run.hpp"

namespace cf::train_app {

// The run's options (cf/nn/train_run.hpp) plus the device and the options every tool shares.
struct Options : nn::TrainRunOptions {
  std::string device = "cpu";      ///< --device cpu|cuda (lib/gpu)
  std::string precision = "fp32";  ///< --precision fp32|tf32|bf16 (the device trainer's GEMMs)
  app::CommonOptions common;
};

/// --text/--corpus/--data, --val-fraction, --out-dir, --overwrite, --resume, the model options
/// (--n-layer ... --no-bias) and the training options (--steps ... --log-every), with validators.
void add_run_options(CLI::App& app, Options& o);

}  // namespace cf::train_app
