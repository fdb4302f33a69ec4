#pragma once
// Partial spectra of large interaction matrices with Spectra (Krylov-Schur / implicitly restarted
// Arnoldi), with a dense Eigen fallback where Spectra cannot apply (docs/spec.md §3: "Large
// sequence-level matrices use Spectra's partial solvers, with a dense Eigen fallback").
//
// Operators (STYLE habit 4) are any type with
//   Index rows() const;                                   // square: rows() == cols()
//   void apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) const;            // y = Op x
//   void apply_transpose(const Eigen::VectorXd& x, Eigen::VectorXd& y) const;  // y = Op^T x
// so an n x n matrix never has to be materialised (DenseOperator, FactoredOperator,
// SymmetricPart, SkewPart, DiagonalShift below). Spectra 1.0 requires nev < ncv <= n (symmetric)
// and nev + 2 < ncv <= n (general): outside those limits, or for n <= dense_max_n, the operator
// is materialised column by column and solved densely.
#include <Spectra/GenEigsSolver.h>
#include <Spectra/SymEigsSolver.h>

#include <Eigen/Dense>
#include <algorithm>
#include <string>

#include "cf/core/error.hpp"
#include "cf/spectral/decomposition.hpp"

namespace cf::spectral {

/// An explicit n x n matrix as an operator (keeps a reference: M must outlive it).
struct DenseOperator {
  const Eigen::MatrixXd& M;
  Index rows() const { return M.rows(); }
  void apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) const { y.noalias() = M * x; }
  void apply_transpose(const Eigen::VectorXd& x, Eigen::VectorXd& y) const { y.noalias() = M.transpose() * x; }
};

/// M = scale * A B^T (A, B: m x r) applied in O(m r) without forming M.
struct FactoredOperator {
  const Eigen::MatrixXd& A;
  const Eigen::MatrixXd& B;
  double scale = 1.0;
  Index rows() const { return A.rows(); }
  void apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) const { y.noalias() = scale * (A * (B.transpose() * x)); }
  void apply_transpose(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    y.noalias() = scale * (B * (A.transpose() * x));
  }
};

/// F = (Op + Op^T) / 2 of an operator (symmetric).
template <class Op>
struct SymmetricPart {
  const Op& op;
  Index rows() const { return op.rows(); }
  void apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    Eigen::VectorXd t(x.size());
    op.apply(x, y);
    op.apply_transpose(x, t);
    y = 0.5 * (y + t);
  }
  void apply_transpose(const Eigen::VectorXd& x, Eigen::VectorXd& y) const { apply(x, y); }
};

/// R = (Op - Op^T) / 2 of an operator (skew-symmetric).
template <class Op>
struct SkewPart {
  const Op& op;
  Index rows() const { return op.rows(); }
  void apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    Eigen::VectorXd t(x.size());
    op.apply(x, y);
    op.apply_transpose(x, t);
    y = 0.5 * (y - t);
  }
  void apply_transpose(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    apply(x, y);
    y = -y;
  }
};

/// Op - diag(d): the S–D interaction S - D of Routing/filtering (Jamil & Kapadia) §4 when Op is the skew routing part.
template <class Op>
struct DiagonalShift {
  const Op& op;
  const Eigen::VectorXd& d;
  Index rows() const { return op.rows(); }
  void apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    op.apply(x, y);
    y -= d.cwiseProduct(x);
  }
  void apply_transpose(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    op.apply_transpose(x, y);
    y -= d.cwiseProduct(x);
  }
};

/// Settings of the partial solvers.
struct PartialOptions {
  Index ncv = 0;  ///< Krylov subspace size; 0 = min(n, max(2 nev + 1, 20))
  Index max_iter = 1000;
  double tol = 1e-10;      ///< Spectra's relative convergence tolerance
  Index dense_max_n = 64;  ///< n <= this: always dense (Krylov gains nothing)
  /// If Spectra does not converge and n <= this, fall back to the dense solver.
  Index dense_fallback_max_n = 4096;
};

/// Outcome of a partial solve: the values plus a status (STYLE habit 5: numerical outcomes are
/// status fields, not exceptions).
struct PartialResult {
  Eigen::VectorXd values;  ///< descending
  bool converged = false;  ///< true for dense results and converged Spectra runs
  std::string method;      ///< "spectra", "dense", "dense (spectra did not converge)", "spectra (not converged)"
  Index n_converged = 0;
};

/// Materialise an operator as an n x n matrix (n applications to unit vectors).
template <class Op>
Eigen::MatrixXd materialise(const Op& op) {
  const Index n = op.rows();
  Eigen::MatrixXd M(n, n);
  Eigen::VectorXd e = Eigen::VectorXd::Zero(n), y(n);
  for (Index j = 0; j < n; ++j) {
    e[j] = 1;
    op.apply(e, y);
    M.col(j) = y;
    e[j] = 0;
  }
  return M;
}

namespace detail {

// Spectra's operator interface (Scalar, rows, cols, perform_op) on top of ours.
template <class Op>
struct SpectraApply {
  using Scalar = double;
  const Op& op;
  Index rows() const { return op.rows(); }
  Index cols() const { return op.rows(); }
  void perform_op(const double* x_in, double* y_out) const {
    Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(x_in, rows()), y(rows());
    op.apply(x, y);
    Eigen::Map<Eigen::VectorXd>(y_out, rows()) = y;
  }
};

// x -> Op^T Op x (symmetric positive semi-definite Gram operator).
template <class Op>
struct SpectraGram {
  using Scalar = double;
  const Op& op;
  Index rows() const { return op.rows(); }
  Index cols() const { return op.rows(); }
  void perform_op(const double* x_in, double* y_out) const {
    Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(x_in, rows()), t(rows()), y(rows());
    op.apply(x, t);
    op.apply_transpose(t, y);
    Eigen::Map<Eigen::VectorXd>(y_out, rows()) = y;
  }
};

inline Index default_ncv(Index n, Index nev, Index requested, Index min_gap) {
  Index ncv = requested > 0 ? requested : std::max<Index>(2 * nev + 1, 20);
  ncv = std::max(ncv, nev + min_gap);
  return std::min(ncv, n);
}

inline Eigen::VectorXd top_desc(Eigen::VectorXd v, Index k) {
  std::sort(v.data(), v.data() + v.size(), [](double a, double b) { return a > b; });
  return v.head(std::min<Index>(k, v.size()));
}

// The Spectra path every partial_* shares: run `eigs` with `rule`; if it converged, the values are
// take(eigs); else the dense computation where n allows it (dense_fallback_max_n), else the result
// says "spectra (not converged)" and holds no values.
template <class Solver, class Take, class Dense>
void run_spectra(Solver& eigs, Spectra::SortRule rule, Index n, const PartialOptions& opt, PartialResult& r, Take take,
                 Dense dense) {
  eigs.init();
  r.n_converged = eigs.compute(rule, opt.max_iter, opt.tol);
  if (eigs.info() == Spectra::CompInfo::Successful) {
    r.values = take(eigs);
    r.converged = true;
    r.method = "spectra";
  } else if (n <= opt.dense_fallback_max_n) {
    dense("dense (spectra did not converge)");
  } else {
    r.method = "spectra (not converged)";
  }
}

}  // namespace detail

/// The nev largest singular values (descending) of a symmetric operator (= |eigenvalues| of
/// largest magnitude), e.g. SymmetricPart<...> for the filtering part F.
/// nev >= 1 and nev <= n; Spectra (SymEigsSolver, LargestMagn) when nev < n - 1 and n > dense_max_n.
template <class Op>
PartialResult partial_singular_values_symmetric(const Op& op, Index nev, const PartialOptions& opt = {}) {
  const Index n = op.rows();
  require(nev >= 1 && nev <= n, "nev must satisfy 1 <= nev <= n (got nev = ", nev, ", n = ", n, ")");
  PartialResult r;
  auto dense = [&](const char* how) {
    r.values = detail::top_desc(singular_values_symmetric(materialise(op)), nev);
    r.converged = true;
    r.method = how;
    r.n_converged = r.values.size();
  };
  if (n <= opt.dense_max_n || nev >= n - 1) {
    dense("dense");
    return r;
  }
  detail::SpectraApply<Op> sop{op};
  Spectra::SymEigsSolver<detail::SpectraApply<Op>> eigs(sop, nev, detail::default_ncv(n, nev, opt.ncv, 1));
  detail::run_spectra(
      eigs, Spectra::SortRule::LargestMagn, n, opt, r,
      [&](auto& e) { return detail::top_desc(e.eigenvalues().cwiseAbs(), nev); }, dense);
  return r;
}

/// The nev largest singular values (descending) of a general square operator, from the largest
/// eigenvalues of the Gram operator Op^T Op (Spectra SymEigsSolver, LargestAlge), sigma = sqrt.
/// Suits the leading values (relative accuracy ~ tol); use the dense path for values near zero.
template <class Op>
PartialResult partial_singular_values(const Op& op, Index nev, const PartialOptions& opt = {}) {
  const Index n = op.rows();
  require(nev >= 1 && nev <= n, "nev must satisfy 1 <= nev <= n (got nev = ", nev, ", n = ", n, ")");
  PartialResult r;
  auto dense = [&](const char* how) {
    Eigen::BDCSVD<Eigen::MatrixXd> svd(materialise(op));
    r.values = detail::top_desc(svd.singularValues(), nev);
    r.converged = true;
    r.method = how;
    r.n_converged = r.values.size();
  };
  if (n <= opt.dense_max_n || nev >= n - 1) {
    dense("dense");
    return r;
  }
  detail::SpectraGram<Op> gop{op};
  Spectra::SymEigsSolver<detail::SpectraGram<Op>> eigs(gop, nev, detail::default_ncv(n, nev, opt.ncv, 1));
  detail::run_spectra(
      eigs, Spectra::SortRule::LargestAlge, n, opt, r,
      [&](auto& e) { return detail::top_desc(e.eigenvalues().cwiseMax(0.0).cwiseSqrt(), nev); }, dense);
  return r;
}

/// max_i Re lambda_i of a general square operator (the instability measure of Routing/filtering (Jamil & Kapadia) §3).
/// Spectra GenEigsSolver (LargestReal, nev = min(6, n - 3)) when n > dense_max_n, else
/// Eigen::EigenSolver on the materialised operator. values holds one entry: the maximum.
template <class Op>
PartialResult partial_max_real_eigenvalue(const Op& op, const PartialOptions& opt = {}) {
  const Index n = op.rows();
  require(n >= 1, "operator must be non-empty");
  PartialResult r;
  auto dense = [&](const char* how) {
    r.values = Eigen::VectorXd::Constant(1, max_real_eigenvalue_dense(materialise(op)));
    r.converged = true;
    r.method = how;
    r.n_converged = 1;
  };
  const Index nev = std::min<Index>(6, n - 3);
  if (n <= opt.dense_max_n || nev < 1) {
    dense("dense");
    return r;
  }
  detail::SpectraApply<Op> sop{op};
  Spectra::GenEigsSolver<detail::SpectraApply<Op>> eigs(sop, nev, detail::default_ncv(n, nev, opt.ncv, 3));
  detail::run_spectra(
      eigs, Spectra::SortRule::LargestReal, n, opt, r,
      [&](auto& e) { return Eigen::VectorXd::Constant(1, e.eigenvalues().real().maxCoeff()); }, dense);
  return r;
}

}  // namespace cf::spectral
