#pragma once
// Tiled-attention variant unit: runway rewiring (Runway (Lee & Clark) Eqs. 8-14; issue 12, one variant = one
// unit), a wrapper over the dot-product scores (with or without ALiBi): logits plus the bias
// log beta = -softplus(tau_{i,m}) on the eligible edges 1 <= m <= i-2, with tau computed per tile
// from the last head's values vl: tau = c v_{i-1}.v_m (dot, c = 1/sqrt(dh)) or v_{i-1}^T B v_m
// (bilinear, B dh x dh row-major). Backward: the inner gradients, then d tau = -dS sigmoid(tau)
// into d v_{i-1} (dvs, by row i), d v_m (dvl) and dB; the layer reduces dvs, dvl into the last
// head's dV afterwards (model.cpp). Internal to lib/nn.
#include <cmath>

#include "cf/nn/detail/variants/score_policy.hpp"

namespace cf::nn::detail {

/// Runway bias over Inner's scores. vl: last head's values of this sequence (T x dh, stride ld_vl);
/// B: bilinear form (null = dot); dvs, dvl (T x dh, stride dh) and dB (dh x dh): this head's
/// gradient outputs (accumulated; null in a forward pass, dB null for the dot form).
template <class T, class Inner>
struct RunwayScores {
  struct Scratch {
    typename Inner::Scratch inner;
    MatR<T> tau;
  };
  static constexpr bool kTransposedKeys = Inner::kTransposedKeys;  // the inner scores read h.kt
  Inner inner;
  const T* vl = nullptr;
  std::int64_t ld_vl = 0;
  const T* B = nullptr;
  T *dvs = nullptr, *dvl = nullptr, *dB = nullptr;

  static bool eligible(int i, int m) { return i >= 3 && m >= 1 && m <= i - 2; }

  void logits(const HeadQKV<T>& h, int i0, int ni, int j0, int nj, TileMat<T>& S, Scratch& s) const {
    inner.logits(h, i0, ni, j0, nj, S, s.inner);
    CSMap<T> Vl(vl, h.Tn, h.dh, Eigen::OuterStride<>(ld_vl));
    // rows i use v_{i-1}: rows [max(i0,1)-1, ...)
    const int r0 = i0 == 0 ? 1 : 0;
    s.tau.setZero(ni, nj);
    if (ni > r0) {
      auto Vs = Vl.middleRows(i0 + r0 - 1, ni - r0);
      if (B)
        s.tau.bottomRows(ni - r0).noalias() = Vs * CMapR<T>(B, h.dh, h.dh) * Vl.middleRows(j0, nj).transpose();
      else
        s.tau.bottomRows(ni - r0).noalias() = (T(1) / std::sqrt(T(h.dh))) * Vs * Vl.middleRows(j0, nj).transpose();
    }
    for (int r = 0; r < ni; ++r)
      for (int c = 0; c < nj; ++c)
        if (eligible(i0 + r, j0 + c)) S(r, c) += -softplus(s.tau(r, c));
  }

  void backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int i0, int ni, int j0, int nj, TileMat<T>& dS,
                const Scratch& s) const {
    inner.backward(h, g, i0, ni, j0, nj, dS, s.inner);
    const int dh = h.dh;
    // d loss / d tau = dS * d(-softplus(tau))/d tau = -dS sigmoid(tau) on eligible edges
    for (int r = 0; r < ni; ++r)
      for (int cc = 0; cc < nj; ++cc) dS(r, cc) = eligible(i0 + r, j0 + cc) ? -dS(r, cc) * sigmoid(s.tau(r, cc)) : T(0);
    CSMap<T> Vl(vl, h.Tn, dh, Eigen::OuterStride<>(ld_vl));
    MapR<T> dVs(dvs, h.Tn, dh), dVl(dvl, h.Tn, dh);
    const int r0 = i0 == 0 ? 1 : 0;
    if (ni <= r0) return;
    auto Gt = dS.bottomRows(ni - r0);
    auto Vs = Vl.middleRows(i0 + r0 - 1, ni - r0);
    if (B) {
      CMapR<T> Bm(B, dh, dh);
      dVs.middleRows(i0 + r0, ni - r0).noalias() += Gt * Vl.middleRows(j0, nj) * Bm.transpose();
      dVl.middleRows(j0, nj).noalias() += Gt.transpose() * Vs * Bm;
      MapR<T>(dB, dh, dh).noalias() += Vs.transpose() * Gt * Vl.middleRows(j0, nj);
    } else {
      const T c = T(1) / std::sqrt(T(dh));
      dVs.middleRows(i0 + r0, ni - r0).noalias() += c * Gt * Vl.middleRows(j0, nj);
      dVl.middleRows(j0, nj).noalias() += c * Gt.transpose() * Vs;
    }
  }
};

}  // namespace cf::nn::detail
