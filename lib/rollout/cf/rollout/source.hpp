#pragma once
// What a rollout runs on (Position bias (Herasimchyk et al.), docs/spec.md sections 2, 6, 7): a structured ALiBi model
// (a preset with a dataset's measured schedule and content prior, or a model config file) or dense kernels (a kernel
// file, or the measured kernels of a capture / in-process captured checkpoint), with the residual schedule resolved.
// One resolution for every `rollout` subcommand (apps/rollout).
#include <Eigen/Dense>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

/// The user's choices, as strings from the command line (docs/rollout.md "Command line").
struct SourceOptions {
  std::string model = "bloom";            ///< preset name | capture .h5 | checkpoint .h5 (HDF5 by signature)
  std::string model_config;               ///< YAML/JSON model config (replaces --model); "" = none
  std::string dataset;                    ///< "" = fineweb-edu; presets only
  std::string alpha = "measured";         ///< measured | const:X | power[0|1]:A0,BETA | file:PATH
  std::string alpha_kind = "token-mean";  ///< captures: token-mean | frobenius
  std::string mask = "causal";            ///< causal | swa:W (structured models)
  std::string slopes = "preset";          ///< preset | simple | hf
  std::string content = "measured";       ///< measured | mean | none | c,delta
  std::string content_scale = "raw";      ///< raw | sqrt (presets: 1/sqrt(d_head))
  std::string head_weights;               ///< file of H weights; "" = uniform
  std::string kernel_file;                ///< dense kernels (1 or L matrices)
  std::string kernels = "auto";           ///< auto | measured | file | alibi (capture/checkpoint models;
                                          ///< alibi = content-free ALiBi kernels of an ALiBi model's
                                          ///< config, structured path, n free)
  bool falcon_scale = false;              ///< ALiBi slopes / sqrt(d_head) (presets)
  long n = 0;                             ///< 0 = the caller's default
  std::string capture_path;               ///< a capture written for a checkpoint model (replaces model's file)
  nlohmann::json capture_note;            ///< recorded in params when capture_path is set
};

/// A resolved rollout source.
struct RolloutSource {
  std::string name;                ///< preset name, config name or file
  bool structured = false;         ///< ALiBi model (O(L H n) path) vs dense kernels
  AlibiModel base;                 ///< structured: slopes, weights, mask, no content
  Eigen::MatrixXd delta;           ///< structured: content of variant (c) (L x H, L x 1 or 1 x 1); empty = none
  std::vector<RowMatrix> kernels;  ///< dense: L kernels (kernels[l] = Abar(l+1))
  std::string kernel_source;       ///< "kernel file" | "measured kernels" | "ALiBi"
  Eigen::VectorXd alpha;           ///< residual schedule, L entries in [0, 1]
  int L = 0;                       ///< layers
  long n = 0;                      ///< sequence length
  nlohmann::json params;           ///< resolved choices, for the report's meta
};

/// True when `model` names an existing regular file (a capture or checkpoint), false for a preset
/// name. Files are recognised by content (HDF5 signature), not by extension.
bool is_model_file(const std::string& model);

/// True when `path` is a causalflow checkpoint (HDF5 with root attribute format =
/// "causalflow-checkpoint").
bool is_checkpoint_file(const std::string& path);

/// Resolve options into a source. default_n applies when o.n == 0 and nothing else fixes n (a
/// model config's sequence_length, a kernel file or capture's T). Throws cf::InvalidArgument
/// (exit 2) naming the option for every inconsistent choice: unknown preset or dataset, options
/// that do not apply to the model kind (--dataset with a file model, --falcon-scale with a
/// config, ...), --n differing from a kernel file / capture, a capture missing a layer, schedule
/// length != L, content values that are not finite.
RolloutSource make_source(const SourceOptions& o, long default_n);

/// The kernels Abar(l) of the source, n x n each (L of them; structured sources are built dense,
/// content included when `content`). n <= max_n (dense memory) is checked.
std::vector<RowMatrix> source_kernels(const RolloutSource& s, bool content, long max_n = 512);

}  // namespace cf::rollout
