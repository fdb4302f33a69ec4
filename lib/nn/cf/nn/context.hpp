#pragma once
// The execution context of the CPU trainer (issue 28; docs/architecture.md "Execution contexts"):
// the choices that were a hidden mutable flag (the tiled attention's packing-free products) or read
// from the environment where they were used (the GEMM back end), as one object.
//
// The model code reads the process's context (context()) rather than taking it as an argument:
// the forward and backward passes reach it through gemm_backend() (cf/nn/gemm_backend.hpp) and
// detail::tile_gemm_enabled() (cf/nn/detail/tile_gemm.hpp). It is created once, from the
// environment at first use or by set_context at start-up, and replaced only by set_context
// (benchmarks and tests comparing the two products), never while a forward or backward runs.
#include <string>

#include "cf/nn/gemm_backend.hpp"

namespace cf::nn {

/// What the CPU trainer computes with.
struct Context {
  /// The GEMM back end of the float linear layers and LM head.
  GemmBackend gemm = GemmBackend::openblas;
  /// Why that back end, one line for logs and benchmark output.
  std::string gemm_why;
  /// The tiled attention's packing-free products (cf/nn/detail/tile_gemm.hpp) where the head
  /// size allows them (false: Eigen's products everywhere; same values up to float rounding).
  bool tile_products = true;

  /// The documented environment override, read here and nowhere else: CF_GEMM = eigen |
  /// openblas (unset: the OpenBLAS core-name rule of cf/nn/gemm_backend.hpp). Throws
  /// cf::InvalidArgument for another value.
  static Context from_environment();
};

/// The process's context: made by from_environment() at the first call unless set_context came
/// first (then the same object until the next set_context). Thread-safe.
const Context& context();

/// Replace the process's context (start-up; benchmarks and tests between runs). References
/// returned by context() earlier stay valid (they keep the old values).
void set_context(const Context& c);

}  // namespace cf::nn
