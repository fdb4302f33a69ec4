#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"
#include "cf/rollout/detail/flush_denormals.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

namespace {
void check_dense(const Eigen::VectorXd& alpha, long n) {
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  require(n <= kDenseMaxN, "rollout: the dense path needs n <= ", kDenseMaxN, " (n^2 memory, L n^2 time), got n = ", n,
          "; use a structured (ALiBi) kernel for larger n");
  validate_alpha(alpha, static_cast<int>(alpha.size()));
}
}  // namespace

namespace {
// v <- v R(l) for l = L..1; get(l) returns a reference to Abar(l+1) valid until the next call.
template <class Get>
Eigen::VectorXd last_row_impl(Get&& get, const Eigen::VectorXd& alpha, long n) {
  check_dense(alpha, n);
  const detail::FlushDenormals ftz;
  Eigen::RowVectorXd v = Eigen::RowVectorXd::Zero(n), u(n);
  v(n - 1) = 1.0;
  Progress progress("dense rollout: layers", alpha.size());  // stderr, terminals only
  for (long l = alpha.size() - 1; l >= 0; --l, progress.advance()) {
    if (alpha(l) == 0.0) continue;
    const RowMatrix& A = get(static_cast<int>(l));
    require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
            ", expected n x n with n = ", n);
    u.noalias() = v * A;
    v = (1.0 - alpha(l)) * v + alpha(l) * u;
  }
  return v.transpose();
}
}  // namespace

Eigen::VectorXd rollout_last_row_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n) {
  RowMatrix buf;
  return last_row_impl([&](int l) -> const RowMatrix& { return buf = kernel(l); }, alpha, n);
}

Eigen::VectorXd rollout_last_row_dense(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha) {
  require(!kernels.empty(), "rollout: at least one kernel required");
  require(kernels.size() == 1 || static_cast<long>(kernels.size()) == alpha.size(), "rollout: ", kernels.size(),
          " kernels for L = ", alpha.size(), " layers (need 1 or L)");
  return last_row_impl([&](int l) -> const RowMatrix& { return kernels.size() == 1 ? kernels[0] : kernels[l]; }, alpha,
                       kernels[0].rows());
}

RowMatrix rollout_matrix_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n) {
  check_dense(alpha, n);
  const detail::FlushDenormals ftz;
  RowMatrix P = RowMatrix::Identity(n, n);
  Progress progress("rollout matrix: layers", alpha.size());     // stderr, terminals only
  for (long l = 0; l < alpha.size(); ++l, progress.advance()) {  // P <- R(l) P, newest layer on the left
    const RowMatrix A = kernel(static_cast<int>(l));
    require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
            ", expected n x n with n = ", n);
    P = ((1.0 - alpha(l)) * P + alpha(l) * (A * P)).eval();
  }
  return P;
}

Eigen::VectorXd rollout_last_row_alibi_dense(const AlibiModel& model, const Eigen::VectorXd& alpha, long n) {
  validate_model(model);
  RowMatrix buf;
  return last_row_impl(
      [&](int l) -> const RowMatrix& {
        alibi_kernel_dense_into(model, l, n, buf);
        return buf;
      },
      alpha, n);
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
