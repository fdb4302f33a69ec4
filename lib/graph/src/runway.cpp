#include "cf/graph/runway.hpp"

#include <cmath>
#include <limits>

#include "cf/core/error.hpp"

namespace cf::graph {

double log2_big(const BigInt& x) {
  if (x <= 0) return -std::numeric_limits<double>::infinity();
  const std::size_t bits = boost::multiprecision::msb(x);
  if (bits < 60) return std::log2(x.convert_to<double>());
  // Keep the top 53 bits: x = top * 2^(bits-52).
  BigInt top = x >> (bits - 52);
  return std::log2(top.convert_to<double>()) + static_cast<double>(bits - 52);
}

RunwayCount runway_count(const Mask& m, Index s, Index d, bool by_length, Index max_gap_by_length) {
  require(s >= 0 && s < d && d < m.n, "runway endpoints must satisfy 0 <= s < d < n (got s=", s, ", d=", d, ", n=", m.n,
          ")");
  require(d - s <= 1'000'000, "runway gap d - s must be <= 1,000,000 (got ", d - s, ")");
  const Index g = d - s;
  RunwayCount out;
  out.s = s;
  out.d = d;
  out.direct_edge = contains(sources(m, d), s);

  // f[v - s] = number of paths s -> v; prefix[k] = Σ_{i<k} f[i].
  std::vector<BigInt> prefix(g + 2);
  prefix[0] = 0;
  prefix[1] = 1;  // f(s) = 1 (the empty path)
  BigInt fv;
  for (Index v = s + 1; v <= d; ++v) {
    fv = 0;
    for (const auto& iv : sources(m, v)) {
      const Index lo = std::max(iv.lo, s), hi = std::min(iv.hi, v - 1);  // u in [s, v), distinct vertices
      if (lo <= hi) fv += prefix[hi - s + 1] - prefix[lo - s];
    }
    prefix[v - s + 1] = prefix[v - s] + fv;
  }
  out.paths = fv;
  out.runway = out.paths - (out.direct_edge ? 1 : 0);
  out.log2_runway = log2_big(out.runway);

  if (by_length && g <= max_gap_by_length) {
    // cur[v - s] = paths s -> v of length l; next layer sums cur over v's sources.
    std::vector<BigInt> cur(g + 1, 0), pre(g + 2);
    cur[0] = 1;
    out.by_length.assign(g + 1, 0);
    for (Index l = 1; l <= g; ++l) {
      pre[0] = 0;
      for (Index i = 0; i <= g; ++i) pre[i + 1] = pre[i] + cur[i];
      std::vector<BigInt> next(g + 1, 0);
      bool any = false;
      for (Index v = s + l; v <= d; ++v) {
        for (const auto& iv : sources(m, v)) {
          const Index lo = std::max(iv.lo, s), hi = std::min(iv.hi, v - 1);
          if (lo <= hi) next[v - s] += pre[hi - s + 1] - pre[lo - s];
        }
        if (next[v - s] != 0) any = true;
      }
      cur.swap(next);
      out.by_length[l] = cur[g];
      if (!any) break;
    }
  }
  return out;
}

BigInt complete_graph_paths_of_length(Index s, Index d, Index l) {
  require(s < d, "need s < d (got s=", s, ", d=", d, ")");
  const Index n = d - s - 1, k = l - 1;
  if (k < 0 || k > n) return 0;
  BigInt c = 1;
  for (Index i = 1; i <= k; ++i) c = c * (n - k + i) / i;  // exact at every step
  return c;
}

BigInt complete_graph_runway(Index s, Index d) {
  require(s < d, "need s < d (got s=", s, ", d=", d, ")");
  return (BigInt(1) << static_cast<unsigned>(d - s - 1)) - 1;
}

}  // namespace cf::graph
