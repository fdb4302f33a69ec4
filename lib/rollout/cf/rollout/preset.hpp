#pragma once
// Model presets (data/presets/*.json, converted from the reference code of Position bias (Herasimchyk et al.),
// github ml-uhh/position-bias, MIT) and alpha schedules (docs/spec.md sections 2 and 7.2).
#include <Eigen/Dense>
#include <map>
#include <string>
#include <vector>

namespace cf::rollout {

/// One shipped model: ALiBi slopes, measured residual schedules and content priors for each of
/// the reference's datasets (FineWeb-Edu, DCLM-Baseline, Wikipedia).
struct Preset {
  std::string name;                     ///< canonical name, e.g. "bloom-176b"
  int layers = 0;                       ///< L
  int heads = 0;                        ///< H
  int d_head = 0;                       ///< head dimension (for 1/sqrt(d_head) scalings)
  std::string slope_recipe;             ///< recipe that reproduces the shipped slopes ("simple")
  std::vector<double> slopes;           ///< H slopes as shipped
  std::string dataset = "fineweb-edu";  ///< the dataset selected below (select_dataset)
  Eigen::VectorXd alpha_measured;       ///< L token-averaged alphas of `dataset` (n = 256)
  Eigen::MatrixXd content_delta;        ///< L x H diagonal scores delta (raw q.k) of `dataset`
  double content_mean = 0;              ///< scalar mean diagonal score (mean_content config) of `dataset`
  bool has_content_mean = false;        ///< whether the reference ships a mean_content config for `dataset`
  std::string source;                   ///< provenance line
  /// Every shipped dataset's schedule, content and mean content (keys: dataset names).
  std::map<std::string, Eigen::VectorXd> alpha_by_dataset;
  std::map<std::string, Eigen::MatrixXd> content_by_dataset;
  std::map<std::string, double> content_mean_by_dataset;
};

/// Dataset names of the reference data: fineweb-edu (the paper's main text), dclm, wikipedia.
std::vector<std::string> dataset_names();

/// Make `dataset` the preset's measured schedule and content prior (alpha_measured,
/// content_delta, content_mean). Throws cf::InvalidArgument naming the known datasets when the
/// name is unknown or the preset ships no schedule / content for it.
void select_dataset(Preset& preset, const std::string& dataset);

/// Canonical preset names (aliases excluded): bloom-176b, bloom-7b1, mpt-7b, mpt-30b, falcon-rw-7b.
std::vector<std::string> preset_names();

/// Resolve an alias ("bloom" -> "bloom-176b"); returns "" when the name is unknown.
std::string canonical_preset_name(const std::string& name);

/// Load a preset from `data_dir`/presets/<name>.json (data_dir "" = the build's data/ folder).
/// Throws cf::InvalidArgument for an unknown name (message lists the known ones) or a malformed
/// file, cf::Error if the file cannot be read.
Preset load_preset(const std::string& name, const std::string& data_dir = "");

/// A parsed alpha schedule specification (docs/spec.md §7.2).
struct AlphaSpec {
  enum class Kind { Measured, Constant, Power, File } kind = Kind::Measured;
  double value = 0;  ///< Constant: alpha; Power: a0
  double beta = 0;   ///< Power: exponent
  int origin = 0;    ///< Power: 0 = alpha_l = a0 / l^beta (first layer a0, as the reference code);
                     ///< 1 = alpha_l = a0 / (l+1)^beta (first layer a0 / 2^beta); layers l = 1..L
  std::string path;  ///< File: path
  std::string text;  ///< the original specification
};

/// Parse "measured" | "const:X" | "power:A0,BETA" (= power0) | "power0:A0,BETA" |
/// "power1:A0,BETA" | "file:PATH"; throws cf::InvalidArgument naming the bad part.
AlphaSpec parse_alpha_spec(const std::string& spec);

/// Power-decay schedule for layers l = 1..L. origin 0 (the reference implementation's
/// `power_decay`, lambda_t = lambda_0 / (t+1)^beta for t = 0..L-1): alpha_l = a0 / l^beta, so
/// alpha_1 = a0. origin 1: alpha_l = a0 / (l+1)^beta, so alpha_1 = a0 / 2^beta (one layer later).
/// Requires L >= 1, a0 in [0, 1], beta >= 0, origin 0 or 1.
Eigen::VectorXd alpha_power(int L, double a0, double beta, int origin = 0);

/// alpha_l of a Constant or Power spec at layer l >= 1 (for schedules of any depth).
double alpha_at(const AlphaSpec& spec, long l);

/// Read a schedule file (numbers separated by whitespace, commas or newlines; '#' comments).
/// `what` names the file in errors (--head-weights reads the same format).
Eigen::VectorXd read_alpha_file(const std::string& path, const std::string& what = "alpha file");

/// Read the dataset /alpha_token_mean [L] of a causalflow capture file (docs/checkpoint_format.md).
/// Throws cf::InvalidArgument if the file is not HDF5 or lacks the dataset.
Eigen::VectorXd read_capture_alpha(const std::string& path, const std::string& dataset = "/alpha_token_mean");

/// Throw cf::InvalidArgument unless alpha has exactly L entries, each finite and in [0, 1].
void validate_alpha(const Eigen::VectorXd& alpha, int L);

/// Resolve a schedule for L layers. `measured` is the preset's (or capture's) schedule (may be
/// empty if none is available, in which case Measured throws).
Eigen::VectorXd resolve_alpha(const AlphaSpec& spec, int L, const Eigen::VectorXd& measured);

}  // namespace cf::rollout
