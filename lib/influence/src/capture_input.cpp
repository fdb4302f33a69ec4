// Windows from a capture file, see cf/influence/capture_input.hpp.
#include "cf/influence/capture_input.hpp"

#include <nlohmann/json.hpp>

#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/io/hdf5.hpp"

namespace cf::influence {

std::vector<std::vector<std::int32_t>> capture_token_windows(const std::string& capture_path,
                                                             const nn::ModelConfig& cfg) {
  require(io::is_hdf5_file(capture_path), "--capture: '", capture_path, "' is missing or not an HDF5 file");
  const io::File f = io::File::open(capture_path);
  require(f.has_attr("format") && f.attr_string("format") == "causalflow-capture", "--capture: '", capture_path,
          "' is not a causalflow capture (run `capture` first)");
  nlohmann::json theirs;
  try {
    theirs = cf::parse_json(f.attr_string("config"), "config attribute");
  } catch (const std::exception& e) {
    throw InvalidArgument("--capture: '" + capture_path + "' has a malformed config attribute (" + e.what() + ")");
  }
  const nlohmann::json ours = nn::to_json(cfg);
  if (theirs != ours) {
    std::string key = "?";
    for (auto it = ours.begin(); it != ours.end(); ++it)
      if (!theirs.contains(it.key()) || theirs[it.key()] != it.value()) {
        key = it.key();
        break;
      }
    throw InvalidArgument("--capture: '" + capture_path + "' was taken from another model (config key '" + key +
                          "' differs from the checkpoint's); capture this checkpoint first");
  }
  const auto t = f.read<std::int64_t>("tokens");
  require(t.shape.size() == 2 && t.shape[0] >= 1 && t.shape[1] >= 1, "--capture: '", capture_path,
          "' has /tokens of shape ", io::shape_string(t.shape), ", expected [N, T]");
  std::vector<std::vector<std::int32_t>> w(t.shape[0], std::vector<std::int32_t>(t.shape[1]));
  for (std::size_t i = 0; i < t.shape[0]; ++i)
    for (std::size_t j = 0; j < t.shape[1]; ++j) {
      const std::int64_t v = t.data[i * t.shape[1] + j];
      require(v >= 0 && v < cfg.vocab_size, "--capture: token ", v, " outside [0, vocab_size = ", cfg.vocab_size, ")");
      w[i][j] = static_cast<std::int32_t>(v);
    }
  return w;
}

}  // namespace cf::influence
