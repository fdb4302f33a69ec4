#pragma once
// Model presets (data/presets/*.json, converted from the reference code of seed 004,
// github ml-uhh/position-bias, MIT) and alpha schedules (SPEC.md sections 2 and 7.2).
#include <Eigen/Dense>
#include <string>
#include <vector>

namespace cf::rollout {

/// One shipped model: ALiBi slopes, measured residual schedule and content priors.
struct Preset {
  std::string name;                 ///< canonical name, e.g. "bloom-176b"
  int layers = 0;                   ///< L
  int heads = 0;                    ///< H
  int d_head = 0;                   ///< head dimension (for 1/sqrt(d_head) scalings)
  std::string slope_recipe;         ///< recipe that reproduces the shipped slopes ("simple")
  std::vector<double> slopes;       ///< H slopes as shipped
  Eigen::VectorXd alpha_measured;   ///< L token-averaged alphas (FineWeb-Edu, n = 256)
  Eigen::MatrixXd content_delta;    ///< L x H diagonal scores delta (raw q.k), FineWeb-Edu
  double content_mean = 0;          ///< scalar mean diagonal score (mean_content config)
  std::string source;               ///< provenance line
};

/// Canonical preset names (aliases excluded): bloom-176b, bloom-7b1, mpt-7b, mpt-30b, falcon-rw-7b.
std::vector<std::string> preset_names();

/// Resolve an alias ("bloom" -> "bloom-176b"); returns "" when the name is unknown.
std::string canonical_preset_name(const std::string& name);

/// Load a preset from `data_dir`/presets/<name>.json (data_dir "" = the build's data/ folder).
/// Throws cf::InvalidArgument for an unknown name (message lists the known ones) or a malformed
/// file, cf::Error if the file cannot be read.
Preset load_preset(const std::string& name, const std::string& data_dir = "");

/// A parsed alpha schedule specification (SPEC.md 7.2).
struct AlphaSpec {
  enum class Kind { Measured, Constant, Power, File } kind = Kind::Measured;
  double value = 0;    ///< Constant: alpha; Power: a0
  double beta = 0;     ///< Power: exponent
  std::string path;    ///< File: path
  std::string text;    ///< the original specification
};

/// Parse "measured" | "const:X" | "power:A0,BETA" | "file:PATH"; throws cf::InvalidArgument.
AlphaSpec parse_alpha_spec(const std::string& spec);

/// Power-decay schedule alpha_l = a0 / (l+1)^beta for layers l = 1..L (so alpha_1 = a0/2^beta).
/// Requires L >= 1, a0 in [0, 1], beta >= 0.
Eigen::VectorXd alpha_power(int L, double a0, double beta);

/// Read a schedule file (numbers separated by whitespace, commas or newlines; '#' comments).
Eigen::VectorXd read_alpha_file(const std::string& path);

/// Read the dataset /alpha_token_mean [L] of a causalflow capture file (docs/checkpoint_format.md).
/// Throws cf::InvalidArgument if the file is not HDF5 or lacks the dataset.
Eigen::VectorXd read_capture_alpha(const std::string& path, const std::string& dataset = "/alpha_token_mean");

/// Throw cf::InvalidArgument unless alpha has exactly L entries, each finite and in [0, 1].
void validate_alpha(const Eigen::VectorXd& alpha, int L);

/// Resolve a schedule for L layers. `measured` is the preset's (or capture's) schedule (may be
/// empty if none is available, in which case Measured throws).
Eigen::VectorXd resolve_alpha(const AlphaSpec& spec, int L, const Eigen::VectorXd& measured);

}  // namespace cf::rollout
