#pragma once
// Attention variant unit: ELU+1 linear attention (docs/spec.md §3; issues 12, 28). Not a softmax:
// the unit runs its own paths, the prefix-sum kernels of cf/nn/detail/attention_linear.hpp by
// default and the dense T x T form (the oracle) under AttentionPath::Dense or a score hook (which
// linear layers ignore, as they ignore masks and ALiBi). Saved state: the T row denominators per
// (sequence, head). No parameters. The `linearize` hook runs this unit on any layer. lib/gpu's
// tiled kernels do not compute it; its device trainer runs it with direct kernels of its own.
// Internal to lib/nn.
#include <cstdint>
#include <vector>

#include "cf/nn/detail/attention_linear.hpp"
#include "cf/nn/detail/variants/unit.hpp"

namespace cf::nn::detail {

/// Dense oracle of one linear head: A = phi(Q) phi(K)^T, rows normalised over j <= i (P, T x T,
/// zero above the diagonal), Y = P V; rowsum: the T denominators.
template <class T>
void linear_dense_forward(int Tn, const HeadQKV<T>& h, SMap<T>& Y, T* P, T* rowsum) {
  MatR<T> Pq = h.Q().unaryExpr([](T x) { return elu1(x); });
  MatR<T> Pk = h.K().unaryExpr([](T x) { return elu1(x); });
  MapR<T> A(P, Tn, Tn);
  A.noalias() = Pq * Pk.transpose();
  for (int i = 0; i < Tn; ++i) {
    T sum = 0;
    for (int j = 0; j <= i; ++j) sum += A(i, j);
    rowsum[i] = sum;
    for (int j = 0; j <= i; ++j) A(i, j) /= sum;
    for (int j = i + 1; j < Tn; ++j) A(i, j) = 0;
  }
  Y.noalias() = A * h.V();
}
/// Backward of linear_dense_forward: dV += P^T dY; P = A / rowsum gives dA = (dP - <P, dP>_row) /
/// rowsum, then d phi(Q) = dA phi(K), d phi(K) = dA^T phi(Q) through phi'.
template <class T>
void linear_dense_backward(int Tn, const HeadQKV<T>& h, const HeadQKVGrads<T>& g, const CSMap<T>& dY, const T* P,
                           const T* rowsum) {
  auto Q = h.Q();
  auto K = h.K();
  thread_local MatR<T> dP;
  dP.resize(Tn, Tn);
  dP.noalias() = dY * h.V().transpose();
  CMapR<T> Pb(P, Tn, Tn);
  g.dV(h).noalias() += Pb.transpose() * dY;
  MatR<T> dA = MatR<T>::Zero(Tn, Tn);
  for (int i = 0; i < Tn; ++i) {
    T dot = 0;
    for (int j = 0; j <= i; ++j) dot += Pb(i, j) * dP(i, j);
    for (int j = 0; j <= i; ++j) dA(i, j) = (dP(i, j) - dot) / rowsum[i];
  }
  MatR<T> Pq = Q.unaryExpr([](T x) { return elu1(x); });
  MatR<T> Pk = K.unaryExpr([](T x) { return elu1(x); });
  MatR<T> dPq = dA * Pk, dPk = dA.transpose() * Pq;
  g.dQ(h) += dPq.cwiseProduct(MatR<T>(Q.unaryExpr([](T x) { return delu1(x); })));
  g.dK(h) += dPk.cwiseProduct(MatR<T>(K.unaryExpr([](T x) { return delu1(x); })));
}

struct LinearUnit {
  static constexpr GpuHook gpu{false, true, GpuForm::Linear};
  static std::vector<VariantParam> params(const ModelConfig&, int) { return {}; }
  template <class T>
  struct State {
    std::vector<T> den;  ///< [B, H, T] row denominators
    std::size_t bytes() const { return den.size() * sizeof(T); }
  };

  /// qkv -> atty; the prefix-sum kernel (parallel over (b, h), no T x T buffer) or the dense form
  /// (probabilities in a.P[l]).
  template <class T>
  static void forward(AttnLayer<T>& L) {
    Activations<T>& a = L.a;
    const int l = L.l, Tn = L.Tn, H = L.H;
    State<T>& s = unit_state<LinearUnit>(L);
    s.den.assign(static_cast<std::size_t>(L.B) * H * Tn, T(0));
    a.nbranch[l] = 1;
    const std::size_t TT = static_cast<std::size_t>(Tn) * Tn;
    if (L.dense) {
      a.ensure_P(l, static_cast<std::size_t>(L.B) * H * TT);
      a.lse[l].assign(static_cast<std::size_t>(L.B) * H * Tn, T(0));
    } else {
      a.lse[l].clear();  // no softmax row statistics
      a.obr[l].clear();
    }
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
    for (int bh = 0; bh < L.B * H; ++bh)
      omp_errors.run([&] {
        const int b = bh / H, h = bh % H;
        const HeadQKV<T> hq = L.head(b, h);
        T* y = a.atty[l].data() + L.out(b, h);
        T* den = s.den.data() + static_cast<std::size_t>(bh) * Tn;
        if (L.dense) {
          SMap<T> Y(y, Tn, L.dh, Eigen::OuterStride<>(L.HD()));
          linear_dense_forward<T>(Tn, hq, Y, a.P[l].data() + static_cast<std::size_t>(bh) * TT, den);
        } else {
          linear_head_forward<T>(Tn, L.dh, hq.q, hq.k, hq.v, hq.ld, y, L.HD(), den);
        }
      });
    omp_errors.rethrow();
  }
  /// datty -> dqkv (+=); one task per (sequence, key/value head), as in the other backward passes.
  template <class T>
  static void backward(AttnLayer<T>& L) {
    Activations<T>& a = L.a;
    const int l = L.l, Tn = L.Tn, H = L.H;
    const State<T>& s = unit_state<LinearUnit>(L);
    const std::size_t TT = static_cast<std::size_t>(Tn) * Tn;
    for_each_kv_group(L.B, H, L.ql.KV, [&](int b, int h) {
      const std::size_t bh = static_cast<std::size_t>(b) * H + h;
      const HeadQKV<T> hq = L.head(b, h);
      const HeadQKVGrads<T> g = L.grads(b, h);
      const std::int64_t yo = L.out(b, h);
      const T* den = s.den.data() + bh * Tn;
      if (L.dense)
        linear_dense_backward<T>(Tn, hq, g, CSMap<T>(a.datty.data() + yo, Tn, L.dh, Eigen::OuterStride<>(L.HD())),
                                 a.P[l].data() + bh * TT, den);
      else
        linear_head_backward<T>(Tn, L.dh, hq.q, hq.k, hq.v, hq.ld, a.atty[l].data() + yo, a.datty.data() + yo, L.HD(),
                                den, g.dq, g.dk, g.dv);
    });
  }
  /// Capture: the dense path's a.P[l], or P_ij = phi(q_i).phi(k_j) / den_i recomputed.
  template <class T>
  static void probs(AttnLayer<T>& L, int b, int h, float* dst) {
    const std::size_t TT = static_cast<std::size_t>(L.Tn) * L.Tn, bh = static_cast<std::size_t>(b) * L.H + h;
    if (L.dense) {
      const T* Pb = L.a.P[L.l].data() + bh * TT;
      for (std::size_t i = 0; i < TT; ++i) dst[i] = static_cast<float>(Pb[i]);
      return;
    }
    const HeadQKV<T> hq = L.head(b, h);
    linear_probs_head(L.Tn, L.dh, hq.q, hq.k, hq.ld, unit_state<LinearUnit>(L).den.data() + bh * L.Tn, dst);
  }
};

}  // namespace cf::nn::detail
