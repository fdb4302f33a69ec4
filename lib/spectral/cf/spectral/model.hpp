#pragma once
// Per-head, per-layer and per-model routing/filtering metrics (Routing/filtering (Jamil & Kapadia) §3, §5.2;
// docs/spec.md §3): the weight-level analysis of every head of a checkpoint (factorised, never a dense d x d SVD) and
// the per-layer profile whose effective routing rank by layer is the "spectral cascade".
#include <functional>
#include <string>
#include <vector>

#include "cf/spectral/checkpoint.hpp"
#include "cf/spectral/decomposition.hpp"

namespace cf::spectral {

/// Metrics of one head at one level ("weight" or "sequence").
struct HeadResult {
  int layer = 0, head = 0;
  std::string attn;  ///< the layer's attention variant
  /// At sequence level: averages over the texts of each scalar below (Routing/filtering (Jamil & Kapadia) App. A:
  /// "averaged across sequences per head"); at weight level the values of the one kernel.
  double rho = 0, erank_R = 0, erank_F = 0, pr_R = 0, pr_F = 0, erank_M = 0;
  double norm_M = 0, norm_F = 0, norm_R = 0, max_re_lambda = 0;
  double lambda_tol = 0;             ///< rounding level of max_re_lambda (HeadSpectrum::lambda_tol; averaged)
  Index rank_R = 0, rank_F = 0;      ///< numerical ranks (sequence level: of the last text)
  Eigen::VectorXd sigma_R, sigma_F;  ///< leading singular values (weight level; sequence: last text)
};

/// Per-layer aggregate (mean over heads unless named otherwise).
struct LayerProfile {
  int layer = 0;
  std::string attn;
  double erank_R = 0, erank_F = 0, pr_R = 0, rho = 0, rho_median = 0, max_re_lambda = 0, max_re_lambda_max = 0;
  int routing_heads = 0;   ///< heads with rho > 1
  int unstable_heads = 0;  ///< heads with max Re lambda > lambda_tol (above rounding)
  /// heads whose rho is 0/0 (M = 0: all-zero W_Q or W_K, a pruned or dead head); left out of rho
  /// and rho_median, which are NaN (null in JSON) when no head of the layer has a defined rho
  int undefined_rho_heads = 0;
};

/// Model-level summary.
struct ModelSummary {
  int heads = 0, routing_heads = 0, unstable_heads = 0;
  int undefined_rho_heads = 0;  ///< rho = 0/0 (LayerProfile::undefined_rho_heads), not in rho_median
  double rho_median = 0, erank_R_mean = 0, erank_F_mean = 0, max_re_lambda_mean = 0;
};

/// All results of one analysis.
struct ModelSpectrum {
  std::string level;                 ///< "weight" or "sequence"
  std::vector<HeadResult> heads;     ///< ordered by (layer, head)
  std::vector<LayerProfile> layers;  ///< one per analysed layer, ascending
  ModelSummary summary;
};

/// Convert one HeadSpectrum into a HeadResult (keeps at most keep_sigma singular values).
HeadResult head_result(int layer, int head, const std::string& attn, const HeadSpectrum& s, Index keep_sigma = 16);

/// Weight-level analysis of every head of the given layers (all when `layers` is empty):
/// analyse_factored(W_Q, W_K) per head, heads in parallel (OpenMP). Layer indices must be in
/// [0, n_layer). Cost O(L H (d d_k^2 + d_k^3)).
ModelSpectrum analyse_weights(const AttentionWeights& w, const std::vector<int>& layers = {},
                              const AnalysisOptions& opt = {});

/// A batched symmetric eigensolver from elsewhere (issue 30: a device, lib/gpu's
/// cf/gpu/spectral_backend.hpp): `solve` returns the eigenvalues (any order) of each matrix of a
/// batch of symmetric matrices of one size; `rounding_unit` is the unit roundoff of its arithmetic.
struct SymEigenSolver {
  std::function<std::vector<Eigen::VectorXd>(const std::vector<Eigen::MatrixXd>&)> solve;
  double rounding_unit = 0x1p-53;
};

/// analyse_weights with the symmetric eigenproblems of every head batched through `eig`: sigma(F)
/// = |eig(CF)|, sigma(R) and sigma(M) the non-negative half of the eigenvalues +-sigma of the
/// symmetric embeddings [[0, X], [X^T, 0]] of CR and C.topRows(rr) (cf::spectral::FactoredCores).
/// The QR factors and max Re lambda stay on the CPU. Numerical ranks count sigma_i above
/// max(rank_tolerance, p eig.rounding_unit) sigma_max (p = the core's size: below that a less
/// precise solver returns noise). Equal to analyse_weights to the solver's precision.
ModelSpectrum analyse_weights(const AttentionWeights& w, const std::vector<int>& layers, const AnalysisOptions& opt,
                              const SymEigenSolver& eig);

/// Average several per-text HeadResults of the same head (sequence level): every scalar is the
/// mean; ranks and sigma come from the last entry. Throws cf::InvalidArgument if empty.
HeadResult average_heads(const std::vector<HeadResult>& per_text);

/// Per-layer profiles and the model summary from head results (fills m.layers and m.summary).
void aggregate(ModelSpectrum& m);

}  // namespace cf::spectral
