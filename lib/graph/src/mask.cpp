#include "cf/graph/mask.hpp"

#include <algorithm>
#include <cctype>

#include "cf/core/error.hpp"

namespace cf::graph {

std::string pattern_name(PatternKind k) { return std::string(kPatternKinds.name(k)); }

std::string fusion_name(Fusion f) { return std::string(kFusions.name(f)); }

PatternKind parse_pattern_kind(const std::string& name) {
  std::string s;
  for (char c : name) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const auto k = kPatternKinds.find(s)) return *k;
  throw InvalidArgument(str("unknown pattern '", name, "': known patterns are ", kPatternKinds.list(),
                            " (aliases: causal = full; sliding, window = swa; se, sebridge, se_bridge = se-bridge)"));
}

std::string describe(const Pattern& p) {
  switch (p.kind) {
    case PatternKind::Full:
      return "full";
    case PatternKind::Block:
      return str("block(b=", p.b, ")");
    case PatternKind::Swa:
      return str("swa(w=", p.w, ")");
    case PatternKind::Bridge:
      return str("bridge(b=", p.b, ",w=", p.w, ")");
    case PatternKind::Pbb:
      return str("pbb(b=", p.b, ",w=", p.w, ")");
    case PatternKind::SeBridge:
      return str("se-bridge(b=", p.b, ",e=", p.e, ")");
  }
  return "?";
}

void validate(const Pattern& p, Index n) {
  require(n >= 1, "sequence length n must be >= 1 (got n=", n, ")");
  // Upper bounds keep every count of this library inside int64: tri(n) = n(n+1)/2 <= 2^61 and
  // (n + b - 1) in num_blocks cannot overflow (UBSan found b near 2^63 there).
  require(n <= kMaxLength, "sequence length n must be <= 2^31 = ", kMaxLength, " (got n=", n, ")");
  require(p.b <= kMaxLength && p.w <= kMaxLength && p.e <= kMaxLength, "b, w and e must be <= 2^31 = ", kMaxLength,
          " (got b=", p.b, ", w=", p.w, ", e=", p.e, ")");
  switch (p.kind) {
    case PatternKind::Full:
      break;
    case PatternKind::Swa:
      require(p.w >= 1, "window width w must be >= 1 (got w=", p.w, ")");
      break;
    case PatternKind::Block:
      require(p.b >= 1, "block size b must be >= 1 (got b=", p.b, ")");
      break;
    case PatternKind::Bridge:
    case PatternKind::Pbb:
      require(p.b >= 1, "block size b must be >= 1 (got b=", p.b, ")");
      require(p.w >= 2 && p.w % 2 == 0, "bridge width w must be even and >= 2 (h = w/2; got w=", p.w, ")");
      require(p.w <= 2 * p.b, "bridge half-width h = w/2 must be <= b (got w=", p.w, ", b=", p.b, ")");
      break;
    case PatternKind::SeBridge:
      require(p.b >= 1, "block size b must be >= 1 (got b=", p.b, ")");
      require(p.e >= 1 && p.e <= p.b, "SE-Bridge extension must satisfy 1 <= e <= b (got e=", p.e, ", b=", p.b, ")");
      break;
  }
}

Mask make_mask(const Pattern& p, Index n) {
  validate(p, n);
  return Mask{p, n};
}

Index num_blocks(const Mask& m) {
  require(m.pattern.b >= 1 && m.pattern.b <= kMaxLength && m.n >= 0 && m.n <= kMaxLength,
          "num_blocks needs 1 <= b <= 2^31 and 0 <= n <= 2^31 (got b=", m.pattern.b, ", n=", m.n, ")");
  return (m.n + m.pattern.b - 1) / m.pattern.b;
}

static bool has_bridges(PatternKind k) {
  return k == PatternKind::Bridge || k == PatternKind::Pbb || k == PatternKind::SeBridge;
}

static BridgeWindow window_at(const Mask& m, Index p) {
  const Pattern& P = m.pattern;
  Index s_lo, s_hi, r_lo, r_hi;
  if (P.kind == PatternKind::SeBridge) {
    s_lo = p - P.b, s_hi = p + P.e, r_lo = p, r_hi = p + P.e;
  } else {
    const Index h = P.h();
    s_lo = p - h, s_hi = p + h;
    r_lo = P.kind == PatternKind::Bridge ? p - h : p;
    r_hi = p + h;
  }
  auto cl = [&](Index x) { return std::clamp<Index>(x, 0, m.n); };
  return {p, cl(s_lo), cl(s_hi), cl(r_lo), cl(r_hi)};
}

std::vector<BridgeWindow> bridge_windows(const Mask& m) {
  std::vector<BridgeWindow> out;
  if (!has_bridges(m.pattern.kind)) return out;
  for (Index j = 1; j < num_blocks(m); ++j) out.push_back(window_at(m, j * m.pattern.b));
  return out;
}

IntervalSet bridge_sources(const Mask& m, Index t) {
  IntervalSet out;
  if (!has_bridges(m.pattern.kind)) return out;
  const Pattern& P = m.pattern;
  // Windows whose write-back set can contain t have |t - p| <= max(h, e, b).
  const Index reach = std::max({P.h(), P.e, P.b});
  const Index j_lo = std::max<Index>(1, (t - reach) / P.b), j_hi = std::min(num_blocks(m) - 1, (t + reach) / P.b + 1);
  for (Index j = j_lo; j <= j_hi; ++j) {
    BridgeWindow W = window_at(m, j * P.b);
    if (t >= W.r_lo && t < W.r_hi && W.s_lo < W.s_hi) {
      Index hi = std::min(W.s_hi - 1, t);  // causal: s <= t
      if (W.s_lo <= hi) out.push_back({W.s_lo, hi});
    }
  }
  normalize(out);
  return out;
}

IntervalSet sources(const Mask& m, Index t) {
  const Pattern& P = m.pattern;
  IntervalSet out;
  switch (P.kind) {
    case PatternKind::Full:
      out.push_back({0, t});
      break;
    case PatternKind::Swa:
      out.push_back({std::max<Index>(0, t - P.w + 1), t});
      break;
    default: {
      out.push_back({(t / P.b) * P.b, t});
      IntervalSet br = bridge_sources(m, t);
      out.insert(out.end(), br.begin(), br.end());
      normalize(out);
    }
  }
  return out;
}

bool has_edge_brute_force(const Mask& m, Index s, Index t) {
  const Pattern& P = m.pattern;
  if (s < 0 || t >= m.n || s > t) return false;
  switch (P.kind) {
    case PatternKind::Full:
      return true;
    case PatternKind::Swa:
      return t - s < P.w;
    default:
      break;
  }
  if (s / P.b == t / P.b) return true;  // E_block: same block, s <= t
  if (!has_bridges(P.kind)) return false;
  // E_bridge(S_j, R_j) straight from the definitions, every boundary p = jb, j >= 1, p < n.
  for (Index p = P.b; p < m.n; p += P.b) {
    Index s_lo, s_hi, r_lo, r_hi;
    if (P.kind == PatternKind::SeBridge) {
      s_lo = p - P.b, s_hi = p + P.e, r_lo = p, r_hi = p + P.e;
    } else {
      s_lo = p - P.h(), s_hi = p + P.h(), r_hi = p + P.h();
      r_lo = P.kind == PatternKind::Bridge ? p - P.h() : p;
    }
    // Clipping to [0, n) is implied by 0 <= s <= t < n.
    if (s >= s_lo && s < s_hi && t >= r_lo && t < r_hi) return true;
  }
  return false;
}

Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic> dense_mask(const Mask& m, Index max_n) {
  require(m.n <= max_n, "dense mask export needs n <= ", max_n, " (an n x n byte matrix; got n=", m.n,
          "): use the implicit interval form for larger n");
  Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic> A =
      Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic>::Zero(m.n, m.n);
  for (Index t = 0; t < m.n; ++t)
    for (const auto& iv : sources(m, t))
      for (Index s = iv.lo; s <= iv.hi; ++s) A(t, s) = 1;
  return A;
}

}  // namespace cf::graph
