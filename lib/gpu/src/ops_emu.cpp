// Ops<Backend::Emulated> (cf::gpu::emu): the CUDA kernels of cf/gpu/kernels executed on the CPU
// by the emulation header, the Thrust paths on the OpenMP backend (host pointers). Compiled by the
// host compiler in every build: this is what CI runs against the CPU oracles (tests/gpu). The
// bodies are the templates of ops_body.hpp, instantiated here.
#include <cblas.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/scan.h>
#include <thrust/system/omp/execution_policy.h>
#include <thrust/transform.h>

#include <Eigen/Dense>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/gpu/emulation.hpp"
#include "cf/gpu/ops.hpp"
#include "ops_body.hpp"

namespace cf::gpu {

/// The emulated back end's primitives (the contract is in ops_body.hpp).
template <>
struct OpsTraits<Backend::Emulated> {
  static auto policy() { return thrust::omp::par; }
  static void check_launch(const char*) {}  // emulated launches throw on failure
  static void* alloc(std::size_t bytes) {
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  static void release(void* p) { std::free(p); }
  static void upload(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void fill_zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }
  struct Scratch {
    std::vector<float> buf;
    void resize(std::size_t n) { buf.assign(n, 0.0f); }
    float* data() { return buf.data(); }
  };

  /// OpenBLAS sgemm per batch.
  static void gemm_strided_batched(Context&, int m, int n, int k, float alpha, const float* A, std::int64_t sa,
                                   const float* B, std::int64_t sb, float beta, float* C, std::int64_t sc, int batch) {
    for (int b = 0; b < batch; ++b)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, A + b * sa, k, B + b * sb, n, beta,
                  C + b * sc, n);
  }

  /// Eigen's SelfAdjointEigenSolver per matrix, matrices in parallel.
  static void sym_eig_batched(Context&, const float* A, int n, int batch, float* w, float* V) {
    using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const std::int64_t nn = static_cast<std::int64_t>(n) * n;
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
    for (int b = 0; b < batch; ++b)
      omp_errors.run([&] {
        Eigen::SelfAdjointEigenSolver<M> es(Eigen::Map<const M>(A + b * nn, n, n));
        Eigen::Map<Eigen::VectorXf>(w + static_cast<std::int64_t>(b) * n, n) = es.eigenvalues();
        Eigen::Map<M>(V + b * nn, n, n) = es.eigenvectors();
      });
    omp_errors.rethrow();
  }
};

static_assert(ops_body::IsOpsTraits<OpsTraits<Backend::Emulated>>::value, "OpsTraits<Emulated> breaks the contract");

template struct Ops<Backend::Emulated>;
template class ResidentMask<Backend::Emulated>;

}  // namespace cf::gpu
