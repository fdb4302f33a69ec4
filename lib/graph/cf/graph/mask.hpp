#pragma once
// Attention masks as directed graphs over positions (Boundary repair (Yang) §3, docs/spec.md §1). An edge (s, t) means
// target t may read source s in one layer (s <= t). Masks are implicit: a Mask answers
// "which sources may t read" as an IntervalSet, so nothing of size n x n is materialised.
#include <Eigen/Core>
#include <string>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/graph/interval.hpp"

namespace cf::graph {

/// The mask families of docs/spec.md §1.
enum class PatternKind { Full, Block, Swa, Bridge, Pbb, SeBridge };

/// How bridge messages combine with the block path in a trained model (Boundary repair (Yang) Eqs. 34-36):
/// Branch = two separately normalised softmaxes added; Union = one softmax over E_block ∪ E_bridge.
/// The structural edge set is the same; only score accounting differs.
enum class Fusion { Branch, Union };

/// The names of the fusions (model configs, reports, train --fusion).
inline constexpr EnumTable kFusions{std::array{
    EnumEntry<Fusion>{Fusion::Branch, "branch"},
    EnumEntry<Fusion>{Fusion::Union, "union"},
}};

/// "branch" | "union".
std::string fusion_name(Fusion f);

/// Largest n, b, w and e that validate() accepts (2^31): n(n+1)/2 stays below 2^62, so every
/// score count fits in int64.
constexpr Index kMaxLength = Index(1) << 31;

/// A pattern with its parameters: b = block size (block, bridge, pbb, se-bridge), w = window
/// width (swa; bridge/pbb: bridge width, half-width h = w/2), e = SE-Bridge extension.
struct Pattern {
  PatternKind kind = PatternKind::Full;
  Index b = 128, w = 128, e = 64;
  Index h() const { return w / 2; }
};

/// One bridge window at boundary p = jb: sources S = [s_lo, s_hi), write-back R = [r_lo, r_hi),
/// both already clipped to [0, n) (docs/spec.md §1).
struct BridgeWindow {
  Index p;
  Index s_lo, s_hi, r_lo, r_hi;
};

/// A pattern applied to a sequence of n positions.
struct Mask {
  Pattern pattern;
  Index n = 0;
};

/// The names of the mask families (canonical name first, then the accepted aliases).
inline constexpr EnumTable kPatternKinds{std::array{
    EnumEntry<PatternKind>{PatternKind::Full, "full", "causal"},
    EnumEntry<PatternKind>{PatternKind::Block, "block"},
    EnumEntry<PatternKind>{PatternKind::Swa, "swa", "sliding window"},
    EnumEntry<PatternKind>{PatternKind::Bridge, "bridge"},
    EnumEntry<PatternKind>{PatternKind::Pbb, "pbb"},
    EnumEntry<PatternKind>{PatternKind::SeBridge, "se-bridge", "se sebridge se_bridge"},
}};

/// Canonical name: "full", "block", "swa", "bridge", "pbb", "se-bridge".
std::string pattern_name(PatternKind k);

/// Parse a pattern name, case-insensitive, with the documented aliases (coverage --help, docs/options.md):
/// "causal" = full; "sliding", "window" = swa; "se", "sebridge", "se_bridge" = se-bridge. Throws
/// cf::InvalidArgument listing the known names and aliases.
PatternKind parse_pattern_kind(const std::string& name);

/// Human-readable description with the parameters the pattern uses, e.g. "pbb(b=128,w=128)".
std::string describe(const Pattern& p);

/// Check a pattern's parameters against sequence length n; throws cf::InvalidArgument naming the
/// violated constraint: 1 <= n <= 2^31 and b, w, e <= 2^31 (kMaxLength: every count of this
/// library then fits in int64); b >= 1; swa: w >= 1; bridge/pbb: w even, 2 <= w <= 2b
/// (h <= b is what the closed forms of Boundary repair (Yang) assume); se-bridge: 1 <= e <= b.
void validate(const Pattern& p, Index n);

/// Make a mask after validate().
Mask make_mask(const Pattern& p, Index n);

/// Number of blocks ceil(n/b).
Index num_blocks(const Mask& m);

/// The bridge windows of a Bridge/PBB/SE-Bridge mask, one per boundary p = jb, j = 1..ceil(n/b)-1
/// (empty for other patterns).
std::vector<BridgeWindow> bridge_windows(const Mask& m);

/// Sources target t may read in one layer: the union of the base edges (block, window or full
/// prefix) and of every bridge window whose write-back set contains t. 0 <= t < n.
IntervalSet sources(const Mask& m, Index t);

/// Sources from the bridge windows alone (E_bridge of Boundary repair (Yang) Eq. 20), for target t.
IntervalSet bridge_sources(const Mask& m, Index t);

/// Whether (s, t) is an edge, decided directly from the set definitions of docs/spec.md §1 (no interval
/// arithmetic): the independent oracle used by the brute-force checks.
bool has_edge_brute_force(const Mask& m, Index s, Index t);

/// Dense 0/1 mask A(t, s) = [(s, t) in E] (row = target, column = source). Throws
/// cf::InvalidArgument if n > max_n (n x n bytes must fit comfortably in memory).
Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic> dense_mask(const Mask& m, Index max_n = 8192);

}  // namespace cf::graph
