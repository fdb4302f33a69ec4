#include <cmath>

#include "cf/core/error.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

namespace {
void check_dense(const Eigen::VectorXd& alpha, long n) {
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  require(n <= kDenseMaxN, "rollout: the dense path needs n <= ", kDenseMaxN, " (n^2 memory, L n^2 time), got n = ",
          n, "; use a structured (ALiBi) kernel for larger n");
  validate_alpha(alpha, static_cast<int>(alpha.size()));
}
}  // namespace

Eigen::VectorXd rollout_last_row_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n) {
  check_dense(alpha, n);
  Eigen::RowVectorXd v = Eigen::RowVectorXd::Zero(n);
  v(n - 1) = 1.0;
  for (long l = alpha.size() - 1; l >= 0; --l) {
    const RowMatrix A = kernel(static_cast<int>(l));
    require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
            ", expected n x n with n = ", n);
    v = (1.0 - alpha(l)) * v + alpha(l) * (v * A);
  }
  return v.transpose();
}

RowMatrix rollout_matrix_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n) {
  check_dense(alpha, n);
  RowMatrix P = RowMatrix::Identity(n, n);
  for (long l = 0; l < alpha.size(); ++l) {  // P <- R(l) P, newest layer on the left
    const RowMatrix A = kernel(static_cast<int>(l));
    require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
            ", expected n x n with n = ", n);
    P = ((1.0 - alpha(l)) * P + alpha(l) * (A * P)).eval();
  }
  return P;
}

Eigen::VectorXd rollout_last_row_alibi_dense(const AlibiModel& model, const Eigen::VectorXd& alpha, long n) {
  validate_model(model);
  return rollout_last_row_dense([&](int l) { return alibi_kernel_dense(model, l, n); }, alpha, n);
}

DistributionSummary summarize(const Eigen::VectorXd& p) {
  const long n = p.size();
  require(n >= 1, "summary: empty distribution");
  DistributionSummary s;
  s.first = p(0);
  s.last = p(n - 1);
  Eigen::Index am = 0;
  s.min = p.minCoeff(&am);
  s.argmin = am;
  const long k = (n + 9) / 10;
  s.primacy = p.head(k).sum();
  s.recency = p.tail(k).sum();
  return s;
}

}  // namespace cf::rollout
