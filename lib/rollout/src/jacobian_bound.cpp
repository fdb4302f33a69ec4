#include "cf/rollout/jacobian_bound.hpp"

#include <cmath>

#include "cf/core/error.hpp"

namespace cf::rollout {

JacobianBound jacobian_bound(const std::vector<RowMatrix>& attention, double C, const ProductBackend* backend) {
  require(!attention.empty(), "Jacobian bound: r >= 1 attention matrices required");
  require(std::isfinite(C) && C > 0, "Jacobian bound: C > 0 required, got C = ", C);
  const long n = attention[0].rows();
  for (std::size_t t = 0; t < attention.size(); ++t) {
    const RowMatrix& A = attention[t];
    require(A.rows() == n && A.cols() == n, "Jacobian bound: A(L+", t, ") is ", A.rows(), " x ", A.cols(),
            ", expected ", n, " x ", n);
    for (long i = 0; i < n; ++i) {
      require(std::abs(A.row(i).sum() - 1) <= 1e-9, "Jacobian bound: A(L+", t, ") row ", i, " sums to ", A.row(i).sum(),
              " (row-stochastic required)");
      for (long j = i + 1; j < n; ++j)
        require(A(i, j) == 0, "Jacobian bound: A(L+", t, ") is not lower triangular at (", i, ", ", j, ")");
    }
  }
  const long r = static_cast<long>(attention.size());
  RowMatrix M = RowMatrix::Identity(n, n), gate;  // M_{r-1} and A(L+r-1) M_{r-1}
  if (backend) {  // the two products on the device; the checks above and the scaling stay here
    const auto layer = [&](int t) { return attention[static_cast<std::size_t>(t)]; };
    M = backend->left_product(layer, std::vector<LeftStep>(static_cast<std::size_t>(r - 1), LeftStep{1, 1}), M);
    gate = backend->left_product([&](int) { return attention.back(); }, {LeftStep{0, 1}}, M);
  } else {
    for (long t = 0; t + 1 < r; ++t) M = (M + attention[t] * M).eval();
    gate = attention[r - 1] * M;
  }
  const double scale = std::pow(C, static_cast<double>(r));
  JacobianBound b;
  b.self_term = scale * M;
  b.gate_term = scale * gate;
  b.bound = b.self_term + b.gate_term;
  return b;
}

}  // namespace cf::rollout
