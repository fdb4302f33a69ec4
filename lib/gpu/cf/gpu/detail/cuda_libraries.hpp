#pragma once
// The CUDA math libraries (cuBLAS, cuBLASLt, cuSOLVER) are loaded on first use, not at process start
// (lib/gpu/src/cuda_libraries.cpp): the binaries link the CUDA runtime only, so a `--device cpu`
// run never maps libcublas, libcublasLt, libcusolver, libcusparse or libnvJitLink (0.08 s of
// start-up per invocation when they were linked; docs/gpu.md "The CUDA libraries").
// CUDA builds only.
#include <string>
#include <utility>
#include <vector>

namespace cf::gpu::cuda {

/// The handle of the shared library `soname` (through the usual search: LD_LIBRARY_PATH, the
/// binary's run path, ld.so.cache), else of `fallback_path` (the copy the build found); a library
/// already loaded gives its handle again (dlopen). Throws cf::Error naming the library and
/// dlerror() when neither loads.
void* load_library(const std::string& soname, const std::string& fallback_path);

/// The address of `name` in `library` (a handle of load_library); throws cf::Error naming both.
void* library_symbol(void* library, const std::string& soname, const char* name);

/// Every function bound lazily, as (soname, symbol) pairs: what lib/gpu calls of the libraries.
std::vector<std::pair<std::string, std::string>> lazily_bound_functions();

}  // namespace cf::gpu::cuda
