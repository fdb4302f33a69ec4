#pragma once
// One attention head of one sequence, forward and backward (dense T x T, causal). Used by
// model.cpp for every variant and by the op-level gradient tests. Internal: the public entry is
// cf::nn::forward_backward.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

template <class T>
using SMap = Eigen::Map<MatR<T>, 0, Eigen::OuterStride<>>;
template <class T>
using CSMap = Eigen::Map<const MatR<T>, 0, Eigen::OuterStride<>>;

/// What a head computes. Softmax heads: logits = scale Q K^T (sd: scale (Q K^T - K Q^T) - diag(damp)),
/// then the optional hook, ALiBi bias -slope (i - j) and runway bias; then one masked softmax per
/// branch (masks[k] is a T x T row-major 0/1 matrix, row = query), outputs added (branch fusion;
/// a single mask is the union / plain case); a row with no admitted key contributes 0.
/// Linear heads: ELU+1 kernel attention, out_i = sum_{j<=i} phi(q_i).phi(k_j) v_j / sum_{j<=i} phi(q_i).phi(k_j).
struct HeadSpec {
  bool linear = false;
  bool sd = false;
  double scale = 1;
  double alibi_slope = 0;  ///< 0 = no ALiBi
  std::vector<const std::uint8_t*> masks;
};

template <class T>
inline T elu1(T x) {
  return x > T(0) ? x + T(1) : std::exp(x);
}
template <class T>
inline T delu1(T x) {
  return x > T(0) ? T(1) : std::exp(x);
}

/// Forward of one head. q, k, v: T x dh with row stride ld; y: T x dh output with stride ldy
/// (overwritten); damp: T diagonal damping values (sd only, else null); runway_bias: T x T additive
/// log-beta (null = none); P: saved probabilities, masks.size() (linear: 1) blocks of T x T;
/// rowsum: T normalisers (linear only); hook: applied to the unmasked logits (may be null);
/// lse: masks.size() x T log-sum-exp of the admitted logits per branch and row (-inf where none;
/// softmax heads only; null = not needed), the row statistic the tiled path saves.
template <class T>
void attention_head_forward(const HeadSpec& s, int Tn, int dh, const T* q, const T* k, const T* v, std::int64_t ld,
                            T* y, std::int64_t ldy, const T* damp, const T* runway_bias, T* P, T* rowsum,
                            const std::function<void(Eigen::Ref<Eigen::MatrixXf>)>* hook, T* lse = nullptr) {
  CSMap<T> Q(q, Tn, dh, Eigen::OuterStride<>(ld)), K(k, Tn, dh, Eigen::OuterStride<>(ld)),
      V(v, Tn, dh, Eigen::OuterStride<>(ld));
  SMap<T> Y(y, Tn, dh, Eigen::OuterStride<>(ldy));
  if (s.linear) {
    MatR<T> Pq = Q.unaryExpr([](T x) { return elu1(x); });
    MatR<T> Pk = K.unaryExpr([](T x) { return elu1(x); });
    MapR<T> A(P, Tn, Tn);
    A.noalias() = Pq * Pk.transpose();
    for (int i = 0; i < Tn; ++i) {
      T sum = 0;
      for (int j = 0; j <= i; ++j) sum += A(i, j);
      rowsum[i] = sum;
      for (int j = 0; j <= i; ++j) A(i, j) /= sum;
      for (int j = i + 1; j < Tn; ++j) A(i, j) = 0;
    }
    Y.noalias() = A * V;
    return;
  }
  // per-thread scratch: T x T temporaries would otherwise be mmap-allocated and page-faulted per head
  thread_local MatR<T> S;
  S.resize(Tn, Tn);
  S.noalias() = Q * K.transpose();
  if (s.sd) {
    MatR<T> St = S.transpose();
    S = T(s.scale) * (S - St);
    for (int i = 0; i < Tn; ++i) S(i, i) -= damp[i];
  } else {
    S *= T(s.scale);
  }
  if (hook && *hook) {
    Eigen::MatrixXf tmp = S.template cast<float>();
    (*hook)(tmp);
    S = tmp.template cast<T>();
  }
  for (int i = 0; i < Tn; ++i) {
    if (s.alibi_slope != 0)
      for (int j = 0; j <= i; ++j) S(i, j) -= T(s.alibi_slope * (i - j));
    if (runway_bias)
      for (int j = 0; j <= i; ++j) S(i, j) += runway_bias[static_cast<std::int64_t>(i) * Tn + j];
  }
  for (std::size_t br = 0; br < s.masks.size(); ++br) {
    MapR<T> Pb(P + br * static_cast<std::int64_t>(Tn) * Tn, Tn, Tn);
    const std::uint8_t* m = s.masks[br];
    for (int i = 0; i < Tn; ++i) {
      const std::uint8_t* mr = m + static_cast<std::int64_t>(i) * Tn;
      T mx = -std::numeric_limits<T>::infinity();
      for (int j = 0; j <= i; ++j)
        if (mr[j]) mx = std::max(mx, S(i, j));
      for (int j = 0; j < Tn; ++j) Pb(i, j) = 0;
      if (lse) lse[br * Tn + i] = mx;
      if (mx == -std::numeric_limits<T>::infinity()) continue;  // no admitted key in this branch
      T sum = 0;
      for (int j = 0; j <= i; ++j)
        if (mr[j]) {
          Pb(i, j) = std::exp(S(i, j) - mx);
          sum += Pb(i, j);
        }
      if (lse) lse[br * Tn + i] = mx + std::log(sum);
      const T inv = T(1) / sum;
      for (int j = 0; j <= i; ++j) Pb(i, j) *= inv;
    }
    if (br == 0)
      Y.noalias() = Pb * V;
    else
      Y.noalias() += Pb * V;
  }
}

/// Backward of attention_head_forward. dq, dk, dv (stride ld) and the gradient w.r.t. the logits
/// dS_out (T x T, null = not needed; written, not accumulated) receive the gradient of dy (stride
/// ldy); dq/dk/dv are accumulated (+=). ddamp (sd only): T values written with -dS_ii.
template <class T>
void attention_head_backward(const HeadSpec& s, int Tn, int dh, const T* q, const T* k, const T* v, std::int64_t ld,
                             T* dq, T* dk, T* dv, const T* dy, std::int64_t ldy, const T* P, const T* rowsum, T* dS_out,
                             T* ddamp) {
  CSMap<T> Q(q, Tn, dh, Eigen::OuterStride<>(ld)), K(k, Tn, dh, Eigen::OuterStride<>(ld)),
      V(v, Tn, dh, Eigen::OuterStride<>(ld)), dY(dy, Tn, dh, Eigen::OuterStride<>(ldy));
  SMap<T> dQ(dq, Tn, dh, Eigen::OuterStride<>(ld)), dK(dk, Tn, dh, Eigen::OuterStride<>(ld)),
      dV(dv, Tn, dh, Eigen::OuterStride<>(ld));
  thread_local MatR<T> dP, dS;
  dP.resize(Tn, Tn);
  dP.noalias() = dY * V.transpose();
  const std::size_t nb = s.linear ? 1 : s.masks.size();
  for (std::size_t br = 0; br < nb; ++br) {
    CMapR<T> Pb(P + br * static_cast<std::int64_t>(Tn) * Tn, Tn, Tn);
    dV.noalias() += Pb.transpose() * dY;
  }
  dS.setZero(Tn, Tn);
  for (std::size_t br = 0; br < nb; ++br) {
    CMapR<T> Pb(P + br * static_cast<std::int64_t>(Tn) * Tn, Tn, Tn);
    for (int i = 0; i < Tn; ++i) {
      T dot = 0;
      for (int j = 0; j <= i; ++j) dot += Pb(i, j) * dP(i, j);
      for (int j = 0; j <= i; ++j) dS(i, j) += Pb(i, j) * (dP(i, j) - dot);
    }
  }
  if (s.linear) {
    // P = A / rowsum with A = phi(Q) phi(K)^T: dA = (dP - <P, dP>_row) / rowsum = dS / (P rowsum).
    MatR<T> dA = MatR<T>::Zero(Tn, Tn);
    CMapR<T> Pb(P, Tn, Tn);
    for (int i = 0; i < Tn; ++i) {
      T dot = 0;
      for (int j = 0; j <= i; ++j) dot += Pb(i, j) * dP(i, j);
      for (int j = 0; j <= i; ++j) dA(i, j) = (dP(i, j) - dot) / rowsum[i];
    }
    MatR<T> Pq = Q.unaryExpr([](T x) { return elu1(x); });
    MatR<T> Pk = K.unaryExpr([](T x) { return elu1(x); });
    MatR<T> dPq = dA * Pk, dPk = dA.transpose() * Pq;
    dQ += dPq.cwiseProduct(MatR<T>(Q.unaryExpr([](T x) { return delu1(x); })));
    dK += dPk.cwiseProduct(MatR<T>(K.unaryExpr([](T x) { return delu1(x); })));
    return;
  }
  if (s.sd) {
    MatR<T> G = dS - MatR<T>(dS.transpose());
    dQ.noalias() += T(s.scale) * G * K;
    dK.noalias() -= T(s.scale) * G * Q;
    for (int i = 0; i < Tn; ++i) ddamp[i] = -dS(i, i);
  } else {
    dQ.noalias() += T(s.scale) * dS * K;
    dK.noalias() += T(s.scale) * dS.transpose() * Q;
  }
  if (dS_out) MapR<T>(dS_out, Tn, Tn) = dS;
}

}  // namespace cf::nn::detail
