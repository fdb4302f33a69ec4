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

namespace cf::nn {

/// The GEMM back end of the float trainer.
enum class GemmBackend { openblas, eigen };

/// The back end in use: decided once per process from CF_GEMM or, when unset, from OpenBLAS's
/// core name (see the header comment). Throws cf::InvalidArgument for a CF_GEMM value other
/// than `eigen` or `openblas` (cf::InvalidArgument: exit 2 in the tools).
GemmBackend gemm_backend();

/// One line for logs and benchmark output, e.g. "eigen (OpenBLAS core Prescott has no AVX2 kernels)".
std::string gemm_backend_description();

}  // namespace cf::nn
