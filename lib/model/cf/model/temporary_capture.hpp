#pragma once
// A checkpoint captured in process (cf/nn/capture.hpp, as the `capture` tool does) into a
// temporary capture file, for tools that read captures: `rollout --model CHECKPOINT` takes the
// measured alpha and kernels of the trained model from it (docs/rollout.md).
#include <string>

#include "cf/core/atomic_file.hpp"

namespace cf::model {

/// The capture of `checkpoint` (causalflow HDF5 or Hugging Face directory, cf::model::load_model)
/// on `text` (a file, brown or kjv; tokenised for the checkpoint): `n_seq` windows of T = n tokens
/// (n = 0: min(256, block_size)), head-mean attention and residual norms, no Q/K. The file is
/// registered for removal on exit, error and SIGINT/SIGTERM and removed with this object. Throws
/// cf::InvalidArgument when n exceeds the checkpoint's block_size ("--n = ...", as the option).
class TemporaryCapture {
 public:
  TemporaryCapture(const std::string& checkpoint, const std::string& text, long n, int n_seq);
  const std::string& path() const { return file_.path(); }

 private:
  TempFile file_{"cf_rollout_capture"};
};

}  // namespace cf::model
