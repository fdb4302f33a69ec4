// cuda::gemm_epilogue (cf/gpu/gemm_epilogue.hpp): cuBLASLt matmuls with fused epilogues on the
// context's stream. The handle and one workspace live in the context's CUDA resources (made on the
// first call: no per-step allocation); a plan (operation descriptor, layouts, the heuristic's
// algorithm, or the heuristic's refusal) is made once per shape, epilogue and pointer alignment
// and reused, only the epilogue's pointers are set per call. cuBLASLt is bound lazily like cuBLAS
// (cuda_libraries.cpp).
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>

#include "cf/core/error.hpp"
#include "cf/gpu/device_stats.hpp"
#include "cf/gpu/gemm_epilogue.hpp"
#include "cuda_resources.hpp"

namespace cf::gpu::cuda {

namespace {

/// The workspace cuBLASLt may use (its documentation's recommendation for Hopper).
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

void lt_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw Error(str("cuBLASLt: ", what, " failed with status ", static_cast<int>(st)));
}

/// The largest power of two up to 256 that divides the address (256 for a null pointer): the
/// heuristic's minimum-alignment preferences (default 256; weights sit at any float offset).
std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 4 && a % al != 0) al /= 2;
  return al;
}

cublasLtEpilogue_t lt_epilogue(const GemmEpilogueArgs& e) {
  switch (e.kind) {
    case GemmEpilogue::Bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::GeluAuxBias:
      return e.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmEpilogue::DGelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case GemmEpilogue::BiasGrad:  // row-major A is cuBLASLt's column-major B
      return CUBLASLT_EPILOGUE_BGRADB;
    case GemmEpilogue::None:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// The vector cuBLASLt's BIAS_POINTER names: the bias read, or the bias gradient written.
const void* bias_pointer(const GemmEpilogueArgs& e) {
  return e.kind == GemmEpilogue::BiasGrad ? static_cast<const void*>(e.bias_grad) : e.bias;
}

/// What a plan depends on: precision, transposes, shape, leading dimensions, epilogue, alignments.
using PlanKey = std::array<long long, 15>;

/// One shape's descriptors and algorithm (usable == false: the heuristic found none).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

void set_pointers(const Plan& p, const GemmEpilogueArgs& e) {
  const void* bias = bias_pointer(e);
  if (bias)
    lt_check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
             "set the bias pointer");
  if (e.aux) {
    void* aux = e.aux;
    lt_check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux),
             "set the aux pointer");
  }
}

}  // namespace

struct LtState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  ~LtState() {
    plans.clear();
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }
};

void LtStateDelete::operator()(LtState* s) const { delete s; }

namespace {

LtState& lt_state(Context& ctx) {
  CudaResources& r = cuda_resources(ctx);
  std::call_once(r.lt_once, [&] {
    auto s = std::make_unique<LtState>();
    lt_check(cublasLtCreate(&s->handle), "cublasLtCreate");
    const cudaError_t err = cudaMalloc(&s->workspace, kWorkspaceBytes);
    if (err != cudaSuccess) throw Error(str("cuBLASLt workspace: cudaMalloc failed: ", cudaGetErrorString(err)));
    count_allocation(Backend::Cuda, kWorkspaceBytes);
    r.lt.reset(s.release());
  });
  return *r.lt;
}

/// A column-major layout of `rows` x `cols` with leading dimension ld.
cublasLtMatrixLayout_t layout(cudaDataType type, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l = nullptr;
  lt_check(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate");
  return l;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, T value, const char* what) {
  lt_check(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof value), what);
}

/// The plan of a row-major call, as cuBLASLt's column-major C^T = op(B)^T op(A)^T: its A is our B
/// (transposed when tb), its B our A (transposed when ta), D is n x m with leading dimension ldc.
std::unique_ptr<Plan> make_plan(LtState& s, Precision in, bool ta, bool tb, int m, int n, int k, const void* A, int lda,
                                const void* B, int ldb, float* C, int ldc, const GemmEpilogueArgs& e) {
  auto p = std::make_unique<Plan>();
  const cudaDataType io = in == Precision::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = in == Precision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  lt_check(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, tb ? CUBLAS_OP_T : CUBLAS_OP_N, "set TRANSA");
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, ta ? CUBLAS_OP_T : CUBLAS_OP_N, "set TRANSB");
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(e), "set the epilogue");
  if (e.aux) set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(ldc), "set the aux ld");
  set_pointers(*p, e);  // the heuristic reads their alignment
  p->a = tb ? layout(io, k, n, ldb) : layout(io, n, k, ldb);
  p->b = ta ? layout(io, m, k, lda) : layout(io, k, m, lda);
  p->c = layout(CUDA_R_32F, n, m, ldc);

  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                        cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      pref_owner(pref, cublasLtMatmulPreferenceDestroy);
  const std::uint64_t ws = kWorkspaceBytes;
  lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
           "set the workspace size");
  const std::uint32_t al[4] = {alignment(B), alignment(A), alignment(C), alignment(C)};
  const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &al[i], sizeof al[i]), "set an alignment");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(s.handle, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  // NOT_SUPPORTED (or no result): cuBLASLt has no kernel for this call; the caller falls back
  p->usable = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) lt_check(st, "cublasLtMatmulAlgoGetHeuristic");
  if (p->usable) p->algo = result.algo;
  return p;
}

}  // namespace

bool gemm_epilogue(Context& ctx, Precision in, bool ta, bool tb, int m, int n, int k, float alpha, const void* A,
                   int lda, const void* B, int ldb, float beta, float* C, int ldc, const GemmEpilogueArgs& e) {
  const bool gelu = e.kind == GemmEpilogue::GeluAuxBias || e.kind == GemmEpilogue::DGelu;
  require(!gelu || (e.aux && beta == 0.0f), "gemm_epilogue: the GELU epilogues need an aux matrix and beta 0");
  require(e.kind != GemmEpilogue::Bias || e.bias, "gemm_epilogue: the Bias epilogue needs a bias vector");
  require(e.kind != GemmEpilogue::BiasGrad || e.bias_grad, "gemm_epilogue: the BiasGrad epilogue needs bias_grad");
  if (m == 0 || n == 0 || k == 0) return false;  // nothing cuBLASLt should see; the plain path handles it
  if (gelu && ldc % 8 != 0) return false;        // cuBLASLt's rule for the GELU aux leading dimension
  LtState& s = lt_state(ctx);
  const PlanKey key{static_cast<long long>(in),
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldc,
                    static_cast<long long>(lt_epilogue(e)),
                    alignment(A),
                    alignment(B),
                    alignment(C),
                    alignment(bias_pointer(e)),
                    alignment(e.aux)};
  std::unique_ptr<Plan>& plan = s.plans[key];
  if (!plan) plan = make_plan(s, in, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, e);
  if (!plan->usable) return false;
  set_pointers(*plan, e);
  lt_check(cublasLtMatmul(s.handle, plan->desc, &alpha, B, plan->a, A, plan->b, &beta, C, plan->c, C, plan->c,
                          &plan->algo, s.workspace, kWorkspaceBytes, kStream),
           "cublasLtMatmul");
  return true;
}

}  // namespace cf::gpu::cuda
