#pragma once
// The dense oracle's variant-free part: one softmax head of one sequence with its T x T logits given
// (masked softmax per branch, P V, and back to d logits). Each variant unit computes its own dense
// logits and their gradient (cf/nn/detail/variants/); the generic driver (variants/unit.hpp) puts
// them around these two functions. Internal to lib/nn.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

template <class T>
using SMap = Eigen::Map<MatR<T>, 0, Eigen::OuterStride<>>;
template <class T>
using CSMap = Eigen::Map<const MatR<T>, 0, Eigen::OuterStride<>>;

/// One masked softmax per branch over the logits S (T x T, row = query; masks[k] a T x T row-major
/// 0/1 matrix), outputs added (branch fusion; a single mask is the union / plain case): Y (T x dh)
/// = sum_k P_k V. P: masks.size() blocks of T x T probabilities (written); lse: masks.size() x T
/// log-sum-exp of the admitted logits per branch and row (-inf where none; null = not needed). A
/// row with no admitted key in a branch contributes 0.
template <class T>
void dense_softmax_forward(int Tn, const MatR<T>& S, const std::vector<const std::uint8_t*>& masks, const CSMap<T>& V,
                           SMap<T>& Y, T* P, T* lse) {
  for (std::size_t br = 0; br < masks.size(); ++br) {
    MapR<T> Pb(P + br * static_cast<std::int64_t>(Tn) * Tn, Tn, Tn);
    const std::uint8_t* m = masks[br];
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

/// Backward of dense_softmax_forward over nb branches of saved probabilities P: dV (T x dh) +=
/// sum_k P_k^T dY; dS (T x T) = d loss / d logits (written; zero outside the masks); dP scratch.
template <class T>
void dense_softmax_backward(int Tn, std::size_t nb, const T* P, const CSMap<T>& V, const CSMap<T>& dY, SMap<T>& dV,
                            MatR<T>& dP, MatR<T>& dS) {
  dP.resize(Tn, Tn);
  dP.noalias() = dY * V.transpose();
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
}

}  // namespace cf::nn::detail
