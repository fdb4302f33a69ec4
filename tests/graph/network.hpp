#pragma once
// A tiny random "transformer-like" stack whose only cross-token operation is masked mixing:
// h_t <- tanh(A h_t + Σ_{(s,t) ∈ E} w_ts B h_s). It is the independent computation behind the
// Lemma 1 / Theorem 2 / Prop. 3 tests: which inputs can change h_t is observed numerically.
#include <Eigen/Dense>
#include <random>
#include <vector>

#include "cf/graph/schedule.hpp"

namespace cf::graph::test {

class RandomStack {
 public:
  RandomStack(const Schedule& s, Index n, int dim, std::uint64_t seed) : sched_(s), n_(n), dim_(dim) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> N(0.0, 1.0);
    std::uniform_real_distribution<double> U(0.2, 1.0);
    for (size_t l = 0; l < s.layers.size(); ++l) {
      A_.push_back(Eigen::MatrixXd::NullaryExpr(dim, dim, [&] { return N(rng) / dim; }));
      B_.push_back(Eigen::MatrixXd::NullaryExpr(dim, dim, [&] { return N(rng) / dim; }));
      W_.push_back(Eigen::MatrixXd::NullaryExpr(n, n, [&] { return U(rng); }));
    }
  }
  /// Hidden states after all layers; x is dim x n (column t = token t).
  Eigen::MatrixXd forward(const Eigen::MatrixXd& x) const {
    Eigen::MatrixXd h = x;
    for (size_t l = 0; l < sched_.layers.size(); ++l) {
      const Mask m{sched_.layers[l], n_};
      Eigen::MatrixXd next(dim_, n_);
      for (Index t = 0; t < n_; ++t) {
        Eigen::VectorXd acc = A_[l] * h.col(t);
        for (Index s = 0; s <= t; ++s)
          if (has_edge_brute_force(m, s, t)) acc += W_[l](t, s) * (B_[l] * h.col(s));
        next.col(t) = acc.array().tanh();
      }
      h = next;
    }
    return h;
  }

 private:
  Schedule sched_;
  Index n_;
  int dim_;
  std::vector<Eigen::MatrixXd> A_, B_, W_;
};

}  // namespace cf::graph::test
