#pragma once
// Attention variant unit: runway rewiring (Runway (Lee & Clark) Eqs. 8-14; issues 12, 28, one variant
// = one unit). The tiled policy wraps the dot-product scores (with or without ALiBi): logits plus the
// bias log beta = -softplus(tau_{i,m}) on the eligible edges 1 <= m <= i-2, with tau computed per
// tile from the last head's values vl: tau = c v_{i-1}.v_m (dot, c = 1/sqrt(dh)) or v_{i-1}^T B v_m
// (bilinear, B dh x dh row-major). Backward: the inner gradients, then d tau = -dS sigmoid(tau)
// into d v_{i-1} (dvs, by row i), d v_m (dvl) and dB, reduced into the last head's dV by
// RunwayUnit::finish_backward. RunwayUnit also owns B's parameter block and the dense oracle's
// tau, bias and gradient. Internal to lib/nn.
#include <cmath>

#include "cf/nn/detail/variants/dot.hpp"
#include "cf/nn/detail/variants/score_policy.hpp"
#include "cf/nn/detail/variants/unit.hpp"

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

/// The runway units (Runway (Lee & Clark) Eqs. 8-14): full causal dot-product attention plus log beta
/// on the eligible edges, beta = 1 - sigmoid(tau) shared by every head, tau from the last head's
/// values v: c v_{i-1}.v_m (Bilinear = false, c = 1/sqrt(d_head), no parameters) or v_{i-1}^T B v_m
/// (Bilinear = true, attn.runway_B [d_head, d_head] per layer). The dense oracle computes tau and the
/// bias [B, T, T] once per layer (tau saved for the backward) and gathers d tau from every head's d logits; the tiled
/// policy recomputes tau per tile and leaves per-(b, h) gradients that finish_backward reduces in a fixed order.
/// lib/gpu's tiled kernel computes the bias (AttentionExtras::runway_*), and the device trainer runs runway layers.
template <bool Bilinear>
struct RunwayUnit : SoftmaxUnit<RunwayUnit<Bilinear>> {
  static constexpr GpuHook gpu{true, true, Bilinear ? GpuForm::RunwayBilinear : GpuForm::RunwayDot};
  static std::vector<VariantParam> params(const ModelConfig& c, int l) {
    if (!Bilinear) return {};
    const std::int64_t dh = head_dim(c, l);
    return {{"attn.runway_B", {dh, dh}, &LayerOffsets::runway_B}};
  }
  template <class T>
  struct State {
    std::vector<T> tau;  ///< dense: [B, T, T]
    std::size_t bytes() const { return tau.size() * sizeof(T); }
  };
  /// Scratch of the layer running now (Activations::unit_scratch, shared by the layers). Dense
  /// forward: the bias log beta = -softplus(tau) [B, T, T]; dense backward: every head's d logits
  /// [B, H, T, T]; tiled backward, per (b, h): dvs [T, dh], then dvl [T, dh], then dB [dh, dh].
  template <class T>
  static T* rbias(const AttnLayer<T>& L, int b) {
    return L.a.unit_scratch.data() + static_cast<std::size_t>(b) * L.Tn * L.Tn;
  }
  template <class T>
  static T* dS(const AttnLayer<T>& L, std::size_t bh) {
    return L.a.unit_scratch.data() + bh * L.Tn * L.Tn;
  }
  template <class T>
  static T* dvs(const AttnLayer<T>& L, std::size_t bh) {
    return L.a.unit_scratch.data() + bh * L.Tn * L.dh;
  }
  template <class T>
  static T* dvl(const AttnLayer<T>& L, std::size_t bh) {
    return dvs(L, static_cast<std::size_t>(L.B) * L.H + bh);
  }
  template <class T>
  static T* dB(const AttnLayer<T>& L, std::size_t bh) {
    return dvs(L, 2 * static_cast<std::size_t>(L.B) * L.H) + bh * L.dh * L.dh;
  }
  template <class T>
  static const T* B_of(const AttnLayer<T>& L) {
    return Bilinear ? L.W + L.off().runway_B : nullptr;
  }
  /// The last head's values of sequence b (T x dh, stride ld).
  template <class T>
  static std::int64_t vl_off(const AttnLayer<T>& L, int b) {
    return L.seq(b) + L.ql.v(L.H - 1);
  }

  /// Dense path: tau and the bias of every sequence (the tiled path recomputes them per tile).
  template <class T>
  static void prepare(AttnLayer<T>& L, State<T>& s) {
    if (!L.dense) return;
    const int Tn = L.Tn, dh = L.dh;
    const T c = T(1) / std::sqrt(T(dh));
    const T* Bw = B_of(L);
    const T* qkv = L.a.qkv[static_cast<std::size_t>(L.l)].data();
    s.tau.resize(static_cast<std::size_t>(L.B) * Tn * Tn);
    L.a.unit_scratch.resize(s.tau.size());
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
    for (int b = 0; b < L.B; ++b)
      omp_errors.run([&] {
        CSMap<T> Vl(qkv + vl_off(L, b), Tn, dh, Eigen::OuterStride<>(L.ql.ld()));
        MatR<T> Vs = MatR<T>::Zero(Tn, dh);
        for (int i = 1; i < Tn; ++i) Vs.row(i) = Vl.row(i - 1);
        MapR<T> tau(s.tau.data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
        if (Bilinear)
          tau.noalias() = Vs * CMapR<T>(Bw, dh, dh) * Vl.transpose();
        else
          tau.noalias() = c * Vs * Vl.transpose();
        MapR<T> rb(rbias(L, b), Tn, Tn);
        rb.setZero();
        // beta = 1 - sigmoid(tau) on eligible edges 1 <= m <= i-2: log beta = -softplus(tau)
        for (int i = 3; i < Tn; ++i)
          for (int m = 1; m <= i - 2; ++m) rb(i, m) = -softplus(tau(i, m));
      });
    omp_errors.rethrow();
  }
  template <class T>
  static void dense_scores(const AttnLayer<T>& L, const State<T>& s, const HeadQKV<T>& h, int b, int hd, MatR<T>& Sm) {
    DotUnit::dense_scores(L, s, h, b, hd, Sm);
  }
  /// After the hook and ALiBi: S += log beta of sequence b.
  template <class T>
  static void dense_bias(const AttnLayer<T>& L, const State<T>&, int b, int, MatR<T>& Sm) {
    const int Tn = L.Tn;
    const T* rb = rbias(L, b);
    for (int i = 0; i < Tn; ++i)
      for (int j = 0; j <= i; ++j) Sm(i, j) += rb[static_cast<std::int64_t>(i) * Tn + j];
  }
  template <class T>
  static void dense_scores_backward(const AttnLayer<T>& L, State<T>& s, const HeadQKV<T>& h, const HeadQKVGrads<T>& g,
                                    int b, int hd, const MatR<T>& dS) {
    DotUnit::dense_scores_backward(L, s, h, g, b, hd, dS);
    MapR<T>(RunwayUnit::dS(L, static_cast<std::size_t>(b) * L.H + hd), L.Tn, L.Tn) = dS;
  }
  template <class T, class Pos>
  static auto scores(const AttnLayer<T>& L, State<T>& s, int b, int h, bool grads, const Pos& pos) {
    using Inner = decltype(DotUnit::scores(L, s, b, h, grads, pos));
    RunwayScores<T, Inner> r;
    r.inner = DotUnit::scores(L, s, b, h, grads, pos);
    r.vl = L.a.qkv[static_cast<std::size_t>(L.l)].data() + vl_off(L, b);
    r.ld_vl = L.ql.ld();
    r.B = B_of(L);
    if (grads) {
      const std::size_t bh = static_cast<std::size_t>(b) * L.H + h;
      r.dvs = dvs(L, bh);
      r.dvl = dvl(L, bh);
      if (Bilinear) r.dB = dB(L, bh);
    }
    return r;
  }
  template <class T>
  static void begin_backward(AttnLayer<T>& L, State<T>&) {
    const std::size_t BH = static_cast<std::size_t>(L.B) * L.H, dh = static_cast<std::size_t>(L.dh);
    if (L.dense)
      L.a.unit_scratch.resize(BH * L.Tn * L.Tn);
    else
      L.a.unit_scratch.assign(BH * (2 * L.Tn * dh + (Bilinear ? dh * dh : 0)), T(0));
  }
  template <class T>
  static void finish_backward(AttnLayer<T>& L, State<T>& s) {
    if (L.dense)
      dense_tau_backward(L, s);
    else
      reduce_tiled(L, s);
  }
  /// Dense: d tau = -sigmoid(tau) sum_h dS_h on eligible edges, into d V of the last head and d B.
  template <class T>
  static void dense_tau_backward(AttnLayer<T>& L, State<T>& s) {
    const int Tn = L.Tn, H = L.H, dh = L.dh;
    const T c = T(1) / std::sqrt(T(dh));
    const T* qkv = L.a.qkv[static_cast<std::size_t>(L.l)].data();
    T* dqkv = L.a.dqkv.data();
    std::vector<MatR<T>> dBpart(static_cast<std::size_t>(L.B));
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
    for (int b = 0; b < L.B; ++b)
      omp_errors.run([&] {
        const std::int64_t voff = vl_off(L, b);
        CSMap<T> Vl(qkv + voff, Tn, dh, Eigen::OuterStride<>(L.ql.ld()));
        SMap<T> dVl(dqkv + voff, Tn, dh, Eigen::OuterStride<>(L.ql.ld()));
        CMapR<T> tau(s.tau.data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
        MatR<T> Gt = MatR<T>::Zero(Tn, Tn);  // d loss / d tau
        for (int h = 0; h < H; ++h) {
          CMapR<T> dSh(RunwayUnit::dS(L, static_cast<std::size_t>(b) * H + h), Tn, Tn);
          for (int i = 3; i < Tn; ++i)
            for (int mm = 1; mm <= i - 2; ++mm) Gt(i, mm) += dSh(i, mm);
        }
        for (int i = 3; i < Tn; ++i)
          for (int mm = 1; mm <= i - 2; ++mm) Gt(i, mm) *= -sigmoid(tau(i, mm));
        MatR<T> Vs = MatR<T>::Zero(Tn, dh);
        for (int i = 1; i < Tn; ++i) Vs.row(i) = Vl.row(i - 1);
        MatR<T> dVs;
        if (Bilinear) {
          CMapR<T> Bm(B_of(L), dh, dh);
          dVs = Gt * Vl * Bm.transpose();
          dVl.noalias() += Gt.transpose() * Vs * Bm;
          dBpart[static_cast<std::size_t>(b)] = Vs.transpose() * Gt * Vl;
        } else {
          dVs = c * Gt * Vl;
          dVl.noalias() += c * Gt.transpose() * Vs;
        }
        for (int i = 1; i < Tn; ++i) dVl.row(i - 1) += dVs.row(i);
      });
    omp_errors.rethrow();
    if (Bilinear) {
      MapR<T> dBm(L.G + L.off().runway_B, dh, dh);
      for (int b = 0; b < L.B; ++b) dBm += dBpart[static_cast<std::size_t>(b)];
    }
  }
  /// Tiled: the per-(b, h) gradients into the last head's d V and d B, heads in order.
  template <class T>
  static void reduce_tiled(AttnLayer<T>& L, State<T>&) {
    const int Tn = L.Tn, H = L.H, dh = L.dh;
    T* dqkv = L.a.dqkv.data();
    for (int bh = 0; bh < L.B * H; ++bh) {
      SMap<T> dVl(dqkv + vl_off(L, bh / H), Tn, dh, Eigen::OuterStride<>(L.ql.ld()));
      CMapR<T> gs(dvs(L, static_cast<std::size_t>(bh)), Tn, dh), gl(dvl(L, static_cast<std::size_t>(bh)), Tn, dh);
      dVl += gl;
      for (int i = 1; i < Tn; ++i) dVl.row(i - 1) += gs.row(i);  // row i used v_{i-1}
      if (Bilinear) MapR<T>(L.G + L.off().runway_B, dh, dh) += CMapR<T>(dB(L, static_cast<std::size_t>(bh)), dh, dh);
    }
  }
};

}  // namespace cf::nn::detail
