#pragma once
// Seeded standard-normal test matrices shared by the spectral tests (same seed, same matrix).
#include <Eigen/Dense>
#include <random>

namespace cf::spectral::test {

inline Eigen::MatrixXd randn(Eigen::Index r, Eigen::Index c, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> N(0, 1);
  Eigen::MatrixXd X(r, c);
  for (Eigen::Index i = 0; i < X.size(); ++i) X.data()[i] = N(g);
  return X;
}

}  // namespace cf::spectral::test
