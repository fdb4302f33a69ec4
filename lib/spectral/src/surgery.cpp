#include "cf/spectral/surgery.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cf/core/error.hpp"

namespace cf::spectral {

Component parse_component(const std::string& name) {
  if (const auto c = kComponents.find(name)) return *c;
  throw InvalidArgument(str("component must be routing, filtering or both (got '", name, "')"));
}

std::string component_name(Component c) { return std::string(kComponents.name(c)); }

Eigen::MatrixXd truncate_rank(const Eigen::MatrixXd& X, Index k) {
  require(k >= 0, "rank k must be >= 0 (got ", k, ")");
  if (k >= std::min(X.rows(), X.cols())) return X;
  if (k == 0) return Eigen::MatrixXd::Zero(X.rows(), X.cols());
  Eigen::BDCSVD<Eigen::MatrixXd> svd(X, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::VectorXd& s = svd.singularValues();
  // Numerical rank already <= k (sigma_k at rounding level): nothing to cut, so truncating a
  // low-rank part at its own rank stays the exact identity.
  if (s[k] <= 4 * std::numeric_limits<double>::epsilon() * double(std::max(X.rows(), X.cols())) * s[0]) return X;
  return svd.matrixU().leftCols(k) * s.head(k).asDiagonal() * svd.matrixV().leftCols(k).transpose();
}

namespace {
// Top eigenvector of the Gram matrix G = S^T S = -S^2 of a skew S by Lanczos with full
// reorthogonalisation and no restarts (k <= n steps, exact at k = n). Spectra's restarted
// SymEigsSolver was tried first and returns garbage (Ritz values ~1e82) when the Krylov space
// becomes invariant, which happens for every skew matrix of rank < ncv (the exact-rank-2 case,
// small-d_head heads): here an invariant space just ends the iteration with exact Ritz pairs.
// Only GEMVs touch S (Eigen never spawns threads for them, which matters inside the trainer's
// serial score hook). Returns false if it did not find a usable vector.
bool skew_top_right_vector(const Eigen::MatrixXd& S, Eigen::VectorXd& v_out) {
  const Index n = S.rows();
  const double g_norm = S.squaredNorm();  // ||G||_2 = sigma_1^2 <= ||S||_F^2
  Eigen::MatrixXd V(n, n);
  Eigen::VectorXd alpha(n), beta(n), w(n), t(n), h(n);
  // Deterministic start vector with no structure shared with any particular S.
  for (Index i = 0; i < n; ++i)
    V(i, 0) = double((std::uint64_t(i + 1) * 2654435761ULL) % 4294967296ULL) / 4294967296.0 - 0.5;
  V.col(0).normalize();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es;
  for (Index k = 0; k < n; ++k) {
    t.noalias() = S * V.col(k);
    w.noalias() = -(S * t);
    alpha[k] = V.col(k).dot(w);
    // Full reorthogonalisation, twice (Kahan's "twice is enough"): no ghost copies of sigma_1^2.
    for (int pass = 0; pass < 2; ++pass) {
      h.head(k + 1).noalias() = V.leftCols(k + 1).transpose() * w;
      w.noalias() -= V.leftCols(k + 1) * h.head(k + 1);
    }
    beta[k] = w.norm();
    const bool invariant = beta[k] <= 1e-14 * g_norm;
    // Ritz pair every 4 steps (the tridiagonal eigensolve is O(k^2)), at an invariant space and at k = n - 1.
    if (invariant || k == n - 1 || k % 4 == 3) {
      es.computeFromTridiagonal(alpha.head(k + 1), beta.head(k), Eigen::ComputeEigenvectors);
      const Index top = k;  // eigenvalues ascending
      const double theta = es.eigenvalues()[top];
      const double resid = beta[k] * std::abs(es.eigenvectors()(k, top));
      if (invariant || k == n - 1 || resid <= 1e-13 * theta) {
        // theta ~ 0: the start vector missed the top plane (it lay in an invariant subspace of
        // small singular values); let the caller take the dense route.
        if (!(theta > 1e-12 * g_norm)) return false;
        v_out.noalias() = V.leftCols(k + 1) * es.eigenvectors().col(top);
        v_out.normalize();
        return true;
      }
    }
    V.col(k + 1) = w / beta[k];
  }
  return false;
}
}  // namespace

Eigen::MatrixXd truncate_skew_top_pair(const Eigen::MatrixXd& S) {
  require(S.rows() == S.cols(), "skew matrix must be square (got ", S.rows(), " x ", S.cols(), ")");
  const Index n = S.rows();
  if (n <= 2) return S;  // rank <= 2 already
  // The dense route, made exactly skew (rounding in the SVD factors breaks that by ~eps).
  auto dense = [&] {
    const Eigen::MatrixXd X = truncate_rank(S, 2);
    return Eigen::MatrixXd(0.5 * (X - X.transpose()));
  };
  // Below ~32 the dense SVD is as cheap as a Krylov run.
  if (n <= 32) return dense();
  if (!(S.array() != 0.0).any()) return Eigen::MatrixXd::Zero(n, n);
  Eigen::VectorXd v(n);
  if (!skew_top_right_vector(S, v)) return dense();
  const Eigen::VectorXd w = S * v;  // sigma_1 u, orthogonal to v because v^T S v = 0
  const Eigen::MatrixXd A = w * v.transpose();
  return A - A.transpose();  // formed this way it is exactly skew
}

Eigen::MatrixXd apply_surgery(const Eigen::MatrixXd& M, const SurgerySpec& spec) {
  require(M.rows() == M.cols() && M.rows() >= 1, "surgery needs a square non-empty matrix (got ", M.rows(), " x ",
          M.cols(), ")");
  if (spec.rank < 0 || spec.rank >= M.rows()) return M;
  const Parts p = split(M);
  const bool cut_r = spec.component != Component::Filtering, cut_f = spec.component != Component::Routing;
  require(!cut_r || spec.rank % 2 == 0, "routing rank k = ", spec.rank,
          " is odd: the singular values of the skew routing part come in equal pairs (one per rotation plane), "
          "so an odd k would keep half a plane; give an even k");
  return (cut_f ? truncate_rank(p.F, spec.rank) : p.F) + (cut_r ? truncate_rank(p.R, spec.rank) : p.R);
}

Eigen::MatrixXd linearize_standard(const Eigen::MatrixXd& M, ScalarFiltering mode) {
  require(M.rows() == M.cols() && M.rows() >= 1, "linearize needs a square non-empty matrix (got ", M.rows(), " x ",
          M.cols(), ")");
  const Index n = M.rows();
  // diag F = diag M, so the scalar needs no F.
  const double s = mode == ScalarFiltering::TraceOverN ? M.trace() / double(n) : M.diagonal().mean();
  Eigen::MatrixXd out = truncate_skew_top_pair(0.5 * (M - M.transpose()));
  out.diagonal().array() += s;
  return out;
}

Eigen::MatrixXd sd_interaction(const Eigen::MatrixXd& S, const Eigen::VectorXd& d) {
  require(S.rows() == S.cols() && S.rows() == d.size(), "S must be n x n and d must have n entries (S is ", S.rows(),
          " x ", S.cols(), ", d has ", d.size(), ")");
  Eigen::MatrixXd out = S;
  out.diagonal() -= d;
  return out;
}

Eigen::MatrixXd linearize_sd(const Eigen::MatrixXd& S, const Eigen::VectorXd& d) {
  require(S.rows() == S.cols() && S.rows() == d.size() && S.rows() >= 1,
          "S must be n x n and d must have n >= 1 entries (S is ", S.rows(), " x ", S.cols(), ", d has ", d.size(),
          ")");
  Eigen::MatrixXd out = truncate_skew_top_pair(S);
  out.diagonal().array() -= d.mean();
  return out;
}

Eigen::MatrixXd linear_attention_elu1(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V) {
  require(Q.rows() == K.rows() && K.rows() == V.rows() && Q.cols() == K.cols(),
          "linear attention needs Q, K (n x d_k) and V (n x d_v) with equal n and equal d_k (got Q ", Q.rows(), " x ",
          Q.cols(), ", K ", K.rows(), " x ", K.cols(), ", V ", V.rows(), " x ", V.cols(), ")");
  auto phi = [](const Eigen::MatrixXd& X) {
    return X.unaryExpr([](double x) { return x > 0 ? x + 1.0 : std::exp(x); }).eval();
  };
  const Eigen::MatrixXd PQ = phi(Q), PK = phi(K);
  const Index n = Q.rows();
  Eigen::MatrixXd S = Eigen::MatrixXd::Zero(Q.cols(), V.cols()), out(n, V.cols());
  Eigen::VectorXd z = Eigen::VectorXd::Zero(Q.cols());
  for (Index i = 0; i < n; ++i) {
    S.noalias() += PK.row(i).transpose() * V.row(i);
    z += PK.row(i).transpose();
    out.row(i) = (PQ.row(i) * S) / PQ.row(i).dot(z);
  }
  return out;
}

Index max_component_rank(Index n, Index d_k) {
  require(n >= 1 && d_k >= 1, "n and d_k must be >= 1 (got n = ", n, ", d_k = ", d_k, ")");
  return std::min(n, 2 * d_k);
}

}  // namespace cf::spectral
