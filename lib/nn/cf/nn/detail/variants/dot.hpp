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
  static constexpr bool kTransposedKeys = true;
  T scale = 1;

  /// S (ni x nj) = scale Q[i0:i0+ni] K[j0:j0+nj]^T (from the transposed keys when the loop made them).
  void logits(const HeadQKV<T>& h, int i0, int ni, int j0, int nj, TileMat<T>& S, Scratch&) const {
    S.resize(ni, nj);
    if (h.kt) {
      nt_product(ni, nj, h.dh, h.q + i0 * h.ld, h.ld, h.kt->col(j0), h.kt->ld, S.data(), nj, scale);
      return;
    }
    S.noalias() = h.Q().middleRows(i0, ni) * h.K().middleRows(j0, nj).transpose();
    S *= scale;
  }
  /// dS: d loss / d logits of the tile; accumulates dQ, dK.
  void backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int i0, int ni, int j0, int nj, TileMat<T>& dS,
                const Scratch&) const {
    if (tile_gemm_enabled() && tile_gemm_ok<T>(h.dh)) {
      // dQ_I += scale dS K_J; dK_J += scale dS^T Q_I (A read transposed: sa_i = 1, sa_p = nj)
      nn_product_acc(ni, h.dh, nj, dS.data(), nj, 1, h.k + j0 * h.ld, h.ld, g.dq + i0 * g.ld, g.ld, scale);
      nn_product_acc(nj, h.dh, ni, dS.data(), 1, nj, h.q + i0 * h.ld, h.ld, g.dk + j0 * g.ld, g.ld, scale);
      return;
    }
    g.dQ(h).middleRows(i0, ni).noalias() += scale * dS * h.K().middleRows(j0, nj);
    g.dK(h).middleRows(j0, nj).noalias() += scale * dS.transpose() * h.Q().middleRows(i0, ni);
  }
};

}  // namespace cf::nn::detail
