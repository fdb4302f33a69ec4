#pragma once
// What every tiled-attention variant unit sees (issue 12): the head's Q, K, V and the gradient
// outputs dQ, dK, dV. A variant is a score policy type P<T> with
//
//   struct Scratch;  // per-tile values the logits leave for the backward (e.g. runway tau)
//   void logits(const HeadQKV<T>&, int i0, int ni, int j0, int nj, MatR<T>& S, Scratch&) const;
//   void backward(const HeadQKV<T>&, const HeadQKVGrads<T>&, int i0, int ni, int j0, int nj,
//                 MatR<T>& dS, const Scratch&) const;
//
// logits writes the ni x nj logits of query rows [i0, i0+ni) and keys [j0, j0+nj) before masking;
// backward gets dS = d loss / d logits of the same tile (zero outside the mask; it may overwrite
// it) and accumulates dQ, dK and the variant's own gradients (through pointers it holds). The
// shared tile loop (cf/nn/detail/attention_tiled.hpp) is a template over the policy, so there is no
// per-score virtual call. Internal to lib/nn.
#include <Eigen/Core>
#include <cstdint>

#include "cf/nn/detail/attention.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

/// One head of one sequence: q, k, v (T x dh, row stride ld).
template <class T>
struct HeadQKV {
  int Tn = 0, dh = 0;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t ld = 0;
  CSMap<T> Q() const { return CSMap<T>(q, Tn, dh, Eigen::OuterStride<>(ld)); }
  CSMap<T> K() const { return CSMap<T>(k, Tn, dh, Eigen::OuterStride<>(ld)); }
  CSMap<T> V() const { return CSMap<T>(v, Tn, dh, Eigen::OuterStride<>(ld)); }
};

/// Gradient outputs dq, dk, dv of one head (T x dh, row stride ld, accumulated +=).
template <class T>
struct HeadQKVGrads {
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  std::int64_t ld = 0;
  SMap<T> dQ(const HeadQKV<T>& h) const { return SMap<T>(dq, h.Tn, h.dh, Eigen::OuterStride<>(ld)); }
  SMap<T> dK(const HeadQKV<T>& h) const { return SMap<T>(dk, h.Tn, h.dh, Eigen::OuterStride<>(ld)); }
  SMap<T> dV(const HeadQKV<T>& h) const { return SMap<T>(dv, h.Tn, h.dh, Eigen::OuterStride<>(ld)); }
};

}  // namespace cf::nn::detail
