#pragma once
// One attention head of one sequence, dense T x T, as head-level tests and benchmarks call it (the
// GPU kernels' CPU comparisons, the linear kernel's oracle): a HeadSpec names the variant's dense
// form, composed from the units' own (variants/dot.hpp, sd.hpp, linear.hpp) around the shared
// masked softmax (attention_dense.hpp). The model reaches its variants through the units
// (cf/nn/attention_variant.hpp), not through this header. Internal to lib/nn.
#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <vector>

#include "cf/nn/detail/attention_dense.hpp"
#include "cf/nn/detail/variants/dot.hpp"
#include "cf/nn/detail/variants/linear.hpp"
#include "cf/nn/detail/variants/sd.hpp"

namespace cf::nn::detail {

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
HeadQKV<T> head_of(int Tn, int dh, const T* q, const T* k, const T* v, std::int64_t ld) {
  HeadQKV<T> h;
  h.Tn = Tn;
  h.dh = dh;
  h.q = q;
  h.k = k;
  h.v = v;
  h.ld = ld;
  return h;
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
  const HeadQKV<T> h = head_of(Tn, dh, q, k, v, ld);
  SMap<T> Y(y, Tn, dh, Eigen::OuterStride<>(ldy));
  if (s.linear) {
    linear_dense_forward(Tn, h, Y, P, rowsum);
    return;
  }
  thread_local MatR<T> S;
  S.resize(Tn, Tn);
  if (s.sd)
    sd_dense_scores(h, T(s.scale), damp, S);
  else
    dot_dense_scores(h, T(s.scale), S);
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
  dense_softmax_forward<T>(Tn, S, s.masks, h.V(), Y, P, lse);
}

/// Backward of attention_head_forward. dq, dk, dv (stride ld) and the gradient w.r.t. the logits
/// dS_out (T x T, null = not needed; written, not accumulated) receive the gradient of dy (stride
/// ldy); dq/dk/dv are accumulated (+=). ddamp (sd only): T values written with -dS_ii.
template <class T>
void attention_head_backward(const HeadSpec& s, int Tn, int dh, const T* q, const T* k, const T* v, std::int64_t ld,
                             T* dq, T* dk, T* dv, const T* dy, std::int64_t ldy, const T* P, const T* rowsum, T* dS_out,
                             T* ddamp) {
  const HeadQKV<T> h = head_of(Tn, dh, q, k, v, ld);
  HeadQKVGrads<T> g;
  g.dq = dq;
  g.dk = dk;
  g.dv = dv;
  g.ld = ld;
  CSMap<T> dY(dy, Tn, dh, Eigen::OuterStride<>(ldy));
  if (s.linear) {
    linear_dense_backward(Tn, h, g, dY, P, rowsum);
    return;
  }
  thread_local MatR<T> dP, dS;
  SMap<T> dV = g.dV(h);
  dense_softmax_backward<T>(Tn, s.masks.size(), P, h.V(), dY, dV, dP, dS);
  if (s.sd) {
    sd_dense_backward(h, g, T(s.scale), dS);
    for (int i = 0; i < Tn; ++i) ddamp[i] = -dS(i, i);
  } else {
    dot_dense_backward(h, g, T(s.scale), dS);
  }
  if (dS_out) MapR<T>(dS_out, Tn, Tn) = dS;
}

}  // namespace cf::nn::detail
