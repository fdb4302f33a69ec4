#include "cf/graph/scores.hpp"

#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"

namespace cf::graph {

static std::int64_t tri(std::int64_t m) { return m * (m + 1) / 2; }

std::int64_t scores_branch(const Mask& m) {
  const Pattern& P = m.pattern;
  const std::int64_t n = m.n;
  switch (P.kind) {
    case PatternKind::Full:
      return tri(n);
    case PatternKind::Swa: {
      // Σ_t min(t+1, w): the first w positions see t+1 keys, the rest w.
      const std::int64_t k = std::min(n, P.w);
      return tri(k) + (n - k) * P.w;
    }
    default:
      break;
  }
  std::int64_t total = 0;
  for (std::int64_t start = 0; start < n; start += P.b) total += tri(std::min(P.b, n - start));
  for (const auto& W : bridge_windows(m)) {
    // The bridge branch computes the causal triangle of its whole window: [p-h, p+h) for
    // Bridge/PBB, [p-b, p+e) for SE (clipped), whatever part of it is written back.
    total += tri(W.s_hi - W.s_lo);
  }
  return total;
}

std::int64_t scores_union(const Mask& m) {
  const Pattern& P = m.pattern;
  if (P.kind == PatternKind::Full || P.kind == PatternKind::Swa || P.kind == PatternKind::Block)
    return scores_branch(m);  // one softmax: branch and union accounting coincide
  std::int64_t total = 0;
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (Index t = 0; t < m.n; ++t) omp_errors.run([&] { total += count(sources(m, t)); });
  omp_errors.rethrow();
  return total;
}

std::int64_t write_back(const Mask& m) {
  IntervalSet R;
  for (const auto& W : bridge_windows(m))
    if (W.r_lo < W.r_hi) R.push_back({W.r_lo, W.r_hi - 1});
  normalize(R);
  return count(R);
}

ScheduleScores scores_schedule(const Schedule& s, Index n) {
  validate(s, n);
  ScheduleScores out;
  // Deep schedules repeat a few patterns: count each distinct pattern once.
  std::vector<std::pair<Pattern, std::pair<std::int64_t, std::int64_t>>> seen;
  for (const auto& p : s.layers) {
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& e) {
      return e.first.kind == p.kind && e.first.b == p.b && e.first.w == p.w && e.first.e == p.e;
    });
    if (it == seen.end()) {
      const Mask m{p, n};
      seen.push_back({p, {scores_branch(m), scores_union(m)}});
      it = seen.end() - 1;
    }
    out.branch_per_layer.push_back(it->second.first);
    out.union_per_layer.push_back(it->second.second);
    // Up to 10^6 layers of up to 2^61 scores each: checked sums (UBSan found the overflow).
    require(!__builtin_add_overflow(out.branch, it->second.first, &out.branch) &&
                !__builtin_add_overflow(out.unions, it->second.second, &out.unions),
            "schedule score count overflows int64 (", s.layers.size(), " layers at n = ", n,
            "): use fewer layers or a shorter n");
  }
  return out;
}

}  // namespace cf::graph
