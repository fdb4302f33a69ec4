#pragma once
// Rollout model described by a config file (`rollout --model-config FILE`): any ALiBi model with
// its layers, heads, slopes (per layer or shared), head weights, residual schedule and per-head
// constant-plus-diagonal content (Position bias (Herasimchyk et al.) Eqs. 1-4, Prop. 4.5; docs/spec.md sections 2, 6,
// 7).
//
// The schema is the one of the Position bias (Herasimchyk et al.) reference implementation (github
// ml-uhh/position-bias, src/rollout/main.py ModelConfig), so its shipped configs (data/position-bias/config/rollout)
// load unchanged; YAML (yaml-cpp) or JSON with the same keys. docs/rollout.md "Model configs"
// lists every field, its range and the semantics the reference gives it.
#include <Eigen/Dense>
#include <string>
#include <vector>

#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

/// A loaded and validated model config.
struct ModelConfigFile {
  std::string path;               ///< the file read
  std::string name;               ///< `name` field, else the file's stem
  long sequence_length = 0;       ///< default n (`sequence_length`; 256 when absent)
  int layers = 0;                 ///< L (`num_layers`)
  int heads = 0;                  ///< H (`attention_config.num_heads`)
  double temperature = 1;         ///< `attention_config.softmax_temperature` (already folded into
                                  ///< model.slopes and content: logits / T)
  AlibiModel model;               ///< slopes (layer_slopes when given per layer), head weights, mask,
                                  ///< content delta (L x H, already divided by T); no content = empty
  Eigen::VectorXd alpha;          ///< the resolved residual schedule (L entries in [0, 1])
  std::string schedule;           ///< "constant" | "power_decay" | "custom" (as in the file)
  std::string content_broadcast;  ///< "reference" | "all_heads" (see docs)
  bool has_content = false;       ///< some delta(l, h) != 0
};

/// Read a model config: `.json` is parsed as JSON, anything else as YAML (YAML 1.2 also reads
/// JSON). Throws cf::InvalidArgument naming the field (dotted path with indices, e.g.
/// `attention_config.alibi_slopes[0][3]`) and the offending value for every violation: missing
/// required field, unknown field, wrong type, non-finite or out-of-range number, inconsistent
/// lengths; cf::Error when the file cannot be read.
ModelConfigFile load_model_config(const std::string& path);

}  // namespace cf::rollout
