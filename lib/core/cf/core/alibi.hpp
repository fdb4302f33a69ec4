#pragma once
// ALiBi slopes (Press et al. 2022), the one implementation every library uses: lib/rollout's
// kernels (recipes "simple" and "hf"), lib/nn's attention (the trainer's models and Hugging Face
// BLOOM imports through lib/hf) and lib/gpu. It lives in lib/core because lib/rollout does not
// link lib/nn and lib/nn must not include lib/rollout (a library never includes one above it).
#include <cmath>
#include <string>
#include <vector>

#include "cf/core/error.hpp"

namespace cf {

/// ALiBi slopes, recipe `simple`: m_h = 2^(-8h/H), h = 1..H, for any H >= 1 (the reference code of
/// Position bias (Herasimchyk et al.); the trainer's ALiBi models). Throws cf::InvalidArgument for H < 1.
inline std::vector<double> alibi_slopes_simple(int H) {
  require(H >= 1, "alibi slopes: H >= 1 required, got H = ", H);
  std::vector<double> s(static_cast<std::size_t>(H));
  for (int h = 1; h <= H; ++h) s[static_cast<std::size_t>(h - 1)] = std::exp2(-8.0 * h / H);
  return s;
}

/// ALiBi slopes, recipe `hf`: Hugging Face BLOOM's build_alibi_tensor for any head count H >= 1.
/// With P = 2^floor(log2 H) (the closest power of two not above H) the first P slopes are
/// 2^(-8k/P), k = 1..P; the remaining H - P heads take every other slope of the 2P-head sequence,
/// 2^(-4k/P) for the odd k = 1, 3, ..., 2(H-P)-1 (BLOOM-176B: H = 112, P = 64). For H a power of two
/// both recipes agree. Throws cf::InvalidArgument for H < 1.
inline std::vector<double> alibi_slopes_hf(int H) {
  require(H >= 1, "alibi slopes: H >= 1 required, got H = ", H);
  int P = 1;
  while (2 * P <= H) P *= 2;
  std::vector<double> s;
  s.reserve(static_cast<std::size_t>(H));
  for (int k = 1; k <= P; ++k) s.push_back(std::exp2(-8.0 * k / P));
  for (int k = 1; k <= 2 * (H - P) - 1; k += 2) s.push_back(std::exp2(-4.0 * k / P));
  return s;
}

/// Dispatch on the recipe name "simple" | "hf"; throws cf::InvalidArgument otherwise.
inline std::vector<double> alibi_slopes(const std::string& recipe, int H) {
  if (recipe == "simple") return alibi_slopes_simple(H);
  if (recipe == "hf") return alibi_slopes_hf(H);
  throw InvalidArgument(str("slopes: expected 'simple' or 'hf', got '", recipe, "'"));
}

}  // namespace cf
