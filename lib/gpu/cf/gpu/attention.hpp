#pragma once
// Host side of the tiled attention kernels (cf/gpu/kernels/attention.cuh): the mask of one
// layer as per-row interval lists per branch plus the tile visit lists, built once per (layer,
// T) on the host. The tiles a query tile visits are exactly those holding an admitted key of one
// of its rows, so the work follows the mask's score count (seed 002 Table 2), not T^2.
#include <cstdint>
#include <vector>

#include "cf/gpu/kernels/attention.cuh"

namespace cf::gpu {

/// Tile edge of the attention kernels (query and key tiles; one thread per row).
inline constexpr int kAttentionTile = 32;

/// A layer's mask in tiled form, on the host (see kernels::MaskView for the layout).
struct TiledMask {
  int T = 0, nb = 0, ntiles = 0;
  std::vector<int> row_ptr, iv_lo, iv_hi, qt_ptr, qt_list, kt_ptr, kt_list;
  /// Admitted (row, key) pairs summed over branches (the score count).
  std::int64_t scores = 0;
  /// Key tiles visited summed over query tiles and branches.
  std::int64_t tiles_visited = 0;
  /// View with host pointers (valid while this object lives unchanged).
  kernels::MaskView view() const;
};

/// Build from dense 0/1 branch masks (masks[br] is T x T row-major, row = query; the trainer's
/// representation, lib/nn). Throws cf::InvalidArgument if a mask admits a key after its query
/// (not causal) or a row needs more than kernels::kMaxIntervals intervals.
TiledMask tiled_mask_from_dense(const std::vector<const std::uint8_t*>& masks, int T);

/// Shapes of one attention call: B sequences, H heads, T positions, head dimension dh (<= 128),
/// logit scale (1/sqrt(dh)).
struct AttentionShape {
  int B = 1, H = 1, T = 1, dh = 1;
  float scale = 1;
};

}  // namespace cf::gpu
