#pragma once
// Elementwise functors and scan operators shared by the Thrust paths (one source: the same
// functor runs under thrust::omp::par in a .cpp and thrust::cuda::par in a .cu; issue 14).
// Each is the twin of a CPU op of lib/nn or lib/rollout, named after it.
#include <cmath>

#if defined(__CUDACC__)
#define CF_HD __host__ __device__
#else
#define CF_HD
#endif

namespace cf::gpu {

/// GELU (tanh approximation, GPT-2), twin of cf::nn::gelu_forward.
struct GeluForward {
  CF_HD float operator()(float x) const {
    const float s = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
  }
};

/// dinp += gelu'(x) dout, twin of cf::nn::gelu_backward: applied to (x, dout, dinp) tuples via
/// operator()(x, dout) returning the increment.
struct GeluBackward {
  CF_HD float operator()(float x, float d) const {
    const float s = 0.7978845608028654f;
    const float th = tanhf(s * (x + 0.044715f * x * x * x));
    return (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * s * (1.0f + 3.0f * 0.044715f * x * x)) * d;
  }
};

/// Exact GELU x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (GPT-NeoX), twin of cf::nn::gelu_erf_forward.
struct GeluErfForward {
  CF_HD float operator()(float x) const { return 0.5f * x * (1.0f + erff(x / 1.4142135623730951f)); }
};

/// d gelu_erf(x) = (Phi(x) + x phi(x)) dout, twin of cf::nn::gelu_erf_backward (the increment, as
/// GeluBackward).
struct GeluErfBackward {
  CF_HD float operator()(float x, float d) const {
    const float k = 0.3989422804014327f;  // 1 / sqrt(2 pi)
    return (0.5f * (1.0f + erff(x / 1.4142135623730951f)) + x * k * expf(-0.5f * x * x)) * d;
  }
};

/// One AdamW update of one parameter (twin of cf::nn::adamw_step's inner loop): bias
/// corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t; wd = 0 for tensors without decay.
struct AdamWUpdate {
  float lr, b1, b2, bc1, bc2, eps, wd;
  /// Returns the new parameter; m and v are updated in place.
  CF_HD float operator()(float p, float g, float& m, float& v) const {
    m = b1 * m + (1.f - b1) * g;
    v = b2 * v + (1.f - b2) * g * g;
    const float mhat = m / bc1, vhat = v / bc2;
    return p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
  }
};

/// An affine map x -> a x + c; the pairs compose under Compose (applied left to right:
/// Compose(f, g) = g after f), an associative operator, so first-order linear recurrences
/// S_j = a_j S_{j-1} + c_j become inclusive scans (the structured rollout, lib/rollout).
struct Affine {
  double a = 1, c = 0;
};
struct AffineCompose {
  CF_HD Affine operator()(const Affine& f, const Affine& g) const { return Affine{f.a * g.a, g.a * f.c + g.c}; }
};

}  // namespace cf::gpu
