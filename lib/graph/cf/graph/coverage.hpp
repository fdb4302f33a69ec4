#pragma once
// Phase-conditioned coverage functions of Boundary repair (Yang) §3.5-3.6 (docs/spec.md §1). A target t = jb + r
// (0 <= r < b) and a source u = t - d are "covered" when u can reach t: by a direct edge of one
// layer (the paper's C functions) or through the L-layer closure of a schedule (docs/spec.md §7 option 6).
#include <Eigen/Core>
#include <string>
#include <vector>

#include "cf/graph/mask.hpp"
#include "cf/graph/reachability.hpp"

namespace cf::graph {

using CoverageMatrix = Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic>;

/// C_Block(d, r) = [d <= r] (Boundary repair (Yang) Eq. 18, Prop. 1).
bool coverage_block(Index d, Index r);
/// C_SWA(d, r) = [0 <= d < w] (Eq. 22).
bool coverage_swa(Index d, Index w);
/// C_PBB(d, r) = [d <= r] or [0 <= r < h and r < d <= r + h] (Eq. 23); C_Bridge = C_PBB (Prop. 2).
bool coverage_pbb(Index d, Index r, Index h);
/// C_SE(d, r) = [d <= r] or [0 <= r < e and r < d <= r + b] (Eq. 24).
bool coverage_se(Index d, Index r, Index b, Index e);

/// The closed form of the pattern's single-layer direct coverage at (d, r), d >= 0, 0 <= r < b
/// (Full: always 1; valid for targets whose source u = t - d >= 0).
bool coverage_closed_form(const Pattern& p, Index d, Index r);

/// Direct coverage read off the edge set: [u >= 0 and (u, t) ∈ E] for t = jb + r, u = t - d.
/// Uses has_edge_brute_force (independent of the closed forms).
bool coverage_direct(const Mask& m, Index t, Index d);

/// Closed-form matrix C(d, r) for d = 0..d_max (rows) and r = 0..b-1 (columns).
CoverageMatrix coverage_matrix_closed_form(const Pattern& p, Index d_max);

/// Coverage of block J's targets through an L-layer closure: entry (d, r) = [t - d ∈ R_L(t)],
/// t = J b + r; 0 where t >= n or t - d < 0. J must satisfy 0 <= J < ceil(n/b).
CoverageMatrix coverage_matrix_closure(const Closure& c, Index b, Index J, Index d_max);

/// Fraction of phases r (over columns with at least one existing target) that reach distance d,
/// per row of a coverage matrix: the quantity of Prop. 1 ((b - d)/b under Block).
std::vector<double> phase_fraction(const CoverageMatrix& C);

/// One disagreement found by a verification.
struct CoverageMismatch {
  Index t, d;
  bool closed_form, edges;
};

/// Result of comparing the closed form with the edge set for every target t of a mask and every
/// distance 0 <= d <= min(t, d_max): `checked` pairs, mismatches (at most max_report kept).
struct CoverageCheck {
  std::int64_t checked = 0, mismatches = 0;
  std::vector<CoverageMismatch> examples;
  bool ok() const { return mismatches == 0; }
};
CoverageCheck verify_coverage_closed_form(const Mask& m, Index d_max, int max_report = 10);

/// Result of comparing the fast closure with the brute-force closure on positions 0..n_check-1
/// (edges into t depend only on positions <= t, so a prefix check is exact for those targets).
struct ClosureCheck {
  Index n_checked = 0;
  std::int64_t pairs = 0, mismatches = 0;
  bool ok() const { return mismatches == 0; }
};
ClosureCheck verify_closure(const Schedule& s, Index n, Index n_check_max = 1024);

/// Witnesses of non-nestedness between two patterns' closed-form coverage sets over
/// d = 0..d_max, r = 0..b-1 (Prop. 4): pairs covered by A but not B, and by B but not A.
struct NestednessReport {
  std::int64_t only_a = 0, only_b = 0, both = 0;
  std::vector<std::pair<Index, Index>> witnesses_a, witnesses_b;  ///< (d, r), first few of each
  bool nested_a_in_b() const { return only_a == 0; }
  bool nested_b_in_a() const { return only_b == 0; }
};
NestednessReport compare_coverage(const Pattern& a, const Pattern& b, Index d_max, int max_witnesses = 5);

}  // namespace cf::graph
