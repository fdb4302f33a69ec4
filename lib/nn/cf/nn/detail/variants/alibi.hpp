#pragma once
// Tiled-attention unit: ALiBi position bias (Press et al. 2022; issue 12, one unit), a wrapper over
// any score policy: logits of the inner policy minus slope (i - j); no parameters, so the backward
// is the inner policy's. Internal to lib/nn.
#include "cf/nn/detail/variants/score_policy.hpp"

namespace cf::nn::detail {

/// Inner's scores minus slope (i - j) (slope 2^(-8(h+1)/H) in the trainer).
template <class Inner>
struct Alibi {
  using Scratch = typename Inner::Scratch;
  static constexpr bool kTransposedKeys = Inner::kTransposedKeys;
  Inner inner;
  double slope = 0;

  template <class T>
  void logits(const HeadQKV<T>& h, int i0, int ni, int j0, int nj, TileMat<T>& S, Scratch& s) const {
    inner.logits(h, i0, ni, j0, nj, S, s);
    const T a = T(slope);
    for (int r = 0; r < ni; ++r)
      for (int c = 0; c < nj; ++c) S(r, c) -= a * T(i0 + r - (j0 + c));
  }
  template <class T>
  void backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int i0, int ni, int j0, int nj, TileMat<T>& dS,
                const Scratch& s) const {
    inner.backward(h, g, i0, ni, j0, nj, dS, s);
  }
};

}  // namespace cf::nn::detail
