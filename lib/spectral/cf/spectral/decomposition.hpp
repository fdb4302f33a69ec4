#pragma once
// Routing/filtering decomposition of an attention interaction matrix (Routing/filtering (Jamil & Kapadia) §2,
// docs/spec.md §3).
//
// Notation (docs/spec.md §3): M is a head's interaction matrix, either the weight kernel W = W_Q W_K^T
// (d x d, rank <= d_k) or the sequence-level score matrix Q K^T / sqrt(d_k) (n x n, UNMASKED).
// M = F + R with F = (M + M^T)/2 (filtering, symmetric) and R = (M - M^T)/2 (routing, skew).
// rho = ||R||_F / ||F||_F; erank = exp(-sum p_i log p_i) with p_i = sigma_i / sum sigma.
#include <Eigen/Dense>
#include <string>

namespace cf::spectral {

using Index = Eigen::Index;

/// The two parts of M = F + R. F is symmetric (filtering), R skew-symmetric (routing).
struct Parts {
  Eigen::MatrixXd F, R;
};

/// Split a square matrix M (n x n, n >= 1) into F = (M + M^T)/2 and R = (M - M^T)/2
/// (Routing/filtering (Jamil & Kapadia) §2). Throws cf::InvalidArgument unless M is square and non-empty.
Parts split(const Eigen::MatrixXd& M);

/// Entropy effective rank exp(-sum_i p_i log p_i), p_i = sigma_i / sum_j sigma_j (Routing/filtering (Jamil & Kapadia)
/// §2). sigma: singular values (any order), every entry >= 0. Returns 0 for an all-zero vector; one rotation plane (two
/// equal values) gives exactly 2. Throws cf::InvalidArgument on a negative or non-finite entry.
double effective_rank_entropy(const Eigen::VectorXd& sigma);

/// Participation-ratio effective rank (sum sigma_i)^2 / sum sigma_i^2 (docs/spec.md §7 option 8; uses
/// the same weights p_i as the entropy form, so k equal values give k). sigma as above; 0 for an
/// all-zero vector.
double effective_rank_participation(const Eigen::VectorXd& sigma);

/// Routing-filtering ratio rho = ||R||_F / ||F||_F (Routing/filtering (Jamil & Kapadia) §2; rho > 1: routing head).
/// Norms must be >= 0; returns +inf when ||F||_F = 0 < ||R||_F and NaN when both are 0.
double routing_filtering_ratio(double norm_R, double norm_F);

/// Description of one matrix's spectrum.
struct Spectrum {
  Eigen::VectorXd sigma;  ///< singular values, descending (at most the matrix's possible rank)
  double fro = 0;         ///< Frobenius norm (= ||sigma||_2)
  double erank_entropy = 0;
  double erank_participation = 0;
  Index numerical_rank = 0;  ///< #{sigma_i > tol * sigma_max}, tol = rank_tolerance(...)
};

/// Options for the analyses below.
///
/// Tolerances (docs/spectral.md "Numerical rank and instability"): a matrix M (n x n) computed
/// in arithmetic of unit roundoff u carries rounding noise of about n u ||M||, which is neither
/// rank nor instability. Hence
///   numerical rank  = #{ sigma_i > max(rank_tol, n u) sigma_max },
///   unstable head   : max Re lambda(M) > lambda_tol = n u ||M||_F.
/// Weight level: W_Q W_K^T is formed in double (u = 2^-53), so max(rank_tol, n u) = rank_tol.
/// Sequence level: the scores come from the float32 forward pass (u = 2^-24): n u = 9.5e-6 for
/// n = 160, far above float32 round-off singular values (~1e-7 sigma_max), far below any rank
/// a head really has.
struct AnalysisOptions {
  /// Relative threshold for numerical_rank (sigma_i > max(rank_tol, n u) * sigma_max counts).
  double rank_tol = 1e-10;
  /// Unit roundoff u of the arithmetic that produced the matrix (double 2^-53, float32 2^-24).
  double rounding_unit = 0x1p-53;
  /// Compute max Re lambda(M) with a general (non-symmetric) eigensolver.
  bool eigenvalues = true;
  /// Compute the singular values of M itself (F and R are always computed).
  bool spectrum_M = true;
};

/// All per-head metrics of Routing/filtering (Jamil & Kapadia) §2-3 for one interaction matrix.
struct HeadSpectrum {
  Index n = 0;       ///< dimension of M (d at weight level, n tokens at sequence level)
  Spectrum M, F, R;  ///< M.sigma is empty when options.spectrum_M is false
  double rho = 0;    ///< ||R||_F / ||F||_F
  /// max_i Re lambda_i(M) (> lambda_tol: dynamically unstable head, Routing/filtering (Jamil & Kapadia) §3); NaN when
  /// not computed.
  double max_re_lambda = 0;
  /// Rounding level of max_re_lambda: n u ||M||_F (AnalysisOptions); values up to it are noise.
  double lambda_tol = 0;
  std::string method;  ///< "dense" or "factored"
};

/// Build a Spectrum from singular values (any order, >= 0); rank_tol is relative to sigma_max.
Spectrum make_spectrum(Eigen::VectorXd sigma, double rank_tol);

/// Relative rank tolerance of an n x n matrix under `opt`: max(opt.rank_tol, n opt.rounding_unit).
double rank_tolerance(Index n, const AnalysisOptions& opt);

/// Whether a head counts as dynamically unstable: max Re lambda above its rounding level
/// (max_re_lambda > lambda_tol); false when max_re_lambda is NaN (not computed).
bool is_unstable(const HeadSpectrum& h);

/// Dense reference analysis of an explicit square matrix M (n x n): SVDs of F, R (and M) and the
/// general eigenvalues of M, all O(n^3). This is the oracle the factorised path is tested
/// against; it forms every n x n matrix. Throws cf::InvalidArgument unless M is square, non-empty
/// and finite.
HeadSpectrum analyse_dense(const Eigen::MatrixXd& M, const AnalysisOptions& opt = {});

/// Factorised analysis of M = scale * A B^T without forming M (docs/spec.md §3 "weight level never forms
/// a dense d x d SVD"). A, B: m x r (weight level: A = W_Q, B = W_K, m = d, r = d_k, scale = 1;
/// sequence level: A = Q, B = K, m = n, r = d_k, scale = 1/sqrt(d_k)).
///
/// One thin QR [A, B] = Q_U R_U (m x p, p = min(m, 2r); qr_r_factor) spans the column spaces of F = 1/2 U V^T
/// with U = [A, B], V = [B, A] and of R = 1/2 U V'^T with V' = [B, -A]: V and V' are U times a
/// block permutation, so the QR of V is that of U. With R_U = [R_A, R_B], M = Q_U C Q_U^T for the
/// p x p core C = scale R_A R_B^T, F = Q_U sym(C) Q_U^T and R = Q_U skew(C) Q_U^T: the singular
/// values of F, R, M are those of the cores (plus zeros) and the nonzero eigenvalues of M are
/// those of C. Cost O(m r^2 + r^3) instead of O(m^3).
/// Throws cf::InvalidArgument if A and B differ in shape, are empty or not finite.
HeadSpectrum analyse_factored(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B, double scale = 1.0,
                              const AnalysisOptions& opt = {});

/// analyse_factored with the factors already stacked: U = [A, B] (m x 2r, r >= 1), for callers
/// that build U anyway (the weight-level analysis, straight from float32 weights). Same results.
HeadSpectrum analyse_factored_stacked(const Eigen::MatrixXd& U, double scale = 1.0, const AnalysisOptions& opt = {});

/// The p x p cores of analyse_factored_stacked for U = [A, B] (m x 2r): C = scale R_A R_B^T, its
/// symmetric part CF and skew part CR, and rr = min(r, p), the leading rows of C that can be nonzero
/// (sigma(M) = sigma(C.topRows(rr))). Same checks as analyse_factored_stacked.
struct FactoredCores {
  Index m = 0, rr = 0;
  Eigen::MatrixXd C, CF, CR;
};
FactoredCores factored_cores(const Eigen::MatrixXd& U, double scale = 1.0);

/// The HeadSpectrum of analyse_factored_stacked from its cores and the singular values of CF, CR
/// and (when opt.spectrum_M) C.topRows(rr), however they were computed (issue 30: a device's
/// batched eigensolver); rank_tol as rank_tolerance(m, opt) or larger for a less precise solver.
/// max Re lambda is computed here (general eigensolver on the CPU) when opt.eigenvalues.
HeadSpectrum factored_spectrum(const FactoredCores& c, const Eigen::VectorXd& sigma_F, const Eigen::VectorXd& sigma_R,
                               const Eigen::VectorXd& sigma_M, double rank_tol, const AnalysisOptions& opt);

/// R factor (min(m, c) x c, upper trapezoidal) of the thin QR U = Q R of an m x c matrix:
/// Cholesky QR (R = chol(U^T U)^T) when U is well conditioned (diagonal of the Cholesky factor
/// within a factor 1e3), else Householder QR. Row signs of R may differ between the two.
Eigen::MatrixXd qr_r_factor(const Eigen::MatrixXd& U);

/// Singular values (descending) of a skew-symmetric matrix S (n x n), computed as |eigenvalues|
/// of the Hermitian matrix i S, which keeps the exact +-i sigma pairing (each value appears twice
/// up to rounding). S must be square; skewness is assumed, not checked.
Eigen::VectorXd singular_values_skew(const Eigen::MatrixXd& S);

/// Singular values (descending) of a symmetric matrix F, as |eigenvalues|.
Eigen::VectorXd singular_values_symmetric(const Eigen::MatrixXd& F);

/// max_i Re lambda_i(M) for a square matrix (general real eigensolver, eigenvalues only).
double max_real_eigenvalue_dense(const Eigen::MatrixXd& M);

}  // namespace cf::spectral
