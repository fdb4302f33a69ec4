#pragma once
// Tiled-attention variant unit: S-D skew scores with diagonal damping (Routing/filtering (Jamil & Kapadia),
// docs/spec.md §3; issue 12, one variant = one unit). Logits of a tile: scale (Q_I K_J^T - K_I Q_J^T) minus the damping
// d_i on the diagonal i = j; gradients: the four GEMMs of the skew product and d damp_i = -dS_ii. The damping values
// themselves (d = eps + softplus(x W_d + b_d) per token and head) are computed by the attention sub-layer (model.cpp
// sd_damping_*). Internal to lib/nn.
#include "cf/nn/detail/variants/score_policy.hpp"

namespace cf::nn::detail {

/// S-D scores (scale = 1/(2 sqrt(d_head)) in the trainer, docs/spec.md §7.11). damp: the head's T damping
/// values; ddamp: T gradient values (accumulated; null in a forward pass).
template <class T>
struct SdScores {
  struct Scratch {};
  static constexpr bool kTransposedKeys = false;  // K_I Q_J^T needs queries transposed too: Eigen
  T scale = 1;
  const T* damp = nullptr;
  T* ddamp = nullptr;

  void logits(const HeadQKV<T>& h, int i0, int ni, int j0, int nj, TileMat<T>& S, Scratch&) const {
    auto Q = h.Q();
    auto K = h.K();
    S.resize(ni, nj);
    S.noalias() = Q.middleRows(i0, ni) * K.middleRows(j0, nj).transpose();
    S.noalias() -= K.middleRows(i0, ni) * Q.middleRows(j0, nj).transpose();
    S *= scale;
    for (int r = 0; r < ni; ++r) {
      const int c = i0 + r - j0;
      if (c >= 0 && c < nj) S(r, c) -= damp[i0 + r];
    }
  }
  void backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int i0, int ni, int j0, int nj, TileMat<T>& dS,
                const Scratch&) const {
    auto Q = h.Q();
    auto K = h.K();
    auto dQ = g.dQ(h);
    auto dK = g.dK(h);
    dQ.middleRows(i0, ni).noalias() += scale * dS * K.middleRows(j0, nj);
    dK.middleRows(j0, nj).noalias() += scale * dS.transpose() * Q.middleRows(i0, ni);
    dK.middleRows(i0, ni).noalias() -= scale * dS * Q.middleRows(j0, nj);
    dQ.middleRows(j0, nj).noalias() -= scale * dS.transpose() * K.middleRows(i0, ni);
    for (int r = 0; r < ni; ++r) {
      const int cc = i0 + r - j0;
      if (cc >= 0 && cc < nj) ddamp[i0 + r] -= dS(r, cc);
    }
  }
};

}  // namespace cf::nn::detail
