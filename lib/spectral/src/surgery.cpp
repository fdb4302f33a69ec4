#include "cf/spectral/surgery.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cf/core/error.hpp"

namespace cf::spectral {

Component parse_component(const std::string& name) {
  if (name == "routing") return Component::Routing;
  if (name == "filtering") return Component::Filtering;
  if (name == "both") return Component::Both;
  throw InvalidArgument(str("component must be routing, filtering or both (got '", name, "')"));
}

std::string component_name(Component c) {
  switch (c) {
    case Component::Routing: return "routing";
    case Component::Filtering: return "filtering";
    case Component::Both: return "both";
  }
  return "?";
}

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

Eigen::MatrixXd apply_surgery(const Eigen::MatrixXd& M, const SurgerySpec& spec) {
  require(M.rows() == M.cols() && M.rows() >= 1, "surgery needs a square non-empty matrix (got ", M.rows(), " x ",
          M.cols(), ")");
  if (spec.rank < 0 || spec.rank >= M.rows()) return M;
  const Parts p = split(M);
  const bool cut_r = spec.component != Component::Filtering, cut_f = spec.component != Component::Routing;
  return (cut_f ? truncate_rank(p.F, spec.rank) : p.F) + (cut_r ? truncate_rank(p.R, spec.rank) : p.R);
}

Eigen::MatrixXd linearize_standard(const Eigen::MatrixXd& M, ScalarFiltering mode) {
  require(M.rows() == M.cols() && M.rows() >= 1, "linearize needs a square non-empty matrix (got ", M.rows(), " x ",
          M.cols(), ")");
  const Parts p = split(M);
  const Index n = M.rows();
  const double s = mode == ScalarFiltering::TraceOverN ? p.F.trace() / double(n) : p.F.diagonal().mean();
  Eigen::MatrixXd out = truncate_rank(p.R, std::min<Index>(2, n));
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
          "S must be n x n and d must have n >= 1 entries (S is ", S.rows(), " x ", S.cols(), ", d has ", d.size(), ")");
  Eigen::MatrixXd out = truncate_rank(S, std::min<Index>(2, S.rows()));
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
