// The lazy binding of cuBLAS, cuBLASLt and cuSOLVER (cf/gpu/detail/cuda_libraries.hpp; CUDA builds): every
// function lib/gpu calls is found in the library the build names, and a library or function that
// is missing is a cf::Error naming it. Needs the CUDA libraries installed, not a GPU.
#include <catch2/catch.hpp>
#include <string>

#include "cf/core/error.hpp"
#include "cf/gpu/detail/cuda_libraries.hpp"

using cf::gpu::cuda::lazily_bound_functions;
using cf::gpu::cuda::library_symbol;
using cf::gpu::cuda::load_library;

TEST_CASE("gpu lazy CUDA libraries: every bound function resolves in its library", "[gpu][cuda]") {
  const auto bound = lazily_bound_functions();
  REQUIRE(bound.size() == 23);  // the forwarders cuda_libraries.cpp defines (cublasGemmEx, cuBLASLt: issue 31)
  for (const auto& [soname, name] : bound) {
    INFO(soname << " " << name);
    void* lib = load_library(soname, soname);
    REQUIRE(lib != nullptr);
    CHECK(library_symbol(lib, soname, name.c_str()) != nullptr);
  }
}

TEST_CASE("gpu lazy CUDA libraries: a missing library or function is a clear error", "[gpu][cuda]") {
  try {
    load_library("libcf_no_such_library.so.7", "/nonexistent/libcf_no_such_library.so");
    FAIL("load_library of a missing library returned");
  } catch (const cf::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("cannot load the CUDA library libcf_no_such_library.so.7") != std::string::npos);
    CHECK(msg.find("/nonexistent/libcf_no_such_library.so") != std::string::npos);
    CHECK(msg.find("use --device cpu") != std::string::npos);
  }
  const auto [soname, name] = lazily_bound_functions().front();
  void* lib = load_library(soname, soname);
  CHECK_THROWS_WITH(library_symbol(lib, soname, "cfNoSuchFunction"),
                    Catch::Contains("the CUDA library " + soname + " has no function cfNoSuchFunction"));
}
