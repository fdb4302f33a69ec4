// The one rollout loop over kernel operators (cf/rollout/operator.hpp); the operators are in
// rollout_dense.cpp (dense kernels) and rollout_structured.cpp (structured ALiBi).
#include "cf/rollout/operator.hpp"

#include <optional>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"
#include "cf/rollout/detail/flush_denormals.hpp"

namespace cf::rollout {

Eigen::VectorXd rollout_last_row(KernelOperator& op, const Eigen::VectorXd& alpha) {
  op.check(alpha);
  const long n = op.size();
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  std::optional<detail::FlushDenormals> ftz;
  if (op.flush_denormals()) ftz.emplace();
  Eigen::VectorXd v = Eigen::VectorXd::Zero(n), u(n);
  v(n - 1) = 1.0;
  std::optional<Progress> progress;  // stderr, terminals only
  if (const char* label = op.progress_label()) progress.emplace(label, alpha.size());
  for (long l = alpha.size() - 1; l >= 0; --l) {
    if (alpha(l) != 0.0) {
      op.apply_left(static_cast<int>(l), v, u);
      if (alpha(l) == 1.0)
        v.swap(u);
      else
        v = (1.0 - alpha(l)) * v + alpha(l) * u;
    }
    if (progress) progress->advance();
  }
  return v;
}

}  // namespace cf::rollout
