#pragma once
// Infinite-depth dichotomy (Position bias (Herasimchyk et al.), Lemma 5.3 and Theorem 5.4; docs/spec.md section 2),
// evaluated in high precision (Boost.Multiprecision, 50 decimal digits, exponent range far beyond double) so depths up
// to 10^6 layers can be followed where doubles underflow.
#include <Eigen/Dense>
#include <functional>
#include <string>

#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

/// Masses of one row i of P(L) = R(L) ... R(1) with R(l) = (1 - alpha_l) I + alpha_l K (one
/// kernel K at every layer), beside the bounds of Theorem 5.4. Values are decimal strings
/// (scientific) plus their base-10 logarithms as doubles (finite even where the value underflows
/// a double).
struct DichotomyResult {
  long depth = 0;             ///< L
  long row = 0;               ///< i
  double eps = 0;             ///< smallest admissible weight of K (Lemma 5.3's epsilon)
  double sum_alpha = 0;       ///< sum_{l<=L} alpha_l
  std::string self_mass;      ///< P(L)[i,i]
  std::string bound_i;        ///< prod_l (1 - (1 - eps) alpha_l)          (Theorem 5.4 (i))
  std::string off_zero_mass;  ///< 1 - P(L)[i,0] = sum_{j>0} P(L)[i,j]
  std::string bound_ii;       ///< exp(-eps sum_l alpha_l)                 (Theorem 5.4 (ii))
  double log10_self_mass = 0, log10_bound_i = 0, log10_off_zero = 0, log10_bound_ii = 0;
  bool holds_i = false;   ///< self_mass >= bound_i
  bool holds_ii = false;  ///< off_zero_mass <= bound_ii
};

/// Smallest strictly positive entry of K on its causal support (the eps of Lemma 5.3).
double admissible_min(const RowMatrix& K);

/// Follow row `row` of P(L) for L = depth layers in 50-digit arithmetic (O(depth n^2)).
/// K: n x n causal row-stochastic (K[0,0] = 1 makes token 0 absorbing); alpha(l), l = 1..depth,
/// must return values in [0, 1]; eps <= 0 means admissible_min(K). depth >= 1, 0 <= row < n.
DichotomyResult dichotomy(const RowMatrix& K, const std::function<double(long)>& alpha, long depth, long row,
                          double eps = 0);

}  // namespace cf::rollout
