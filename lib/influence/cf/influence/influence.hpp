#pragma once
// Measured influence of Position bias (Herasimchyk et al.) (Eq. 6; docs/spec.md section 2):
//   yhat = argmax_v p(v | x) at the last position (fixed once per window),
//   g_j  = || d target(yhat | x) / d e_j ||_2, e_j = the input vector AT position j (token plus
//          position embedding as used at j: the encoder output, not the embedding-table row),
//   I_j  = mean over windows of g_j, normalised to sum 1 once, after averaging.
// The gradient comes from the model's own backward pass (cf::nn::forward_backward with a
// GradientSeed, or a cf::nn::SeededPass on a device), one batched pass per window set; never from
// finite differences.
#include <Eigen/Dense>
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/nn/model.hpp"

namespace cf::influence {

/// What is differentiated (docs/spec.md section 7 option 5): probability p(yhat|x) (the paper, default),
/// log-probability log p(yhat|x), or the logit z_yhat.
enum class Target { Probability, LogProbability, Logit };

/// The targets' names (--target of influence and jacobian, --influence-target of rollout).
inline constexpr EnumTable kTargets{std::array{
    EnumEntry<Target>{Target::Probability, "probability"},
    EnumEntry<Target>{Target::LogProbability, "log-probability"},
    EnumEntry<Target>{Target::Logit, "logit"},
}};

/// "probability" | "log-probability" | "logit"; throws cf::InvalidArgument naming the value.
Target parse_target(const std::string& name);
std::string target_name(Target t);

/// Token windows cut by capture's rule (cf::nn::capture_windows): window i of n tokens starts at
/// round(i (len - n - 1) / (count - 1)) (0 when count = 1). Requires n >= 2, count >= 1 and
/// tokens.size() >= n + 1; throws cf::InvalidArgument naming the counts.
struct Windows {
  std::vector<std::int64_t> starts;               ///< start offset of each window in the token stream
  std::vector<std::vector<std::int32_t>> tokens;  ///< count windows of n tokens
};
Windows influence_windows(const std::vector<std::int32_t>& tokens, int n, int count);
/// Window `index` alone of the `count` that influence_windows cuts (the same start and tokens, none
/// of the others copied): what `jacobian --window K --windows W` analyses. Requires index < count.
Windows influence_window(const std::vector<std::int32_t>& tokens, int n, int index, int count);

/// Per-window gradient norms of one window set.
struct InfluenceGradients {
  Eigen::MatrixXd g;                ///< [W, n]: g(w, j) = || d target / d e_j || of window w
  std::vector<std::int32_t> yhat;   ///< [W]: argmax next token at the last position
  Eigen::VectorXd p_yhat;           ///< [W]: p(yhat | x) at the last position
  std::vector<Eigen::MatrixXd> de;  ///< only with keep_gradients: [W] of [n, C], d target / d e_j
};

/// g for every window of `windows` (all of equal length n, 2 <= n <= block_size, ids < vocab_size)
/// in ONE batched forward + backward pass (B = W sequences). T = float for tools, double for the
/// finite-difference tests. `pass`: where the seeded pass runs (cf/influence/seeded_pass.hpp;
/// empty = cf::nn::forward_backward on the CPU). Throws cf::InvalidArgument for empty/ragged
/// windows, n < 2 or n > block_size.
template <class T>
InfluenceGradients influence_gradients(const nn::Model<T>& model, const std::vector<std::vector<std::int32_t>>& windows,
                                       Target target, bool keep_gradients = false, const nn::SeededPass<T>& pass = {});

/// Windows per backward pass for `batch` = 0 ("all at once"): W, unless one pass over W windows of
/// n tokens would hold more than `budget_bytes` of activations (estimated as 4 bytes x n x
/// (n_layer x 24 d_model + 2 vocab) per window: saved activations, logits and their gradient), then
/// the most windows that fit (at least 1). --windows 10^6 in one pass needed 20 GB before.
/// A given `batch` >= 1 is returned as is (capped at W).
int influence_batch(const nn::ModelConfig& config, int n, int W, int batch,
                    double budget_bytes = 2.0 * 1024 * 1024 * 1024);

/// The full measurement: gradients in batches of at most `batch` windows (one backward pass per
/// batch; batch >= 1; 0 = influence_batch: all windows at once when they fit the memory budget),
/// mean over windows, normalised to sum 1. `pass` as in influence_gradients.
struct InfluenceResult {
  Eigen::VectorXd profile;  ///< [n]: I_j, sums to 1
  Eigen::VectorXd mean_g;   ///< [n]: mean_w g(w, j) before the normalisation
  InfluenceGradients per_window;
  Target target = Target::Probability;
  int backward_passes = 0;
};
InfluenceResult measure_influence(const nn::Model<float>& model, const std::vector<std::vector<std::int32_t>>& windows,
                                  Target target, int batch = 0, const nn::SeededPass<float>& pass = {});

/// Normalise a mean-gradient profile to sum 1 (throws cf::Error if it is all zero or not finite).
Eigen::VectorXd normalise_profile(const Eigen::VectorXd& mean_g);

}  // namespace cf::influence
