#pragma once
// Measured Jacobians against the bound of Runway (Lee & Clark) Theorem 3.3 (docs/spec.md section 2):
//   J_ds = ||d h_d(L+r) / d h_s(L)|| <= C^r B_ds,  B = (I + A(L+r-1)) ... (I + A(L)),
// B split into the self term and the direct-path gate times the runway product (Runway (Lee & Clark)
// Eqs. 6-7, cf::rollout::jacobian_bound). The theorem leaves C open; this reports the smallest
// C* that makes the bound hold on every pair, the one-layer constants
//   C_1(l) = max_{w <= d, (I + A(l))_dw > 0} ||d h_d(l+1) / d h_w(l)|| / (I + A(l))_dw,
// and checks the chain-rule consequence C* <= max_{L <= l < L+r} C_1(l) and that every one-layer
// block outside the mask ((I + A(l))_dw = 0) is exactly zero.
#include <Eigen/Dense>
#include <vector>

#include "cf/rollout/kernel.hpp"

namespace cf::influence {

/// Quantiles of a sample (min, 10 %, median, 90 %, max), linear interpolation; all 0 when empty.
struct Quantiles {
  double min = 0, p10 = 0, median = 0, p90 = 0, max = 0;
  long count = 0;
};
Quantiles quantiles(std::vector<double> v);

/// One-layer constant of layer l: J1 [n, n] block norms d h_d(l+1) / d h_w(l), A [n, n] the
/// head-mean attention of layer l (row-stochastic, lower triangular).
struct OneLayerCheck {
  double c1 = 0;                  ///< C_1(l)
  long outside_mask_pairs = 0;    ///< pairs w <= d with (I + A)_dw = 0
  long outside_mask_nonzero = 0;  ///< of those, blocks that are not exactly zero (a bug if > 0)
  double outside_mask_max = 0;    ///< largest such block norm
};
OneLayerCheck one_layer_check(const Eigen::MatrixXd& J1, const rollout::RowMatrix& A);

/// The span check. J [n, n] block norms between h(L) and h(L+r); attention: A(L) .. A(L+r-1)
/// (oldest first); c1: C_1(l) of the same layers (from one_layer_check). tolerance: relative slack
/// for C* <= max C_1 (float Jacobians: 1e-4).
struct BoundCheck {
  double c_star = 0;              ///< smallest C with J_ds <= C^r B_ds on every pair s <= d
  double c1_max = 0;              ///< max C_1(l) over the span
  bool c_star_within_c1 = false;  ///< C* <= c1_max (1 + tolerance)
  long zero_bound_nonzero_j = 0;  ///< pairs with B_ds = 0 but J_ds > 0 (a bug if > 0)
  double spearman_offdiag = 0;    ///< Spearman(J_ds, B_ds) over pairs s < d (NaN: < 2 pairs or a constant side)
  double spearman_diag = 0;       ///< Spearman(J_dd, B_dd) over d (NaN likewise)
  Quantiles tightness;            ///< J_ds / (C*^r B_ds) over pairs s <= d with B_ds > 0
  double gate_share = 0;          ///< share of pairs s < d where the gate term exceeds the self term
  long pairs = 0;                 ///< pairs s <= d
};
BoundCheck check_bound(const Eigen::MatrixXd& J, const std::vector<rollout::RowMatrix>& attention,
                       const std::vector<double>& c1, double tolerance = 1e-4);

}  // namespace cf::influence
