#include "cf/graph/coverage.hpp"

#include <algorithm>

#include "cf/core/error.hpp"

namespace cf::graph {

bool coverage_block(Index d, Index r) { return d <= r; }
bool coverage_swa(Index d, Index w) { return d >= 0 && d < w; }
bool coverage_pbb(Index d, Index r, Index h) { return d <= r || (r < h && r < d && d <= r + h); }
bool coverage_se(Index d, Index r, Index b, Index e) { return d <= r || (r < e && r < d && d <= r + b); }

bool coverage_closed_form(const Pattern& p, Index d, Index r) {
  switch (p.kind) {
    case PatternKind::Full:
      return d >= 0;
    case PatternKind::Block:
      return coverage_block(d, r);
    case PatternKind::Swa:
      return coverage_swa(d, p.w);
    case PatternKind::Bridge:
    case PatternKind::Pbb:
      return coverage_pbb(d, r, p.h());
    case PatternKind::SeBridge:
      return coverage_se(d, r, p.b, p.e);
  }
  return false;
}

bool coverage_direct(const Mask& m, Index t, Index d) {
  const Index u = t - d;
  return u >= 0 && has_edge_brute_force(m, u, t);
}

static void check_dims(Index b, Index d_max) {
  require(b >= 1, "block size b must be >= 1 (got ", b, ")");
  require(d_max >= 0, "d_max must be >= 0 (got ", d_max, ")");
  // Division instead of (d_max + 1) * b: no signed overflow for any b, d_max >= 0.
  require(d_max < Index(1) << 31 && b <= (Index(1) << 28) / (d_max + 1), "coverage matrix of (d_max+1) x b = (", d_max,
          "+1) x ", b, " entries is too large (limit 2^28)");
}

CoverageMatrix coverage_matrix_closed_form(const Pattern& p, Index d_max) {
  const Index b = p.b;  // phases are taken in blocks of b for every pattern
  check_dims(b, d_max);
  CoverageMatrix C(d_max + 1, b);
  for (Index d = 0; d <= d_max; ++d)
    for (Index r = 0; r < b; ++r) C(d, r) = coverage_closed_form(p, d, r) ? 1 : 0;
  return C;
}

CoverageMatrix coverage_matrix_closure(const Closure& c, Index b, Index J, Index d_max) {
  check_dims(b, d_max);
  const Index nb = (c.n + b - 1) / b;
  require(J >= 0 && J < nb, "block index J must satisfy 0 <= J < ceil(n/b) = ", nb, " (got J=", J, ")");
  CoverageMatrix C = CoverageMatrix::Zero(d_max + 1, b);
  for (Index r = 0; r < b; ++r) {
    const Index t = J * b + r;
    if (t >= c.n) break;
    for (Index d = 0; d <= std::min(d_max, t); ++d) C(d, r) = c.contains(t, t - d) ? 1 : 0;
  }
  return C;
}

std::vector<double> phase_fraction(const CoverageMatrix& C) {
  std::vector<double> f(C.rows(), 0.0);
  if (C.cols() == 0) return f;
  for (Index d = 0; d < C.rows(); ++d) f[d] = static_cast<double>(C.row(d).cast<int>().sum()) / C.cols();
  return f;
}

CoverageCheck verify_coverage_closed_form(const Mask& m, Index d_max, int max_report) {
  CoverageCheck out;
  const Index b = m.pattern.b;
  for (Index t = 0; t < m.n; ++t) {
    const Index r = t % b;
    for (Index d = 0; d <= std::min(t, d_max); ++d) {
      const bool cf = coverage_closed_form(m.pattern, d, r);
      const bool ed = coverage_direct(m, t, d);
      ++out.checked;
      if (cf != ed) {
        ++out.mismatches;
        if (static_cast<int>(out.examples.size()) < max_report) out.examples.push_back({t, d, cf, ed});
      }
    }
  }
  return out;
}

ClosureCheck verify_closure(const Schedule& s, Index n, Index n_check_max) {
  ClosureCheck out;
  const Index nc = std::min(n, n_check_max);
  out.n_checked = nc;
  const Closure fast = closure(s, nc);
  const auto brute = closure_brute_force(s, nc, n_check_max);
  for (Index t = 0; t < nc; ++t)
    for (Index u = 0; u < nc; ++u) {
      ++out.pairs;
      if ((fast.contains(t, u) ? 1 : 0) != brute[t][u]) ++out.mismatches;
    }
  return out;
}

NestednessReport compare_coverage(const Pattern& a, const Pattern& b, Index d_max, int max_witnesses) {
  NestednessReport rep;
  const Index bb = std::max(a.b, b.b);
  for (Index d = 0; d <= d_max; ++d)
    for (Index r = 0; r < bb; ++r) {
      // A phase r only exists for a pattern whose blocks are longer than r; patterns without
      // blocks (full, swa) are phase-independent.
      const bool ca = coverage_closed_form(a, d, r), cb = coverage_closed_form(b, d, r);
      if (ca && cb) ++rep.both;
      if (ca && !cb) {
        ++rep.only_a;
        if (static_cast<int>(rep.witnesses_a.size()) < max_witnesses) rep.witnesses_a.push_back({d, r});
      }
      if (cb && !ca) {
        ++rep.only_b;
        if (static_cast<int>(rep.witnesses_b.size()) < max_witnesses) rep.witnesses_b.push_back({d, r});
      }
    }
  return rep;
}

}  // namespace cf::graph
