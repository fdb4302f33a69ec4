#include "cf/graph/reachability.hpp"

#include <algorithm>
#include <numeric>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"

namespace cf::graph {

namespace {

// Largest n for which a closure is attempted: the fast path keeps a sparse table of
// n * (log2 n + 1) positions (about 0.9 GB at this n).
constexpr Index kMaxClosureN = Index(1) << 22;

// Range-minimum queries over a fixed array (sparse table, O(n log n) build, O(1) query).
class RangeMin {
 public:
  explicit RangeMin(const std::vector<Index>& a) {
    const size_t n = a.size();
    levels_.push_back(a);
    for (size_t k = 1; (size_t(1) << k) <= n; ++k) {
      const auto& prev = levels_.back();
      const size_t half = size_t(1) << (k - 1), len = n - (size_t(1) << k) + 1;
      std::vector<Index> cur(len);
      // omp-nothrow: std::min over preallocated vectors (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(len); ++i) cur[i] = std::min(prev[i], prev[i + half]);
      levels_.push_back(std::move(cur));
    }
  }
  Index query(Index lo, Index hi) const {  // inclusive
    const auto len = static_cast<unsigned long long>(hi - lo + 1);
    const int k = 63 - __builtin_clzll(len);
    return std::min(levels_[k][lo], levels_[k][hi - (Index(1) << k) + 1]);
  }

 private:
  std::vector<std::vector<Index>> levels_;
};

}  // namespace

IntervalSet Closure::set(Index t) const {
  return IntervalSet(intervals.begin() + offsets[t], intervals.begin() + offsets[t + 1]);
}

Index Closure::size(Index t) const {
  Index c = 0;
  for (auto i = offsets[t]; i < offsets[t + 1]; ++i) c += intervals[i].size();
  return c;
}

bool Closure::contains(Index t, Index u) const {
  auto first = intervals.begin() + offsets[t], last = intervals.begin() + offsets[t + 1];
  auto it = std::upper_bound(first, last, u, [](Index v, const Interval& i) { return v < i.lo; });
  if (it == first) return false;
  --it;
  return u <= it->hi;
}

Closure closure(const Schedule& schedule, Index n) {
  validate(schedule, n);
  require(n <= kMaxClosureN, "closure needs n <= ", kMaxClosureN, " (memory grows as n log n; got n=", n, ")");
  const int L = static_cast<int>(schedule.layers.size());

  // Fast path state: R_l(t) = [lo[t], t].
  std::vector<Index> lo(n);
  std::iota(lo.begin(), lo.end(), Index(0));
  // Patterns applied since the state last changed: once every remaining layer's pattern is
  // among them, the closure has reached its fixed point (deep schedules end early, no hang).
  std::vector<Pattern> stable;
  auto same = [](const Pattern& a, const Pattern& b) {
    return a.kind == b.kind && a.b == b.b && a.w == b.w && a.e == b.e;
  };
  auto all_stable_from = [&](int from) {
    for (int k = from; k < L; ++k)
      if (std::none_of(stable.begin(), stable.end(), [&](const Pattern& q) { return same(q, schedule.layers[k]); }))
        return false;
    return true;
  };
  int layer = 0;
  for (; layer < L; ++layer) {
    if (!stable.empty() && all_stable_from(layer)) {
      layer = L;
      break;
    }
    const Mask m = make_mask(schedule.layers[layer], n);
    RangeMin rmq(lo);
    std::vector<Index> next(n);
    bool single = true;
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static) reduction(&& : single)
    for (Index t = 0; t < n; ++t)
      omp_errors.run([&] {
        if (!single) return;
        const IntervalSet src = sources(m, t);
        if (src.size() != 1 || src[0].hi != t) {
          single = false;
          return;
        }
        // ⋃_{s ∈ [a, t]} [lo(s), s] is contiguous (each piece contains s), so it equals
        // [min lo(s), t]; R_l(t) ⊆ it because t is among the s.
        next[t] = rmq.query(src[0].lo, t);
      });
    omp_errors.rethrow();
    if (!single) break;
    if (next == lo)
      stable.push_back(schedule.layers[layer]);
    else
      stable.clear();
    lo.swap(next);
  }

  Closure c;
  c.n = n;
  c.layers = L;
  c.offsets.resize(n + 1);
  if (layer == L) {
    c.intervals.resize(n);
    for (Index t = 0; t < n; ++t) {
      c.offsets[t] = t;
      c.intervals[t] = {lo[t], t};
    }
    c.offsets[n] = n;
    return c;
  }

  // General path: interval lists, starting from the fast-path state reached so far.
  std::vector<IntervalSet> R(n);
  for (Index t = 0; t < n; ++t) R[t] = {{lo[t], t}};
  for (; layer < L; ++layer) {
    const Mask m = make_mask(schedule.layers[layer], n);
    std::vector<IntervalSet> next(n);
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic, 64)
    for (Index t = 0; t < n; ++t)
      omp_errors.run([&] {
        IntervalSet acc = R[t];
        for (const auto& iv : sources(m, t)) {
          for (Index s = iv.lo; s <= iv.hi; ++s) acc.insert(acc.end(), R[s].begin(), R[s].end());
          normalize(acc);
        }
        next[t] = std::move(acc);
      });
    omp_errors.rethrow();
    R.swap(next);
  }
  for (Index t = 0; t < n; ++t) {
    c.offsets[t] = static_cast<std::int64_t>(c.intervals.size());
    c.intervals.insert(c.intervals.end(), R[t].begin(), R[t].end());
  }
  c.offsets[n] = static_cast<std::int64_t>(c.intervals.size());
  return c;
}

std::vector<Index> closure_sizes(const Closure& c) {
  std::vector<Index> out(c.n);
  for (Index t = 0; t < c.n; ++t) out[t] = c.size(t);
  return out;
}

std::vector<std::vector<std::uint8_t>> closure_brute_force(const Schedule& schedule, Index n, Index max_n) {
  validate(schedule, n);
  require(n <= max_n, "brute-force closure needs n <= ", max_n, " (got n=", n, ")");
  std::vector<std::vector<std::uint8_t>> R(n, std::vector<std::uint8_t>(n, 0));
  for (Index t = 0; t < n; ++t) R[t][t] = 1;
  for (const auto& p : schedule.layers) {
    const Mask m{p, n};
    auto next = R;
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic, 16)
    for (Index t = 0; t < n; ++t)
      omp_errors.run([&] {
        for (Index s = 0; s <= t; ++s)
          if (has_edge_brute_force(m, s, t))
            for (Index u = 0; u <= s; ++u) next[t][u] |= R[s][u];
      });
    omp_errors.rethrow();
    R.swap(next);
  }
  return R;
}

}  // namespace cf::graph
