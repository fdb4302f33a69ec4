#include "cf/graph/interval.hpp"

#include <algorithm>

namespace cf::graph {

void normalize(IntervalSet& s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](const Interval& i) { return i.lo > i.hi; }), s.end());
  if (s.size() < 2) return;
  std::sort(s.begin(), s.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  size_t k = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i].lo <= s[k].hi + 1) {
      s[k].hi = std::max(s[k].hi, s[i].hi);
    } else {
      s[++k] = s[i];
    }
  }
  s.resize(k + 1);
}

Index count(const IntervalSet& s) {
  Index c = 0;
  for (const auto& i : s) c += i.size();
  return c;
}

bool contains(const IntervalSet& s, Index x) {
  auto it = std::upper_bound(s.begin(), s.end(), x, [](Index v, const Interval& i) { return v < i.lo; });
  if (it == s.begin()) return false;
  --it;
  return x <= it->hi;
}

IntervalSet clip(const IntervalSet& s, Index lo, Index hi) {
  IntervalSet out;
  for (const auto& i : s) {
    Index a = std::max(i.lo, lo), b = std::min(i.hi, hi);
    if (a <= b) out.push_back({a, b});
  }
  return out;
}

}  // namespace cf::graph
