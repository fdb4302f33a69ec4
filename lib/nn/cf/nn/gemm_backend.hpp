#pragma once
// Which library multiplies the trainer's float matrices (linear layers, LM head).
//
// Why a choice: Debian's OpenBLAS (0.3.21) picks its kernels from the CPU model number. On a CPU it
// does not know (seen here: Intel family 6 model 207, an AVX-512 machine) it falls back to its
// generic "Prescott" SSE3 kernels, about 4x slower than Eigen's AVX-512 GEMM compiled with
// -march=native (docs/benchmarks/train.md). A core name without AVX2 kernels therefore selects
// Eigen; a core with AVX2/AVX-512 kernels keeps OpenBLAS, which is the faster of the two there.
// The rule is deterministic per machine and per environment (never a timing race), so resumed runs
// stay bit-exact. CF_GEMM=eigen|openblas overrides it (benchmarks, tests).
#include <string>

#include "cf/core/enum_table.hpp"

namespace cf::nn {

/// The GEMM back end of the float trainer.
enum class GemmBackend { openblas, eigen };

/// Their names (CF_GEMM, logs), in the order CF_GEMM's message lists them.
inline constexpr EnumTable kGemmBackends{std::array{
    EnumEntry<GemmBackend>{GemmBackend::eigen, "eigen"},
    EnumEntry<GemmBackend>{GemmBackend::openblas, "openblas"},
}};

/// The back end in use: the process's context's (cf/nn/context.hpp), which is decided once per
/// process from CF_GEMM or, when unset, from OpenBLAS's core name (see the header comment).
/// Throws cf::InvalidArgument for a CF_GEMM value other than `eigen` or `openblas`
/// (cf::InvalidArgument: exit 2 in the tools).
GemmBackend gemm_backend();

/// One line for logs and benchmark output, e.g. "eigen (OpenBLAS core Prescott has no AVX2 kernels)".
std::string gemm_backend_description();

/// The rule above applied to this process's environment and OpenBLAS core (what
/// Context::from_environment uses); `why` receives the line gemm_backend_description returns.
GemmBackend gemm_backend_from_environment(std::string& why);

/// Row-major C (M x N) = alpha op(A) op(B) + beta C through OpenBLAS sgemm, threaded by OpenMP:
/// the output is cut into one block of rows per thread (of columns when it is wider than tall,
/// e.g. the LM head's logits), each block one single-threaded OpenBLAS call. op(A) is M x K
/// (A stored K x M when trans_a), op(B) K x N (stored N x K when trans_b).
///
/// Why not OpenBLAS's own threads: its pthread pool is a second pool beside OpenMP's, and its idle
/// workers spin for about 2^28 cycles after every call (OPENBLAS_THREAD_TIMEOUT), i.e. through the
/// LayerNorm, GELU and attention regions that follow each GEMM, where they take the cores the
/// OpenMP threads need (config (a) at 2 threads: 5-8% faster with that spin cut to 2^4 cycles,
/// 25% faster with this function; docs/benchmarks/train.md). With one pool nothing else
/// spins. OpenBLAS is set to one thread for these calls. The split is static, so a thread count
/// always gives the same bits (resume stays exact); different thread counts may differ at float
/// round-off (OpenBLAS picks other kernels for small blocks), as they did with OpenBLAS's own
/// threads. Inside a parallel region: one call.
void sgemm_omp(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc);

}  // namespace cf::nn
