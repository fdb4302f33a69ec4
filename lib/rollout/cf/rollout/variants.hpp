#pragma once
// The rollout variants of Position bias (Herasimchyk et al.) section 6.2 (docs/spec.md section 2) for one source:
//   (a) attention-only: alpha = 1, no content;  (b) residual-aware: the source's alpha, no content;
//   (c) residual-aware + constant-plus-diagonal content (structured sources with content only).
// A table of per-variant profiles that callers extend (e.g. a measured influence beside them).
#include <Eigen/Dense>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cf/rollout/last_row_backend.hpp"
#include "cf/rollout/source.hpp"

namespace cf::rollout {

/// One variant's last-row distribution p (n entries, sums to 1).
struct VariantProfile {
  std::string key;     ///< "attention_only" | "residual" | "residual_content" (JSON keys)
  std::string label;   ///< "(a) attention-only" | "(b) residual-aware" | "(c) residual + content"
  Eigen::VectorXd p;   ///< p_j = P(L)[n-1, j]
  double seconds = 0;  ///< wall time of its computation
};

/// Last row of P(L) for the source with schedule `alpha` (L entries), content on or off, at
/// sequence length n. Structured sources take the O(L H n) path (or the dense one when `dense`,
/// n <= kDenseMaxN); dense sources need n == s.n. `backend` computes the last row on a device
/// (issue 30; null = the CPU paths of cf/rollout/rollout.hpp).
Eigen::VectorXd rollout_profile(const RolloutSource& s, const Eigen::VectorXd& alpha, bool content, long n,
                                bool dense = false, const LastRowBackend* backend = nullptr);

/// Variants (a), (b) and, when the source is structured and has content, (c), at length n
/// (0 = s.n), in that order; `backend` as in rollout_profile.
std::vector<VariantProfile> rollout_variants(const RolloutSource& s, long n = 0, bool dense = false,
                                             const LastRowBackend* backend = nullptr);

/// One profile's row of the variants summary table (the layout `rollout` and `rollout flow` share):
/// cells {label, p_0, p_n-1, argmin, min, primacy, recency, seconds} and, when `influence` is not
/// empty (same length as `p`), Spearman and W1/(n-1) against it (Position bias (Herasimchyk et al.)
/// Tables 2-5); and the same numbers as a JSON object (p_first, p_last, argmin, min, primacy_mass,
/// recency_mass, seconds[, spearman, w1_normalised]). `p` is a distribution over positions.
std::pair<std::vector<std::string>, nlohmann::json> variant_summary_row(const std::string& label,
                                                                        const Eigen::VectorXd& p, double seconds,
                                                                        const Eigen::VectorXd& influence);

}  // namespace cf::rollout
