#pragma once
// Attention variant unit: S-D skew scores with diagonal damping (Routing/filtering (Jamil & Kapadia),
// docs/spec.md §3; issues 12, 28, one variant = one unit). Logits of a tile: scale (Q_I K_J^T - K_I Q_J^T) minus the
// damping d_i on the diagonal i = j; gradients: the four GEMMs of the skew product and d damp_i = -dS_ii. SdUnit owns
// the damping parameters, computes d = eps + softplus(x W_d + b_d) per token and head, its backward, and the dense
// oracle's form. Internal to lib/nn.
#include <cmath>

#include "cf/nn/detail/variants/score_policy.hpp"
#include "cf/nn/detail/variants/unit.hpp"

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

/// Dense oracle of the S-D scores of one head: S = scale (Q K^T - K Q^T) - diag(damp) (T x T).
template <class T>
void sd_dense_scores(const HeadQKV<T>& h, T scale, const T* damp, MatR<T>& S) {
  S.noalias() = h.Q() * h.K().transpose();
  MatR<T> St = S.transpose();
  S = scale * (S - St);
  for (int i = 0; i < h.Tn; ++i) S(i, i) -= damp[i];
}
/// Its backward from d logits dS, with G = dS - dS^T: dQ += scale G K, dK -= scale G Q (d damp_i =
/// -dS_ii is the caller's).
template <class T>
void sd_dense_backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, T scale, const MatR<T>& dS) {
  MatR<T> G = dS - MatR<T>(dS.transpose());
  g.dQ(h).noalias() += scale * G * h.K();
  g.dK(h).noalias() -= scale * G * h.Q();
}

/// The S-D unit: parameters attn.damp.weight [H, C] and attn.damp.bias [H] per layer; saved state
/// the damping d = softplus(z) + eps, z = x W_d^T + b_d ([N, H], x = the sub-layer input), also
/// per head [B, H, T] for the tiled policy. lib/gpu's tiled kernel computes the skew scores
/// (AttentionExtras::damp), and the device trainer runs S-D layers (the damping's map on the device).
struct SdUnit : SoftmaxUnit<SdUnit> {
  static constexpr GpuHook gpu{true, true, GpuForm::Sd};
  static std::vector<VariantParam> params(const ModelConfig& c, int) {
    return {{"attn.damp.weight", {c.n_head, c.d_model}, &LayerOffsets::damp_w},
            {"attn.damp.bias", {c.n_head}, &LayerOffsets::damp_b}};
  }
  template <class T>
  struct State {
    MatR<T> z, d;        ///< [N, H]: pre-activation and damping
    std::vector<T> d_t;  ///< [B, H, T]: the damping per head
    std::size_t bytes() const {
      return static_cast<std::size_t>(z.size() + d.size()) * sizeof(T) + d_t.size() * sizeof(T);
    }
  };
  /// Backward scratch (AttnLayer::scratch): d damping [N, H], and before it the tiled path's
  /// per-head gradients [B, H, T].
  template <class T>
  static MapR<T> ddamp(const AttnLayer<T>& L) {
    return MapR<T>(L.a.unit_scratch.data() + static_cast<std::size_t>(L.N) * L.H, L.N, L.H);
  }
  template <class T>
  static T* dd_t(const AttnLayer<T>& L) {
    return L.a.unit_scratch.data();
  }
  template <class T>
  static T scale(int dh) {
    return T(0.5 / std::sqrt(double(dh)));  // the routing scale 1/(2 sqrt(d_head)), docs/spec.md §7.11
  }

  /// d = softplus(in W_d^T + b_d) + eps (Routing/filtering (Jamil & Kapadia), docs/spec.md §3).
  template <class T>
  static void prepare(AttnLayer<T>& L, State<T>& s) {
    const LayerOffsets& o = L.off();
    s.z.resize(L.N, L.H);
    s.d.resize(L.N, L.H);
    linear_forward(s.z.data(), L.in, L.W + o.damp_w, L.W + o.damp_b, L.N, L.C, L.H);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(L.N) * L.H; ++i)
      s.d(i) = softplus(s.z(i)) + T(L.lc().sd_eps);
    s.d_t.resize(static_cast<std::size_t>(L.N) * L.H);  // [B, H, T]: contiguous rows for the tiled kernels
    for (int b = 0; b < L.B; ++b)
      for (int h = 0; h < L.H; ++h)
        for (int t = 0; t < L.Tn; ++t)
          s.d_t[(static_cast<std::size_t>(b) * L.H + h) * L.Tn + t] =
              s.d(static_cast<std::int64_t>(b * L.Tn + t) * L.H + h);
  }
  /// Dense oracle: S = scale (Q K^T - K Q^T) - diag(d) of head h.
  template <class T>
  static void dense_scores(const AttnLayer<T>& L, const State<T>& s, const HeadQKV<T>& h, int b, int hd, MatR<T>& Sm) {
    sd_dense_scores(h, scale<T>(h.dh), s.d_t.data() + (static_cast<std::size_t>(b) * L.H + hd) * L.Tn, Sm);
  }
  /// G = dS - dS^T: dQ += scale G K, dK -= scale G Q; d damping_i = -dS_ii.
  template <class T>
  static void dense_scores_backward(const AttnLayer<T>& L, State<T>& s, const HeadQKV<T>& h, const HeadQKVGrads<T>& g,
                                    int b, int hd, const MatR<T>& dS) {
    sd_dense_backward(h, g, scale<T>(h.dh), dS);
    MapR<T> dd = ddamp(L);
    for (int i = 0; i < L.Tn; ++i) dd(static_cast<std::int64_t>(b * L.Tn + i), hd) = -dS(i, i);
  }
  template <class T, class Pos>
  static auto scores(const AttnLayer<T>& L, State<T>& s, int b, int h, bool grads, const Pos& pos) {
    const std::size_t bh = static_cast<std::size_t>(b) * L.H + h;
    SdScores<T> sd;
    sd.scale = scale<T>(L.dh);
    sd.damp = s.d_t.data() + bh * L.Tn;
    if (grads) sd.ddamp = dd_t(L) + bh * L.Tn;
    return pos(sd, h);
  }
  template <class T>
  static void begin_backward(AttnLayer<T>& L, State<T>&) {
    L.a.unit_scratch.assign(2 * static_cast<std::size_t>(L.N) * L.H, T(0));
  }
  /// The tiled path's per-head damping gradients into [N, H], then through the damping's softplus
  /// and linear map: d in +=, d W_d, d b_d +=.
  template <class T>
  static void finish_backward(AttnLayer<T>& L, State<T>& s) {
    const int H = L.H, Tn = L.Tn;
    MapR<T> dd = ddamp(L);
    if (!L.dense)
      for (int bh = 0; bh < L.B * H; ++bh)
        for (int t = 0; t < Tn; ++t)
          dd(static_cast<std::int64_t>((bh / H) * Tn + t), bh % H) = dd_t(L)[static_cast<std::size_t>(bh) * Tn + t];
    const LayerOffsets& o = L.off();
    MatR<T> dz(L.N, H);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(L.N) * H; ++i) dz(i) = dd(i) * sigmoid(s.z(i));
    linear_backward(L.dn->data(), L.G + o.damp_w, L.G + o.damp_b, dz.data(), L.in, L.W + o.damp_w, L.N, L.C, H);
  }
};

}  // namespace cf::nn::detail
