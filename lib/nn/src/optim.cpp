#include "cf/nn/optim.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn {

double lr_schedule(std::int64_t step, std::int64_t warmup, std::int64_t max_steps, double lr, double min_lr) {
  require(warmup >= 0 && max_steps >= 1, "lr_schedule needs warmup >= 0 and max_steps >= 1 (got ", warmup, ", ",
          max_steps, ")");
  require(min_lr >= 0 && min_lr <= lr, "lr_schedule needs 0 <= min_lr <= lr (got ", min_lr, ", ", lr, ")");
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (step >= max_steps) return min_lr;
  const double span = static_cast<double>(std::max<std::int64_t>(1, max_steps - warmup));
  const double ratio = static_cast<double>(step - warmup) / span;
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

double grad_norm(const std::vector<float>& grad) {
  const std::int64_t n = static_cast<std::int64_t>(grad.size());
  const std::int64_t chunk = 1 << 16, nc = (n + chunk - 1) / chunk;
  std::vector<double> part(static_cast<std::size_t>(nc), 0.0);
  const float* g = grad.data();
  // Fixed chunks, each summed in eight lanes (lane_sum, cf/nn/ops.hpp): the same norm for every
  // thread count and vector width, without one chain of dependent additions over 10^6-10^8 terms.
  // omp-nothrow: arithmetic on preallocated vectors (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < nc; ++c) {
    const std::int64_t lo = c * chunk, hi = std::min(n, lo + chunk);
    part[c] = lane_sum<double>(static_cast<int>(hi - lo), [&](int k) { return double(g[lo + k]) * double(g[lo + k]); });
  }
  double s = 0;
  for (double p : part) s += p;
  return std::sqrt(s);
}

double clip_grad_norm(std::vector<float>& grad, double max_norm) {
  const double norm = grad_norm(grad);
  if (max_norm > 0 && norm > max_norm && std::isfinite(norm)) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    // omp-nothrow: arithmetic on preallocated vectors (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(grad.size()); ++i) grad[i] *= scale;
  }
  return norm;
}

void adamw_step(std::vector<float>& params, const std::vector<float>& grad, AdamWState& st, const ParamLayout& layout,
                double lr, const AdamWConfig& cfg) {
  const std::size_t n = params.size();
  require(grad.size() == n && static_cast<std::int64_t>(n) == layout.total, "adamw_step: params (", n, "), grad (",
          grad.size(), ") and layout (", layout.total, ") sizes must agree");
  if (st.m.empty()) st.m.assign(n, 0.f);
  if (st.v.empty()) st.v.assign(n, 0.f);
  require(st.m.size() == n && st.v.size() == n, "adamw_step: optimizer state size ", st.m.size(), " != ", n);
  st.t += 1;
  const double bc1 = 1.0 - std::pow(cfg.beta1, static_cast<double>(st.t));
  const double bc2 = 1.0 - std::pow(cfg.beta2, static_cast<double>(st.t));
  const float b1 = static_cast<float>(cfg.beta1), b2 = static_cast<float>(cfg.beta2);
  // Raw pointers: through std::vector the compiler must assume a store to params[i] may change
  // the vectors' data pointers and reloads them every element, which keeps the loop scalar. The
  // arithmetic per element is unchanged (vectorised or not, each element sees the same operations).
  float* __restrict pp = params.data();
  float* __restrict pm = st.m.data();
  float* __restrict pv = st.v.data();
  const float* __restrict pg = grad.data();
  for (const auto& t : layout.tensors) {
    const float wd = t.decay ? static_cast<float>(cfg.weight_decay) : 0.f;
    const float flr = static_cast<float>(lr), fbc1 = static_cast<float>(bc1), fbc2 = static_cast<float>(bc2),
                feps = static_cast<float>(cfg.eps);
    // omp-nothrow: arithmetic on preallocated vectors (no allocation, no throwing call)
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = t.offset; i < t.offset + t.size; ++i) {
      const float g = pg[i];
      const float m = b1 * pm[i] + (1.f - b1) * g;
      const float v = b2 * pv[i] + (1.f - b2) * g * g;
      pm[i] = m;
      pv[i] = v;
      const float mhat = m / fbc1, vhat = v / fbc2;
      pp[i] -= flr * (mhat / (std::sqrt(vhat) + feps) + wd * pp[i]);
    }
  }
}

}  // namespace cf::nn
