#include "cf/graph/schedule.hpp"

#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/list.hpp"

namespace cf::graph {

Schedule uniform_schedule(const Pattern& p, int L) {
  require(L >= 1, "number of layers must be >= 1 (got ", L, ")");
  require(L <= 1'000'000, "number of layers must be <= 1,000,000 (got ", L, ")");
  return Schedule{std::vector<Pattern>(static_cast<size_t>(L), p)};
}

Schedule parse_schedule(const std::string& list, const Pattern& base) {
  Schedule s;
  for (const std::string& item : split_list(list, "--schedule")) {
    long reps = 1;
    auto star = item.find_first_of("*x");
    std::string name = item;
    if (star != std::string::npos && star > 0 && item.find_first_not_of("0123456789", star + 1) == std::string::npos &&
        star + 1 < item.size()) {
      name = item.substr(0, star);
      reps = std::stol(item.substr(star + 1));
      require(reps >= 1 && reps <= 100000, "repeat count in '", item, "' must be 1..100000");
    }
    Pattern p = base;
    p.kind = parse_pattern_kind(name);
    for (long r = 0; r < reps; ++r) s.layers.push_back(p);
  }
  require(!s.layers.empty(), "schedule '", list, "' has no layers");
  return s;
}

void validate(const Schedule& s, Index n) {
  require(!s.layers.empty(), "schedule has no layers");
  for (const auto& p : s.layers) validate(p, n);
}

std::string describe(const Schedule& s) {
  std::string out;
  for (size_t i = 0; i < s.layers.size(); ++i) out += (i ? "," : "") + pattern_name(s.layers[i].kind);
  return out;
}

}  // namespace cf::graph
