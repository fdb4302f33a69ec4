#pragma once
// Attention variant unit: scaled dot-product scores (issues 12, 28; one variant = one unit). The
// score policy of every softmax mask family (full, block, SWA, bridge, PBB, SE-Bridge: they differ
// only in their branches, cf/nn/detail/attention_masks.hpp): logits scale Q_I K_J^T of a tile,
// gradients dQ_I += scale dS K_J, dK_J += scale dS^T Q_I; DotUnit adds the dense oracle's form.
// Internal to lib/nn.
#include <cmath>

#include "cf/nn/detail/variants/score_policy.hpp"
#include "cf/nn/detail/variants/unit.hpp"

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

/// Dense oracle of the scaled dot product: S = scale Q K^T (T x T) of one head.
template <class T>
void dot_dense_scores(const HeadQKV<T>& h, T scale, MatR<T>& S) {
  S.noalias() = h.Q() * h.K().transpose();
  S *= scale;
}
/// Its backward from d logits dS: dQ += scale dS K, dK += scale dS^T Q.
template <class T>
void dot_dense_backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, T scale, const MatR<T>& dS) {
  g.dQ(h).noalias() += scale * dS * h.K();
  g.dK(h).noalias() += scale * dS.transpose() * h.Q();
}

/// The unit of every softmax mask family (full, block, SWA, bridge, PBB, SE-Bridge: they differ
/// only in their branches, cf/nn/detail/attention_masks.hpp): logits Q K^T / sqrt(d_head), no
/// parameters, no state. lib/gpu's tiled kernel and device trainer run it.
struct DotUnit : SoftmaxUnit<DotUnit> {
  static constexpr GpuHook gpu{true, true, GpuForm::Softmax};
  template <class T>
  static T scale(int dh) {
    return T(1.0 / std::sqrt(double(dh)));
  }
  /// Dense oracle: S = scale Q K^T (T x T).
  template <class T, class S>
  static void dense_scores(const AttnLayer<T>&, const S&, const HeadQKV<T>& h, int, int, MatR<T>& Sm) {
    dot_dense_scores(h, scale<T>(h.dh), Sm);
  }
  /// dQ += scale dS K, dK += scale dS^T Q.
  template <class T, class S>
  static void dense_scores_backward(const AttnLayer<T>&, S&, const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int, int,
                                    const MatR<T>& dS) {
    dot_dense_backward(h, g, scale<T>(h.dh), dS);
  }
  template <class T, class S, class Pos>
  static auto scores(const AttnLayer<T>& L, S&, int, int h, bool, const Pos& pos) {
    DotScores<T> d;
    d.scale = scale<T>(L.dh);
    return pos(d, h);
  }
};

}  // namespace cf::nn::detail
