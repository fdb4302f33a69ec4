#include "cf/model/temporary_capture.hpp"

#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/capture.hpp"

namespace cf::model {

TemporaryCapture::TemporaryCapture(const std::string& checkpoint, const std::string& text, long n, int n_seq) {
  const nn::Model<float> model = load_model(checkpoint);
  const int T = n > 0 ? static_cast<int>(std::min<long>(n, 1L << 30)) : std::min(256, model.config.block_size);
  require(n <= model.config.block_size, "--n = ", n, " exceeds the checkpoint's block_size = ", model.config.block_size,
          " (a checkpoint is captured with T = n)");
  const auto windows = nn::capture_windows(
      hf::tokenize_text_for_checkpoint(checkpoint, model.config.vocab_size, text, "", nullptr), T, n_seq);
  nn::CaptureOptions co;
  co.store_qk = false;
  co.source = text;
  nn::capture_model(model, windows, path(), co);
}

}  // namespace cf::model
