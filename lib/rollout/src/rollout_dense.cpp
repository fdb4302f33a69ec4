#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"
#include "cf/rollout/detail/flush_denormals.hpp"
#include "cf/rollout/operator.hpp"
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

// out = v A for an n x n kernel A of layer l (v, out: n entries, as row vectors).
void dense_apply(const RowMatrix& A, int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) {
  const long n = v.size();
  require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
          ", expected n x n with n = ", n);
  out.resize(n);
  Eigen::Map<Eigen::RowVectorXd>(out.data(), n).noalias() = Eigen::Map<const Eigen::RowVectorXd>(v.data(), n) * A;
}
}  // namespace

void StoredKernels::check(const Eigen::VectorXd& alpha) const {
  require(!k_.empty(), "rollout: at least one kernel required");
  require(k_.size() == 1 || static_cast<long>(k_.size()) == alpha.size(), "rollout: ", k_.size(),
          " kernels for L = ", alpha.size(), " layers (need 1 or L)");
  check_dense(alpha, size());
}

long StoredKernels::size() const { return k_.empty() ? 0 : k_[0].rows(); }

void StoredKernels::apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) {
  dense_apply(k_.size() == 1 ? k_[0] : k_[static_cast<std::size_t>(l)], l, v, out);
}

void GeneratedKernels::check(const Eigen::VectorXd& alpha) const { check_dense(alpha, n_); }

void GeneratedKernels::apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) {
  buf_ = f_(l);
  dense_apply(buf_, l, v, out);
}

void AlibiDenseKernels::check(const Eigen::VectorXd& alpha) const {
  validate_model(m_);
  check_dense(alpha, n_);
}

void AlibiDenseKernels::apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) {
  alibi_kernel_dense_into(m_, l, n_, buf_);
  dense_apply(buf_, l, v, out);
}

Eigen::VectorXd rollout_last_row_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n) {
  GeneratedKernels op(kernel, n);
  return rollout_last_row(op, alpha);
}

Eigen::VectorXd rollout_last_row_dense(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha) {
  StoredKernels op(kernels);
  return rollout_last_row(op, alpha);
}

RowMatrix rollout_matrix_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n,
                               const ProductBackend* backend) {
  check_dense(alpha, n);
  if (backend) {
    std::vector<LeftStep> steps;
    for (long l = 0; l < alpha.size(); ++l) steps.push_back({1.0 - alpha(l), alpha(l)});
    const auto checked = [&](int l) {
      RowMatrix A = kernel(l);
      require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
              ", expected n x n with n = ", n);
      return A;
    };
    return backend->left_product(checked, steps, RowMatrix::Identity(n, n));
  }
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
  AlibiDenseKernels op(model, n);
  return rollout_last_row(op, alpha);
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
