#pragma once
// Per-layer mask schedules (docs/spec.md §1: "E may differ per layer", e.g. "pbb,pbb,pbb,full").
#include <string>
#include <vector>

#include "cf/graph/mask.hpp"

namespace cf::graph {

/// One pattern per layer, layer 1 first.
struct Schedule {
  std::vector<Pattern> layers;
};

/// The same pattern at L layers (L >= 1).
Schedule uniform_schedule(const Pattern& p, int L);

/// Parse a comma-separated list of pattern names sharing the parameters of `base` (b, w, e);
/// an item "NAME*K" or "NAMExK" repeats it K times ("swa*3,full"). Throws cf::InvalidArgument for
/// an empty list or an unknown name.
Schedule parse_schedule(const std::string& list, const Pattern& base);

/// Validate every layer's pattern against n.
void validate(const Schedule& s, Index n);

/// "pbb,pbb,pbb,full" style description.
std::string describe(const Schedule& s);

}  // namespace cf::graph
