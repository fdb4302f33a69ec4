#pragma once
// Spectral surgery on one head's interaction (Routing/filtering (Jamil & Kapadia) §5.1, §6, App. B; docs/spec.md §3
// "Surgery"): truncate the routing part R and/or the filtering part F of M to rank k by SVD (Eckart–Young), remove a
// part, or "linearize" (top singular PAIR of R, one scalar of filtering per head). These functions transform an n x n
// sequence-level matrix; the run-time substitution inside a forward pass is the trainer's hook (lib/nn), which calls
// them.
#include <Eigen/Dense>
#include <string>

#include "cf/core/enum_table.hpp"
#include "cf/spectral/decomposition.hpp"

namespace cf::spectral {

/// Which part of M = F + R a surgery truncates.
enum class Component { Routing, Filtering, Both };

/// The components' names (spectral-surgery --component, the report).
inline constexpr EnumTable kComponents{std::array{
    EnumEntry<Component>{Component::Routing, "routing"},
    EnumEntry<Component>{Component::Filtering, "filtering"},
    EnumEntry<Component>{Component::Both, "both"},
}};

/// Parse "routing" | "filtering" | "both"; throws cf::InvalidArgument otherwise.
Component parse_component(const std::string& name);
std::string component_name(Component c);

/// How "make filtering one scalar per head" picks the scalar for standard attention
/// (docs/spec.md §7 option 10). On an n x n F, trace F / n and mean(diag F) are the same number; the two
/// names are kept so outputs record the choice the paper's text offers.
enum class ScalarFiltering { TraceOverN, MeanDiag };
inline constexpr EnumTable kScalarFilterings{std::array{
    EnumEntry<ScalarFiltering>{ScalarFiltering::TraceOverN, "trace"},
    EnumEntry<ScalarFiltering>{ScalarFiltering::MeanDiag, "mean-diag"},
}};

/// Best rank-k approximation of X (m x n) in Frobenius and spectral norm (Eckart–Young):
/// U_k Sigma_k V_k^T from a full SVD. k >= 0; k >= min(m, n), or k >= the numerical rank
/// (sigma_k <= 4 eps max(m, n) sigma_1), returns X itself unchanged, bit for bit, so "full rank"
/// surgery is exactly the identity.
/// For a skew X an odd k keeps half of a rotation plane (still optimal, no longer skew).
Eigen::MatrixXd truncate_rank(const Eigen::MatrixXd& X, Index k);

/// Rank-2 Eckart–Young truncation of a skew-symmetric S (n x n): its top rotation plane
/// A - A^T with A = (S v) v^T and v the top right singular vector (S v = sigma_1 u). v comes from
/// Lanczos with full reorthogonalisation on the Gram matrix S^T S = -S^2 (one vector of its doubly
/// degenerate top eigenspace fixes the plane): GEMVs only, typically 10-40 steps, instead of the
/// O(n^3) full SVD of truncate_rank. The result is exactly skew and agrees with truncate_rank(S, 2)
/// to ~1e-10 relative whenever sigma_1 > sigma_3 (when sigma_1 = sigma_3 the best plane is not
/// unique; both are optimal). n <= 2 returns S, S = 0 returns 0; n <= 32, or a start vector that
/// misses the top plane, uses truncate_rank(S, 2). Skewness is assumed, not checked.
/// Used by linearize_standard / linearize_sd (Routing/filtering (Jamil & Kapadia) §6 "top singular pair of R").
Eigen::MatrixXd truncate_skew_top_pair(const Eigen::MatrixXd& S);

/// One surgery: which component, to which rank; rank < 0 means "keep full rank".
/// rank = 0 removes the component (R = 0: "remove routing"; F = 0: "remove filtering").
struct SurgerySpec {
  Component component = Component::Both;
  Index rank = -1;
};

/// M' = F' + R' where the selected parts are truncated to spec.rank (n x n input M).
/// With rank < 0, or rank >= n, returns M unchanged (bitwise). Throws cf::InvalidArgument unless
/// M is square, and for an odd rank 0 < k < n when R is truncated (Routing, Both): the singular
/// values of a skew matrix come in equal pairs, so an odd k would keep half a rotation plane
/// (docs/spectral.md "Odd routing ranks").
Eigen::MatrixXd apply_surgery(const Eigen::MatrixXd& M, const SurgerySpec& spec);

/// Linearise a standard-attention head (Routing/filtering (Jamil & Kapadia) §6): R -> its top singular pair (rank 2,
/// truncate_skew_top_pair) and F -> s I with s = trace F / n (= mean diag F). M: n x n, n >= 1.
Eigen::MatrixXd linearize_standard(const Eigen::MatrixXd& M, ScalarFiltering mode = ScalarFiltering::TraceOverN);

/// Linearise an S–D head (Routing/filtering (Jamil & Kapadia) §5.1, §6): routing S (n x n, skew) -> its top singular
/// pair (truncate_skew_top_pair), damping d (n entries, > 0) -> its mean. Returns S' - mean(d) I (the pre-mask logits).
Eigen::MatrixXd linearize_sd(const Eigen::MatrixXd& S, const Eigen::VectorXd& d);

/// The S–D interaction S - diag(d) (Routing/filtering (Jamil & Kapadia) §4) for skew S (n x n) and damping d (n).
Eigen::MatrixXd sd_interaction(const Eigen::MatrixXd& S, const Eigen::VectorXd& d);

/// Causal ELU+1 linear attention (docs/spec.md §3, Routing/filtering (Jamil & Kapadia) §7.2): phi(x) = elu(x) + 1,
/// out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i), S_i = sum_{j<=i} phi(k_j) v_j^T,
/// z_i = sum_{j<=i} phi(k_j). Q, K: n x d_k; V: n x d_v; returns n x d_v. O(n d_k d_v).
Eigen::MatrixXd linear_attention_elu1(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V);

/// Largest rank a surgery can meaningfully request for a head with key dimension d_k on
/// sequences of n tokens: rank(F), rank(R) <= min(n, 2 d_k) (docs/spec.md §3).
Index max_component_rank(Index n, Index d_k);

}  // namespace cf::spectral
