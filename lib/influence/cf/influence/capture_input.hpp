#pragma once
// Token windows taken from a capture file (docs/checkpoint_format.md "Capture files"), so that the
// influence and Jacobian tools analyse exactly the windows a capture recorded. The capture must
// come from the same model: its `config` attribute must equal the checkpoint's config.
#include <cstdint>
#include <string>
#include <vector>

#include "cf/nn/config.hpp"

namespace cf::influence {

/// The N windows of /tokens [N, T] of `capture_path`. Throws cf::InvalidArgument when the file is
/// not a causalflow capture, has no /tokens, or was taken from another model (config differs from
/// `cfg`; the message names the first differing key).
std::vector<std::vector<std::int32_t>> capture_token_windows(const std::string& capture_path,
                                                             const nn::ModelConfig& cfg);

}  // namespace cf::influence
