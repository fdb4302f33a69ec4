// emu::gemm_epilogue (cf/gpu/gemm_epilogue.hpp): cuBLASLt's fused epilogues on the CPU, as the
// emulated device trainer runs them: OpenBLAS SGEMM, then the epilogue functors over the result,
// the functors the CUDA build's fallback runs when cuBLASLt refuses a shape.
#include <cblas.h>

#include "cf/core/error.hpp"
#include "cf/gpu/gemm_epilogue.hpp"

namespace cf::gpu::emu {

namespace {

void check_args(float beta, const GemmEpilogueArgs& e) {
  using K = GemmEpilogue;
  require(e.kind != K::Bias || e.bias, "gemm_epilogue: the Bias epilogue needs a bias vector");
  require((e.kind != K::GeluAuxBias && e.kind != K::DGelu) || (e.aux && beta == 0.0f),
          "gemm_epilogue: the GELU epilogues need an aux matrix and beta 0");
  require(e.kind != K::BiasGrad || e.bias_grad, "gemm_epilogue: the BiasGrad epilogue needs a bias_grad vector");
}

/// f(i) for every element index i in [0, count), rows in parallel (each writes its own elements).
template <class F>
void for_each_index(long long count, const F& f) {
  // omp-nothrow: the epilogue functors are arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < count; ++i) f(i);
}

}  // namespace

void gemm_epilogue(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                   float beta, float* C, int ldc, const GemmEpilogueArgs& e) {
  check_args(beta, e);
  if (m == 0 || n == 0) return;
  using K = GemmEpilogue;
  // the GELU epilogue keeps R (+ bias) in aux and writes its GELU to C
  float* r = e.kind == K::GeluAuxBias ? e.aux : C;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B,
              ldb, beta, r, ldc);
  const long long mn = static_cast<long long>(m) * n;
  if (e.kind == K::Bias) for_each_index(mn, detail::EpilogueBias{C, e.bias, n, ldc});
  if (e.kind == K::GeluAuxBias) for_each_index(mn, detail::EpilogueGeluAux{C, e.aux, e.bias, n, ldc});
  if (e.kind == K::DGelu) for_each_index(mn, detail::EpilogueDGelu{C, e.aux, n, ldc});
  if (e.kind == K::BiasGrad) for_each_index(m, detail::EpilogueBiasGrad<float>{e.bias_grad, A, k, lda, ta});
}

}  // namespace cf::gpu::emu
