#pragma once
// Tiled-attention variant unit: scaled dot-product scores (issue 12, one variant = one unit). The
// score policy of every softmax mask family (full, block, SWA, bridge, PBB, SE-Bridge: they differ
// only in their branches, cf/nn/detail/attention_masks.hpp): logits scale Q_I K_J^T of a tile,
// gradients dQ_I += scale dS K_J, dK_J += scale dS^T Q_I. Internal to lib/nn.
#include "cf/nn/detail/variants/score_policy.hpp"

namespace cf::nn::detail {

/// Scaled dot-product scores (scale = 1/sqrt(d_head) in the trainer).
template <class T>
struct DotScores {
  struct Scratch {};
  T scale = 1;

  /// S (ni x nj) = scale Q[i0:i0+ni] K[j0:j0+nj]^T.
  void logits(const HeadQKV<T>& h, int i0, int ni, int j0, int nj, MatR<T>& S, Scratch&) const {
    S.resize(ni, nj);
    S.noalias() = h.Q().middleRows(i0, ni) * h.K().middleRows(j0, nj).transpose();
    S *= scale;
  }
  /// dS: d loss / d logits of the tile; accumulates dQ, dK.
  void backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int i0, int ni, int j0, int nj, MatR<T>& dS,
                const Scratch&) const {
    g.dQ(h).middleRows(i0, ni).noalias() += scale * dS * h.K().middleRows(j0, nj);
    g.dK(h).middleRows(j0, nj).noalias() += scale * dS.transpose() * h.Q().middleRows(i0, ni);
  }
};

}  // namespace cf::nn::detail
