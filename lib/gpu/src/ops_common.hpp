#pragma once
// Functors used only by ops_impl.inc (Thrust zip adaptors of the public functors).
#include <thrust/tuple.h>

#include "cf/gpu/functors.hpp"

namespace cf::gpu::detail {

struct NonNegative {
  CF_HD bool operator()(std::int32_t x) const { return x >= 0; }
};

struct GeluBackwardAccumulate {
  template <class Tuple>
  CF_HD float operator()(const Tuple& t) const {
    return thrust::get<2>(t) + GeluBackward()(thrust::get<0>(t), thrust::get<1>(t));
  }
};

struct AdamWApply {
  AdamWUpdate u;
  template <class Tuple>
  CF_HD void operator()(Tuple t) const {
    float m = thrust::get<2>(t), v = thrust::get<3>(t);
    thrust::get<0>(t) = u(thrust::get<0>(t), thrust::get<1>(t), m, v);
    thrust::get<2>(t) = m;
    thrust::get<3>(t) = v;
  }
};

}  // namespace cf::gpu::detail
