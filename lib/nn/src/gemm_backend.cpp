#include "cf/nn/gemm_backend.hpp"

#include <cstdlib>
#include <string>

#include "cf/core/error.hpp"

extern "C" char* openblas_get_corename(void);

namespace cf::nn {
namespace {

// OpenBLAS x86-64 core names whose SGEMM kernels use AVX2 or AVX-512 (OpenBLAS
// driver/others/dynamic.c, corename[]). Every other name is an SSE-era or unknown fallback.
bool openblas_core_is_modern(const std::string& core) {
  for (const char* c : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"})
    if (core == c) return true;
  return false;
}

struct Choice {
  GemmBackend backend;
  std::string why;
};

Choice decide() {
  const std::string core = openblas_get_corename() ? openblas_get_corename() : "unknown";
  if (const char* env = std::getenv("CF_GEMM"); env && *env) {
    const std::string v = env;
    if (v == "eigen") return {GemmBackend::eigen, "eigen (CF_GEMM=eigen; OpenBLAS core " + core + ")"};
    if (v == "openblas") return {GemmBackend::openblas, "openblas (CF_GEMM=openblas; core " + core + ")"};
    throw cf::InvalidArgument("environment variable CF_GEMM=" + v + ": expected 'eigen' or 'openblas'");
  }
#if defined(__AVX2__)
  if (!openblas_core_is_modern(core))
    return {GemmBackend::eigen, "eigen (OpenBLAS core " + core + " has no AVX2 kernels)"};
#endif
  return {GemmBackend::openblas, "openblas (core " + core + ")"};
}

const Choice& choice() {
  static const Choice c = decide();  // thread-safe one-time initialisation
  return c;
}

}  // namespace

GemmBackend gemm_backend() { return choice().backend; }
std::string gemm_backend_description() { return choice().why; }

}  // namespace cf::nn
