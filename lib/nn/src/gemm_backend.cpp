#include "cf/nn/gemm_backend.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cf/core/error.hpp"
#include "cf/nn/context.hpp"

extern "C" char* openblas_get_corename(void);
extern "C" int openblas_get_num_threads(void);
extern "C" void openblas_set_num_threads(int num_threads);

namespace cf::nn {
namespace {

// OpenBLAS x86-64 core names whose SGEMM kernels use AVX2 or AVX-512 (OpenBLAS
// driver/others/dynamic.c, corename[]). Every other name is an SSE-era or unknown fallback.
bool openblas_core_is_modern(const std::string& core) {
  for (const char* c : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"})
    if (core == c) return true;
  return false;
}

}  // namespace

GemmBackend gemm_backend_from_environment(std::string& why) {
  const std::string core = openblas_get_corename() ? openblas_get_corename() : "unknown";
  if (const char* env = std::getenv("CF_GEMM"); env && *env) {
    const std::string v = env;
    const auto backend = kGemmBackends.find(v);
    if (!backend)
      throw cf::InvalidArgument("environment variable CF_GEMM=" + v + ": expected '" + kGemmBackends.list("' or '") +
                                "'");
    why = v + " (CF_GEMM=" + v + (*backend == GemmBackend::eigen ? "; OpenBLAS core " : "; core ") + core + ")";
    return *backend;
  }
#if defined(__AVX2__)
  if (!openblas_core_is_modern(core)) {
    why = "eigen (OpenBLAS core " + core + " has no AVX2 kernels)";
    return GemmBackend::eigen;
  }
#endif
  why = "openblas (core " + core + ")";
  return GemmBackend::openblas;
}

GemmBackend gemm_backend() { return context().gemm; }
std::string gemm_backend_description() { return context().gemm_why; }

void sgemm_omp(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc) {
  const bool nested = omp_in_parallel() != 0;
  // one pool: OpenMP's (see the header); set outside parallel regions only (the setting is global)
  if (!nested && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  // below about 2^21 multiply-adds a fork costs more than it saves
  const int nt = nested ? 1 : omp_get_max_threads();
  if (nt <= 1 || static_cast<std::int64_t>(M) * N * K < (std::int64_t(1) << 21)) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool by_rows = M >= N;
  const int extent = by_rows ? M : N;
  // blocks in whole multiples of 64 rows or columns (the kernels' register blocks divide 64)
  const int units = (extent + 63) / 64, parts = std::min(nt, units);
  // omp-nothrow: cblas calls on raw pointers (no allocation in this code, no throwing call)
#pragma omp parallel num_threads(parts)
  {
    const int id = omp_get_thread_num(), np = omp_get_num_threads();
    const int lo = std::min(extent, static_cast<int>(static_cast<std::int64_t>(units) * id / np) * 64);
    const int hi = std::min(extent, static_cast<int>(static_cast<std::int64_t>(units) * (id + 1) / np) * 64);
    if (hi > lo) {
      if (by_rows) {  // C rows lo..hi: op(A) rows lo..hi
        const float* a = trans_a ? A + lo : A + static_cast<std::int64_t>(lo) * lda;
        cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, N, K, alpha, a, lda, B, ldb, beta,
                    C + static_cast<std::int64_t>(lo) * ldc, ldc);
      } else {  // C columns lo..hi: op(B) columns lo..hi
        const float* b = trans_b ? B + static_cast<std::int64_t>(lo) * ldb : B + lo;
        cblas_sgemm(CblasRowMajor, ta, tb, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
      }
    }
  }
}

}  // namespace cf::nn
