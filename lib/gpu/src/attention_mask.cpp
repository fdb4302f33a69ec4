#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/gpu/attention.hpp"

namespace cf::gpu {

kernels::MaskView TiledMask::view() const {
  kernels::MaskView v;
  v.T = T, v.nb = nb, v.ntiles = ntiles;
  v.row_ptr = row_ptr.data(), v.iv_lo = iv_lo.data(), v.iv_hi = iv_hi.data();
  v.qt_ptr = qt_ptr.data(), v.qt_list = qt_list.data(), v.kt_ptr = kt_ptr.data(), v.kt_list = kt_list.data();
  v.ftiles = ftiles;
  v.fq_ptr = fq_ptr.data(), v.fq_list = fq_list.data(), v.fk_ptr = fk_ptr.data(), v.fk_list = fk_list.data();
  return v;
}

namespace {

// The tile plan of the flash kernels: per branch, the admitted pairs of every kFlashTile x
// kFlashTile tile counted from the row intervals; a tile with none is left out, a tile with all
// F^2 (hence no position past T) is full.
void build_flash_plan(TiledMask& m) {
  constexpr int F = kernels::kFlashTile;
  const int nf = (m.T + F - 1) / F;
  m.ftiles = nf;
  std::vector<std::int64_t> count(static_cast<std::size_t>(nf) * nf);
  for (int br = 0; br < m.nb; ++br) {
    std::fill(count.begin(), count.end(), 0);
    for (int i = 0; i < m.T; ++i) {
      const int row = br * (m.T + 1) + i;
      for (int c = m.row_ptr[row]; c < m.row_ptr[row + 1]; ++c)
        for (int kt = m.iv_lo[c] / F; kt <= m.iv_hi[c] / F; ++kt)
          count[static_cast<std::size_t>(i / F) * nf + kt] +=
              std::min(m.iv_hi[c], kt * F + F - 1) - std::max(m.iv_lo[c], kt * F) + 1;
    }
    auto entry = [&](int q, int k, int tile) {
      const std::int64_t n = count[static_cast<std::size_t>(q) * nf + k];
      return n == 0 ? -1 : tile << 1 | (n == std::int64_t(F) * F ? 1 : 0);
    };
    for (int q = 0; q < nf; ++q) {
      m.fq_ptr.push_back(static_cast<int>(m.fq_list.size()));
      for (int k = 0; k < nf; ++k)
        if (const int e = entry(q, k, k); e >= 0) {
          m.fq_list.push_back(e);
          ++m.flash_tiles_visited;
          m.flash_tiles_full += e & 1;
        }
    }
    m.fq_ptr.push_back(static_cast<int>(m.fq_list.size()));
    for (int k = 0; k < nf; ++k) {
      m.fk_ptr.push_back(static_cast<int>(m.fk_list.size()));
      for (int q = 0; q < nf; ++q)
        if (const int e = entry(q, k, q); e >= 0) m.fk_list.push_back(e);
    }
    m.fk_ptr.push_back(static_cast<int>(m.fk_list.size()));
  }
}

}  // namespace

TiledMask tiled_mask_from_dense(const std::vector<const std::uint8_t*>& masks, int T) {
  require(T >= 1, "tiled_mask_from_dense: T = ", T, " (need T >= 1)");
  require(!masks.empty(), "tiled_mask_from_dense: no branch mask");
  TiledMask m;
  m.T = T;
  m.nb = static_cast<int>(masks.size());
  m.ntiles = (T + kAttentionTile - 1) / kAttentionTile;
  const int nt = m.ntiles;
  m.row_ptr.reserve(static_cast<std::size_t>(m.nb) * (T + 1));
  std::vector<std::vector<char>> hit(static_cast<std::size_t>(m.nb) * nt, std::vector<char>(nt, 0));
  for (int br = 0; br < m.nb; ++br) {
    const std::uint8_t* M = masks[br];
    for (int i = 0; i < T; ++i) {
      m.row_ptr.push_back(static_cast<int>(m.iv_lo.size()));
      const std::uint8_t* r = M + static_cast<std::int64_t>(i) * T;
      int n = 0;
      for (int j = 0; j < T; ++j) {
        if (!r[j]) continue;
        require(j <= i, "tiled_mask_from_dense: branch ", br, " admits key ", j, " after query ", i, " (not causal)");
        if (j > 0 && r[j - 1]) {
          m.iv_hi.back() = j;
        } else {
          require(++n <= kernels::kMaxIntervals, "tiled_mask_from_dense: row ", i, " of branch ", br,
                  " needs more than ", kernels::kMaxIntervals, " key intervals");
          m.iv_lo.push_back(j);
          m.iv_hi.push_back(j);
        }
        ++m.scores;
        hit[static_cast<std::size_t>(br) * nt + i / kAttentionTile][j / kAttentionTile] = 1;
      }
    }
    m.row_ptr.push_back(static_cast<int>(m.iv_lo.size()));
  }
  for (int br = 0; br < m.nb; ++br) {
    for (int q = 0; q < nt; ++q) {
      m.qt_ptr.push_back(static_cast<int>(m.qt_list.size()));
      for (int k = 0; k < nt; ++k)
        if (hit[static_cast<std::size_t>(br) * nt + q][k]) m.qt_list.push_back(k), ++m.tiles_visited;
    }
    m.qt_ptr.push_back(static_cast<int>(m.qt_list.size()));
  }
  for (int br = 0; br < m.nb; ++br) {
    for (int k = 0; k < nt; ++k) {
      m.kt_ptr.push_back(static_cast<int>(m.kt_list.size()));
      for (int q = 0; q < nt; ++q)
        if (hit[static_cast<std::size_t>(br) * nt + q][k]) m.kt_list.push_back(q);
    }
    m.kt_ptr.push_back(static_cast<int>(m.kt_list.size()));
  }
  build_flash_plan(m);
  return m;
}

}  // namespace cf::gpu
