#pragma once
// Kernels of the Hugging Face family variants (issue 13, cf::nn::ArchVariant), llm.c style like
// cf/nn/ops.hpp: RMSNorm (Llama), exact erf GELU (GPT-NeoX), SwiGLU (Llama). Each has a forward
// and a backward; tests/hf/test_variants.cpp checks every backward against finite differences in
// double.
#include <cmath>
#include <cstdint>

namespace cf::nn {

/// RMSNorm over the last dimension: out = x / sqrt(mean(x^2) + eps) * w (Zhang & Sennrich 2019;
/// Llama's LlamaRMSNorm). out, inp [N, C]; rstd [N] saved for backward; w [C].
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int N, int C, double eps) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<std::int64_t>(n) * C;
    T ss = 0;
    for (int c = 0; c < C; ++c) ss += x[c] * x[c];
    const T s = T(1) / std::sqrt(ss / T(C) + T(eps));
    T* o = out + static_cast<std::int64_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = x[c] * s * w[c];
    rstd[n] = s;
  }
}
/// Backward of rmsnorm_forward: dinp [N, C] +=, dw [C] +=. With y = x s, s = (mean x^2 + eps)^-1/2:
/// dx = s (g - y mean(g . y)), g = w * dout.
template <class T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int N, int C) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<std::int64_t>(n) * C;
    const T* d = dout + static_cast<std::int64_t>(n) * C;
    T* dx = dinp + static_cast<std::int64_t>(n) * C;
    T gy = 0;
    for (int c = 0; c < C; ++c) gy += w[c] * d[c] * x[c] * rstd[n];
    gy /= T(C);
    for (int c = 0; c < C; ++c) dx[c] += rstd[n] * (w[c] * d[c] - x[c] * rstd[n] * gy);
  }
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<std::int64_t>(n) * C;
    const T* d = dout + static_cast<std::int64_t>(n) * C;
    for (int c = 0; c < C; ++c) dw[c] += x[c] * rstd[n] * d[c];
  }
}

/// Exact GELU x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (GPT-NeoX "gelu"). out, inp [n].
template <class T>
void gelu_erf_forward(T* out, const T* inp, std::int64_t n) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = T(0.5) * inp[i] * (T(1) + std::erf(inp[i] / std::sqrt(T(2))));
}
/// Backward of gelu_erf_forward: dinp [n] += (Phi(x) + x phi(x)) dout.
template <class T>
void gelu_erf_backward(T* dinp, const T* inp, const T* dout, std::int64_t n) {
  const T k = T(1) / std::sqrt(T(2) * T(M_PI));
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    dinp[i] += (T(0.5) * (T(1) + std::erf(x / std::sqrt(T(2)))) + x * k * std::exp(T(-0.5) * x * x)) * dout[i];
  }
}

/// SwiGLU: out[n, f] = silu(h[n, f]) * h[n, F + f], silu(g) = g sigmoid(g) (Shazeer 2020; Llama's
/// down(silu(gate(x)) * up(x)) with gate and up stacked in h). h [N, 2F], out [N, F].
template <class T>
void swiglu_forward(T* out, const T* h, std::int64_t N, std::int64_t F) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t f = 0; f < F; ++f) {
      const T g = h[n * 2 * F + f], u = h[n * 2 * F + F + f];
      out[n * F + f] = g / (T(1) + std::exp(-g)) * u;
    }
}
/// Backward of swiglu_forward: dh [N, 2F] += (d gate, d up) from dout [N, F].
template <class T>
void swiglu_backward(T* dh, const T* h, const T* dout, std::int64_t N, std::int64_t F) {
  // omp-nothrow: arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t f = 0; f < F; ++f) {
      const T g = h[n * 2 * F + f], u = h[n * 2 * F + F + f], d = dout[n * F + f];
      const T sg = T(1) / (T(1) + std::exp(-g));
      dh[n * 2 * F + f] += d * u * sg * (T(1) + g * (T(1) - sg));
      dh[n * 2 * F + F + f] += d * g * sg;
    }
}

}  // namespace cf::nn
