// Lazy binding of the CUDA math libraries (cf/gpu/detail/cuda_libraries.hpp): this file defines
// the cuBLAS, cuBLASLt and cuSOLVER functions lib/gpu calls, each forwarding to the real library, which is
// dlopen-ed on the first call. The prototypes are the CUDA headers' own (a definition that does
// not match its declaration does not compile). Compiled with hidden visibility, so the
// definitions bind the calls of this binary only and never interpose on the real libraries.
// The sonames and the fallback paths are the libraries the build found (lib/gpu/CMakeLists.txt).
#include "cf/gpu/detail/cuda_libraries.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cusolverDn.h>
#include <dlfcn.h>

#include "cf/core/error.hpp"

namespace cf::gpu::cuda {

void* load_library(const std::string& soname, const std::string& fallback_path) {
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string first = dlerror();
  if (void* h = dlopen(fallback_path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  throw Error(str("cannot load the CUDA library ", soname, " (", first, "; ", fallback_path, ": ", dlerror(),
                  "): --device cuda needs it; use --device cpu"));
}

void* library_symbol(void* library, const std::string& soname, const char* name) {
  dlerror();
  void* f = dlsym(library, name);
  if (!f) throw Error(str("the CUDA library ", soname, " has no function ", name, " (", dlerror(), ")"));
  return f;
}

namespace {

struct Library {
  const char* soname;
  const char* fallback_path;
};
constexpr Library kCublas{CF_CUBLAS_SONAME, CF_CUBLAS_PATH};
constexpr Library kCublasLt{CF_CUBLASLT_SONAME, CF_CUBLASLT_PATH};
constexpr Library kCusolver{CF_CUSOLVER_SONAME, CF_CUSOLVER_PATH};

/// The handle of L, loaded on the first call (a failed load throws and is retried next time).
template <const Library& L>
void* handle() {
  static void* const h = load_library(L.soname, L.fallback_path);
  return h;
}

}  // namespace

// The real `name` of library L, resolved once; its type is the header's declaration of `name`.
#define CF_REAL(L, name)                                                                                      \
  ([] {                                                                                                       \
    static const auto fn = reinterpret_cast<decltype(&::name)>(library_symbol(handle<L>(), L.soname, #name)); \
    return fn;                                                                                                \
  }())

std::vector<std::pair<std::string, std::string>> lazily_bound_functions() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* f : {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2", "cublasSgemm_v2",
                        "cublasSgemmStridedBatched", "cublasGemmEx"})
    out.emplace_back(kCublas.soname, f);
  for (const char* f : {"cublasLtCreate", "cublasLtDestroy", "cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy",
                        "cublasLtMatmulDescSetAttribute", "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy",
                        "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy",
                        "cublasLtMatmulPreferenceSetAttribute", "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul"})
    out.emplace_back(kCublasLt.soname, f);
  for (const char* f : {"cusolverDnCreate", "cusolverDnDestroy", "cusolverDnSetStream", "cusolverDnSsyevd_bufferSize",
                        "cusolverDnSsyevd"})
    out.emplace_back(kCusolver.soname, f);
  return out;
}

}  // namespace cf::gpu::cuda

using cf::gpu::cuda::handle;
using cf::gpu::cuda::kCublas;
using cf::gpu::cuda::kCublasLt;
using cf::gpu::cuda::kCusolver;
using cf::gpu::cuda::library_symbol;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) { return CF_REAL(kCublas, cublasCreate_v2)(h); }

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return CF_REAL(kCublas, cublasDestroy_v2)(h); }

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  return CF_REAL(kCublas, cublasSetStream_v2)(h, s);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  return CF_REAL(kCublas, cublasSgemm_v2)(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, long long int sa,
                                         const float* B, int ldb, long long int sb, const float* beta, float* C,
                                         int ldc, long long int sc, int batch) {
  return CF_REAL(kCublas, cublasSgemmStridedBatched)(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                                     sc, batch);
}

// cublas_api.h also declares an inline C++ overload of cublasGemmEx (a cudaDataType compute type),
// so CF_REAL's decltype(&::name) is ambiguous: the type is spelled out (the definition below must
// still match the header's extern "C" declaration, or it does not compile)
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType at, int lda, const void* B, cudaDataType bt,
                            int ldb, const void* beta, void* C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  static const auto fn = reinterpret_cast<GemmExFn>(library_symbol(handle<kCublas>(), kCublas.soname, "cublasGemmEx"));
  return fn(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { return CF_REAL(kCublasLt, cublasLtCreate)(h); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { return CF_REAL(kCublasLt, cublasLtDestroy)(h); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
  return CF_REAL(kCublasLt, cublasLtMatmulDescCreate)(d, compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  return CF_REAL(kCublasLt, cublasLtMatmulDescDestroy)(d);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  return CF_REAL(kCublasLt, cublasLtMatmulDescSetAttribute)(d, attr, buf, bytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  return CF_REAL(kCublasLt, cublasLtMatrixLayoutCreate)(l, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  return CF_REAL(kCublasLt, cublasLtMatrixLayoutDestroy)(l);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  return CF_REAL(kCublasLt, cublasLtMatmulPreferenceCreate)(p);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  return CF_REAL(kCublasLt, cublasLtMatmulPreferenceDestroy)(p);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  return CF_REAL(kCublasLt, cublasLtMatmulPreferenceSetAttribute)(p, attr, buf, bytes);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  return CF_REAL(kCublasLt, cublasLtMatmulAlgoGetHeuristic)(h, d, a, b, c, dl, pref, requested, results, returned);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  return CF_REAL(kCublasLt, cublasLtMatmul)(h, d, alpha, A, a, B, b, beta, C, c, D, dl, algo, workspace,
                                            workspace_bytes, stream);
}

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t* h) { return CF_REAL(kCusolver, cusolverDnCreate)(h); }

cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t h) { return CF_REAL(kCusolver, cusolverDnDestroy)(h); }

cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t h, cudaStream_t s) {
  return CF_REAL(kCusolver, cusolverDnSetStream)(h, s);
}

cusolverStatus_t cusolverDnSsyevd_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n,
                                             const float* A, int lda, const float* W, int* lwork) {
  return CF_REAL(kCusolver, cusolverDnSsyevd_bufferSize)(h, jobz, uplo, n, A, lda, W, lwork);
}

cusolverStatus_t cusolverDnSsyevd(cusolverDnHandle_t h, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, float* A,
                                  int lda, float* W, float* work, int lwork, int* info) {
  return CF_REAL(kCusolver, cusolverDnSsyevd)(h, jobz, uplo, n, A, lda, W, work, lwork, info);
}

}  // extern "C"
