#pragma once
// ELU+1 causal linear attention of one head of one sequence in its prefix-sum form (issue 12;
// docs/spec.md §3 "replacing a layer by ELU+1 linear attention"; Katharopoulos et al. 2020):
//
//   phi(x) = elu(x) + 1,  out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i),
//   S_i = sum_{j<=i} phi(k_j) v_j^T,  z_i = sum_{j<=i} phi(k_j),
//
// exactly the dense oracle's linear head (cf/nn/detail/variants/linear.hpp, linear_dense_forward: no scale,
// no epsilon, causal only; ALiBi, masks and score hooks do not apply to linear layers). No T x T
// matrix exists: the sequence runs in chunks of kLinChunk rows; inside a chunk the causal part is a
// kLinChunk x kLinChunk product, across chunks the running state S (dh x dh) and z (dh) carries the
// prefix. Time O(T dh^2 + T kLinChunk dh), memory O(T dh) (the saved denominators, T per head, and
// the forward output). The backward recomputes the forward states in a first sweep (d phi(Q)) and
// runs the reverse prefix sums R_j = sum_{i>=j} phi(q_i) dnum_i^T, r_j = sum_{i>=j} phi(q_i) dden_i
// in a second sweep (d phi(K), dV). Internal to lib/nn.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cf/nn/detail/attention_dense.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

/// phi(x) = elu(x) + 1 and its derivative.
template <class T>
inline T elu1(T x) {
  return x > T(0) ? x + T(1) : std::exp(x);
}
template <class T>
inline T delu1(T x) {
  return x > T(0) ? T(1) : std::exp(x);
}

/// Rows per chunk of the prefix-sum kernels.
constexpr int kLinChunk = 64;

namespace lin {
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// phi of rows [r0, r0 + n) of X (T x dh, stride ld) into out (n x dh).
template <class T>
void phi_rows(const CSMap<T>& X, int r0, int n, MatR<T>& out) {
  out = X.middleRows(r0, n).unaryExpr([](T x) { return elu1(x); });
}

/// Zero the strictly upper triangle (keys after the query) of a square chunk matrix.
template <class T>
void causal_tril(MatR<T>& M) {
  for (int r = 0; r < M.rows(); ++r)
    for (int c = r + 1; c < M.cols(); ++c) M(r, c) = T(0);
}
}  // namespace lin

/// Forward of one linear head. q, k, v: T x dh (row stride ld); y: T x dh output (stride ldy,
/// overwritten); den: T denominators phi(q_i)^T z_i (> 0), saved for the backward.
template <class T>
void linear_head_forward(int Tn, int dh, const T* q, const T* k, const T* v, std::int64_t ld, T* y, std::int64_t ldy,
                         T* den) {
  CSMap<T> Q(q, Tn, dh, Eigen::OuterStride<>(ld)), K(k, Tn, dh, Eigen::OuterStride<>(ld)),
      V(v, Tn, dh, Eigen::OuterStride<>(ld));
  SMap<T> Y(y, Tn, dh, Eigen::OuterStride<>(ldy));
  thread_local MatR<T> A, Bk, P, S, num;
  thread_local lin::Vec<T> z, dn;
  S.setZero(dh, dh);
  z.setZero(dh);
  for (int c0 = 0; c0 < Tn; c0 += kLinChunk) {
    const int n = std::min(kLinChunk, Tn - c0);
    lin::phi_rows(Q, c0, n, A);
    lin::phi_rows(K, c0, n, Bk);
    P.noalias() = A * Bk.transpose();
    lin::causal_tril(P);
    num.noalias() = A * S;
    num.noalias() += P * V.middleRows(c0, n);
    dn.noalias() = A * z;
    dn += P.rowwise().sum();
    for (int r = 0; r < n; ++r) {
      den[c0 + r] = dn(r);
      Y.row(c0 + r) = num.row(r) / dn(r);
    }
    S.noalias() += Bk.transpose() * V.middleRows(c0, n);
    z += Bk.colwise().sum().transpose();
  }
}

/// Backward of linear_head_forward. y: the forward output (stride ldy), dy its gradient (stride
/// ldy), den the saved denominators; dq, dk, dv (stride ld) are accumulated (+=).
template <class T>
void linear_head_backward(int Tn, int dh, const T* q, const T* k, const T* v, std::int64_t ld, const T* y, const T* dy,
                          std::int64_t ldy, const T* den, T* dq, T* dk, T* dv) {
  CSMap<T> Q(q, Tn, dh, Eigen::OuterStride<>(ld)), K(k, Tn, dh, Eigen::OuterStride<>(ld)),
      V(v, Tn, dh, Eigen::OuterStride<>(ld)), Y(y, Tn, dh, Eigen::OuterStride<>(ldy)),
      dY(dy, Tn, dh, Eigen::OuterStride<>(ldy));
  SMap<T> dQ(dq, Tn, dh, Eigen::OuterStride<>(ld)), dK(dk, Tn, dh, Eigen::OuterStride<>(ld)),
      dV(dv, Tn, dh, Eigen::OuterStride<>(ld));
  thread_local MatR<T> A, Bk, P, dP, dA, dB, S, R, dnum;
  thread_local lin::Vec<T> z, r, dden;
  // out_i = num_i / den_i: d num_i = dO_i / den_i, d den_i = -(dO_i . out_i) / den_i
  auto chunk_grads = [&](int c0, int n) {
    dnum.resize(n, dh);
    dden.resize(n);
    for (int i = 0; i < n; ++i) {
      const T inv = T(1) / den[c0 + i];
      dnum.row(i) = dY.row(c0 + i) * inv;
      dden(i) = -dY.row(c0 + i).dot(Y.row(c0 + i)) * inv;
    }
    // d P_ij (j <= i, same chunk) = d num_i . v_j + d den_i
    dP.noalias() = dnum * V.middleRows(c0, n).transpose();
    dP.colwise() += dden;
    lin::causal_tril(dP);
  };
  // sweep 1 (forward): d phi(q_i) = S_{i} d num_i + z_i d den_i
  S.setZero(dh, dh);
  z.setZero(dh);
  for (int c0 = 0; c0 < Tn; c0 += kLinChunk) {
    const int n = std::min(kLinChunk, Tn - c0);
    lin::phi_rows(K, c0, n, Bk);
    chunk_grads(c0, n);
    dA.noalias() = dP * Bk;
    dA.noalias() += dnum * S.transpose();
    dA.noalias() += dden * z.transpose();
    for (int i = 0; i < n; ++i)
      for (int e = 0; e < dh; ++e) dQ(c0 + i, e) += dA(i, e) * delu1(Q(c0 + i, e));
    S.noalias() += Bk.transpose() * V.middleRows(c0, n);
    z += Bk.colwise().sum().transpose();
  }
  // sweep 2 (reverse): d phi(k_j) = R_j v_j + r_j, d v_j = R_j^T phi(k_j), with the suffix sums R, r
  R.setZero(dh, dh);
  r.setZero(dh);
  const int last = ((Tn - 1) / kLinChunk) * kLinChunk;
  for (int c0 = last; c0 >= 0; c0 -= kLinChunk) {
    const int n = std::min(kLinChunk, Tn - c0);
    lin::phi_rows(Q, c0, n, A);
    lin::phi_rows(K, c0, n, Bk);
    chunk_grads(c0, n);
    P.noalias() = A * Bk.transpose();
    lin::causal_tril(P);
    dB.noalias() = dP.transpose() * A;
    dB.noalias() += V.middleRows(c0, n) * R.transpose();
    dB.rowwise() += r.transpose();
    dV.middleRows(c0, n).noalias() += P.transpose() * dnum;
    dV.middleRows(c0, n).noalias() += Bk * R;
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < dh; ++e) dK(c0 + j, e) += dB(j, e) * delu1(K(c0 + j, e));
    R.noalias() += A.transpose() * dnum;
    r.noalias() += A.transpose() * dden;
  }
}

/// Probabilities of one linear head, P_ij = phi(q_i).phi(k_j) / den_i for j <= i (0 above the
/// diagonal), into out (T x T row-major): the capture path (the only place a T x T matrix of a
/// linear layer is built).
template <class T>
void linear_probs_head(int Tn, int dh, const T* q, const T* k, std::int64_t ld, const T* den, float* out) {
  CSMap<T> Q(q, Tn, dh, Eigen::OuterStride<>(ld)), K(k, Tn, dh, Eigen::OuterStride<>(ld));
  MatR<T> A, Bk;
  lin::phi_rows(Q, 0, Tn, A);
  lin::phi_rows(K, 0, Tn, Bk);
  for (int i = 0; i < Tn; ++i) {
    float* row = out + static_cast<std::size_t>(i) * Tn;
    for (int j = 0; j <= i; ++j) row[j] = static_cast<float>(A.row(i).dot(Bk.row(j)) / den[i]);
    std::fill(row + i + 1, row + Tn, 0.f);
  }
}

}  // namespace cf::nn::detail
