#pragma once
// Host side of the tiled attention kernels (cf/gpu/kernels/attention.cuh): the mask of one
// layer as per-row interval lists per branch plus the tile visit lists, built once per (layer,
// T) on the host. The tiles a query tile visits are exactly those holding an admitted key of one
// of its rows, so the work follows the mask's score count (Boundary repair (Yang) Table 2), not T^2.
#include <cstdint>
#include <vector>

#include "cf/gpu/kernels/attention.cuh"
#include "cf/gpu/precision.hpp"

namespace cf::gpu {

/// Tile edge of the attention kernels (query and key tiles; one thread per row).
inline constexpr int kAttentionTile = 32;

/// A layer's mask in tiled form, on the host (see kernels::MaskView for the layout).
struct TiledMask {
  int T = 0, nb = 0, ntiles = 0;
  std::vector<int> row_ptr, iv_lo, iv_hi, qt_ptr, qt_list, kt_ptr, kt_list;
  /// The FlashAttention-2 kernels' tile plan on kernels::kFlashTile tiles (ftiles per side):
  /// the non-empty tiles only, each flagged full or partial (kernels::MaskView).
  int ftiles = 0;
  std::vector<int> fq_ptr, fq_list, fk_ptr, fk_list;
  /// Admitted (row, key) pairs summed over branches (the score count).
  std::int64_t scores = 0;
  /// Key tiles visited summed over query tiles and branches.
  std::int64_t tiles_visited = 0;
  /// The same for the plan's tiles, and how many of them are full.
  std::int64_t flash_tiles_visited = 0, flash_tiles_full = 0;
  /// View with host pointers (valid while this object lives unchanged).
  kernels::MaskView view() const;
};

/// Build from dense 0/1 branch masks (masks[br] is T x T row-major, row = query; the trainer's
/// representation, lib/nn). Throws cf::InvalidArgument if a mask admits a key after its query
/// (not causal) or a row needs more than kernels::kMaxIntervals intervals.
TiledMask tiled_mask_from_dense(const std::vector<const std::uint8_t*>& masks, int T);

/// Shapes of one attention call: B sequences, H heads, T positions, head dimension dh (<= 128),
/// logit scale (1/sqrt(dh)), and the precision of the plain heads' products (the trainer's
/// policy: under tf32 / bf16 the operands are rounded, docs/gpu.md "Tensor-core flash attention").
struct AttentionShape {
  int B = 1, H = 1, T = 1, dh = 1;
  float scale = 1;
  Precision precision = Precision::Fp32;
};

/// S-D and runway inputs of a tiled attention call (the twin of cf::nn::detail::TiledHead's
/// damp / runway fields; pointers where the kernels run, null = feature off).
struct AttentionExtras {
  /// S-D (skew logits scale (q_i.k_j - k_i.q_j) with diagonal damping): damping [B, H, T].
  const float* damp = nullptr;
  /// Runway rewiring (Runway (Lee & Clark) Eqs. 8-14): the last head's values of sequence b at
  /// runway_v + b * runway_stride, T rows of dh floats; null = no runway.
  const float* runway_v = nullptr;
  std::int64_t runway_stride = 0;
  /// Bilinear runway form B [dh, dh] row-major (tau = v_{i-1}^T B v_m); null = dot form
  /// (tau = v_{i-1}.v_m / sqrt(dh)).
  const float* runway_B = nullptr;
};

/// Gradients of the AttentionExtras inputs (accumulated, +=; null where the feature is off),
/// laid out as cf::nn::detail::TiledGrads per (sequence, head): ddamp [B, H, T]; runway dvs
/// [B, H, T, dh] (row i holds d/d v_{i-1}), dvl [B, H, T, dh] (d/d v_m), dB [B, H, dh, dh]
/// (bilinear). The caller reduces dvs / dvl / dB over heads into the last head's values. A
/// bilinear runway with dB null computes no dB (nor its per-head sums): the seeded analysis passes.
struct AttentionExtraGrads {
  float* ddamp = nullptr;
  float* dvs = nullptr;
  float* dvl = nullptr;
  float* dB = nullptr;
};

}  // namespace cf::gpu
