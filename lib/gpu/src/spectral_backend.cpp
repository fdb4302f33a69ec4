// cf::gpu::make_spectral_eigensolver: double cores to scaled float32 batches for the device loop
// sym_eigenvalues_batched (cf/gpu/analysis_ops.hpp) and back.
#include "cf/gpu/spectral_backend.hpp"

#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_ops.hpp"

namespace cf::gpu {

namespace {

using Solve = void (*)(const float*, int, int, float*);

std::vector<Eigen::VectorXd> solve_batch(Solve solve, const std::vector<Eigen::MatrixXd>& ms) {
  if (ms.empty()) return {};
  const int n = static_cast<int>(ms[0].rows()), batch = static_cast<int>(ms.size());
  const std::size_t nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> A(nn * ms.size()), w(static_cast<std::size_t>(n) * ms.size());
  std::vector<double> scale(ms.size());
  for (std::size_t b = 0; b < ms.size(); ++b) {
    require(ms[b].rows() == n && ms[b].cols() == n, "sym_eigenvalues_batched: matrices of one size n x n");
    const double s = ms[b].cwiseAbs().maxCoeff();
    scale[b] = s > 0 ? s : 1.0;
    for (int i = 0; i < n; ++i)  // row-major
      for (int j = 0; j < n; ++j) A[b * nn + static_cast<std::size_t>(i) * n + j] = float(ms[b](i, j) / scale[b]);
  }
  solve(A.data(), n, batch, w.data());
  std::vector<Eigen::VectorXd> out(ms.size());
  for (std::size_t b = 0; b < ms.size(); ++b) {
    out[b].resize(n);
    for (int i = 0; i < n; ++i) out[b][i] = scale[b] * double(w[b * n + i]);
  }
  return out;
}

#if CF_GPU_HAVE_CUDA
constexpr Solve kCudaSolve = &cuda::sym_eigenvalues_batched;
#else
void no_cuda(const float*, int, int, float*) { throw InvalidArgument("--device cuda: this build has no CUDA path"); }
constexpr Solve kCudaSolve = &no_cuda;
#endif

}  // namespace

spectral::SymEigenSolver make_spectral_eigensolver(Placement b) {
  spectral::SymEigenSolver s;
  s.rounding_unit = 0x1p-24;
  if (b == Placement::Cpu) return s;
  const Solve solve = b == Placement::Emulated ? &emu::sym_eigenvalues_batched : kCudaSolve;
  s.solve = [solve](const std::vector<Eigen::MatrixXd>& ms) { return solve_batch(solve, ms); };
  return s;
}

}  // namespace cf::gpu
