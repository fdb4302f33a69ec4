#pragma once
// Accuracy bounds and diagnostics of Boundary repair (Yang) §3.3, §3.8-3.9 (docs/spec.md §1): the K-way boundary-copy
// bound (Theorem 2), the coverage-limited bound (Prop. 3), the probe coverage pi_D (Eq. 28), the
// cost-normalised gain U_D (Eq. 33) and the SWA-gap recovery rho_D.
#include <string>
#include <vector>

#include "cf/graph/mask.hpp"
#include "cf/graph/reachability.hpp"

namespace cf::graph {

/// Upper bound on top-1 accuracy and lower bound on expected cross-entropy (nats).
struct AccuracyBound {
  double accuracy_max;
  double cross_entropy_min;
};

/// Theorem 2 (K-way boundary copy): a fixed-block model has accuracy <= 1/K and
/// cross-entropy >= log K. K >= 2.
AccuracyBound boundary_copy_bound(int K);

/// Prop. 3: with a fraction pi in [0, 1] of probe pairs covered, accuracy <= pi + (1-pi)/K and
/// cross-entropy >= (1-pi) log K. K >= 2.
AccuracyBound coverage_limited_bound(double pi, int K);

/// A probe given as a (d, r) phase cell with a non-negative weight.
struct PhaseProbe {
  Index d, r;
  double weight = 1.0;
};
/// A probe given as a (source u, target t) pair with a non-negative weight.
struct PairProbe {
  Index u, t;
  double weight = 1.0;
};

/// A probe distribution read from CSV: exactly one of the two lists is filled.
struct ProbeSet {
  std::vector<PhaseProbe> phase;
  std::vector<PairProbe> pairs;
};

/// Parse CSV text whose header is "d,r" or "u,t", optionally followed by ",weight" (default
/// weight 1). `source` names the input in error messages (cf::InvalidArgument with line number).
ProbeSet parse_probe_csv(const std::string& text, const std::string& source);

/// pi_D for phase probes under the pattern's closed-form single-layer coverage (Eq. 28).
/// Throws cf::InvalidArgument on negative weights, an all-zero distribution or r outside [0, b).
double covered_fraction(const Pattern& p, const std::vector<PhaseProbe>& probes);

/// pi_D for (u, t) probes under the single-layer edge set of a mask.
double covered_fraction(const Mask& m, const std::vector<PairProbe>& probes);

/// pi_D for (u, t) probes under an L-layer closure (u ∈ R_L(t)).
double covered_fraction(const Closure& c, const std::vector<PairProbe>& probes);

/// U_D(M) = (Acc(M) - Acc(Block)) / (Scores(M) - Scores(Block)) (Eq. 33). Throws if the score
/// difference is zero.
double cost_normalised_gain(double acc_m, double acc_block, double scores_m, double scores_block);

/// rho_D(M) = (Acc(M) - Acc(Block)) / (Acc(SWA) - Acc(Block)). Throws if Acc(SWA) = Acc(Block).
double swa_gap_recovery(double acc_m, double acc_block, double acc_swa);

}  // namespace cf::graph
