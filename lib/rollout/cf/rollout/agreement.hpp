#pragma once
// Agreement of a rollout distribution with a measured influence profile (Position bias (Herasimchyk et al.), Eq. 6 and
// section 5; docs/spec.md section 2): Spearman rank correlation and W1 / (n - 1).
#include <Eigen/Dense>
#include <string>

namespace cf::rollout {

/// Spearman rank correlation of x and y (equal length n >= 2), ties given their average rank.
/// Returns 0 when either vector is constant.
double spearman(const Eigen::VectorXd& x, const Eigen::VectorXd& y);

/// Normalised Wasserstein-1 distance between two distributions on positions 0..n-1:
/// sum_k |CDF_a(k) - CDF_b(k)| / (n - 1), in [0, 1]. Both are normalised to sum 1 first.
double wasserstein1_normalised(const Eigen::VectorXd& a, const Eigen::VectorXd& b);

/// Read an influence profile: n non-negative numbers (whitespace/comma separated, '#' comments,
/// or one "position,value" pair per line), normalised to sum 1. Throws cf::InvalidArgument.
Eigen::VectorXd read_influence_file(const std::string& path);

}  // namespace cf::rollout
