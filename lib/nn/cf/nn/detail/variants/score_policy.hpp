#pragma once
// What every tiled-attention variant unit sees (issue 12): the head's Q, K, V and the gradient
// outputs dQ, dK, dV. A variant is a score policy type P<T> with
//
//   struct Scratch;  // per-tile values the logits leave for the backward (e.g. runway tau)
//   void logits(const HeadQKV<T>&, int i0, int ni, int j0, int nj, TileMat<T>& S, Scratch&) const;
//   void backward(const HeadQKV<T>&, const HeadQKVGrads<T>&, int i0, int ni, int j0, int nj,
//                 TileMat<T>& dS, const Scratch&) const;
//
// logits writes the ni x nj logits of query rows [i0, i0+ni) and keys [j0, j0+nj) before masking;
// backward gets dS = d loss / d logits of the same tile (zero outside the mask; it may overwrite
// it) and accumulates dQ, dK and the variant's own gradients (through pointers it holds). The
// shared tile loop (cf/nn/detail/attention_tiled.hpp) is a template over the policy, so there is no
// per-score virtual call. Internal to lib/nn.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "cf/nn/detail/attention_dense.hpp"
#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

/// The row-major matrix of one rectangle (logits, probabilities, their gradients): an Eigen map
/// into storage that only grows, so that rectangles of changing shapes (16 x 16 diagonal pieces,
/// 16 x 144 window groups, 64 x 64 tiles) reuse it; a MatR reallocates whenever its size changes
/// (1.5% of the SE-Bridge attention time in malloc/free). resize() before writing: assignment to a
/// map does not resize it.
template <class T>
class TileMat : public Eigen::Map<MatR<T>> {
  using Base = Eigen::Map<MatR<T>>;
  std::vector<T, Eigen::aligned_allocator<T>> buf_;

 public:
  TileMat() : Base(nullptr, 0, 0) {}
  TileMat(const TileMat&) = delete;
  TileMat& operator=(const TileMat&) = delete;
  using Base::operator=;
  void resize(Eigen::Index rows, Eigen::Index cols) {
    if (static_cast<std::size_t>(rows * cols) > buf_.size()) buf_.resize(static_cast<std::size_t>(rows * cols));
    new (static_cast<Base*>(this)) Base(buf_.data(), rows, cols);  // re-seat the map (Eigen's documented idiom)
  }
};

/// Keys of a head transposed (dh x columns, row stride ld) in runs: keys [start, end) of a run sit
/// at columns off..; made by the tile loop for the keys a query tile (or head) visits.
template <class T>
struct KeysT {
  struct Run {
    int start, end;
    std::int64_t off;
  };
  std::vector<T, Eigen::aligned_allocator<T>> data;  // 64-byte rows when ld allows: aligned loads
  std::int64_t ld = 0;
  std::vector<Run> runs;
  /// Column of key j (inside a run).
  const T* col(int j) const {
    for (const Run& r : runs)
      if (j >= r.start && j < r.end) return data.data() + r.off + (j - r.start);
    return nullptr;
  }
  /// The keys [lo, hi) of every interval in `spans` (sorted by lo), transposed from X (row stride
  /// ldx); overlapping or adjacent spans share a run.
  void build(const T* X, std::int64_t ldx, int dh, const std::vector<std::pair<int, int>>& spans) {
    runs.clear();
    for (const auto& s : spans)
      if (!runs.empty() && s.first <= runs.back().end)
        runs.back().end = std::max(runs.back().end, s.second);
      else
        runs.push_back({s.first, s.second, 0});
    std::int64_t cols = 0;
    for (Run& r : runs) {
      r.off = cols;
      cols += r.end - r.start;
    }
    constexpr int W = TileVec<T>::W;
    ld = (cols + W - 1) / W * W + kTransposePad<T>;  // whole vectors per row: aligned rows
    data.resize(static_cast<std::size_t>(ld) * dh);
    for (const Run& r : runs) transpose_keys(X, ldx, r.start, r.end - r.start, dh, data.data() + r.off, ld);
    // columns between runs and the slack after the last: finite (zero) values for whole-vector reads
    for (int e = 0; e < dh; ++e) std::fill(data.data() + e * ld + cols, data.data() + (e + 1) * ld, T(0));
  }
};

/// One head of one sequence: q, k, v (T x dh, row stride ld); kt: its visited keys transposed
/// (null: the policies use Eigen products).
template <class T>
struct HeadQKV {
  int Tn = 0, dh = 0;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t ld = 0;
  const KeysT<T>* kt = nullptr;
  CSMap<T> Q() const { return CSMap<T>(q, Tn, dh, Eigen::OuterStride<>(ld)); }
  CSMap<T> K() const { return CSMap<T>(k, Tn, dh, Eigen::OuterStride<>(ld)); }
  CSMap<T> V() const { return CSMap<T>(v, Tn, dh, Eigen::OuterStride<>(ld)); }
};

/// Gradient outputs dq, dk, dv of one head (T x dh, row stride ld, accumulated +=).
template <class T>
struct HeadQKVGrads {
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  std::int64_t ld = 0;
  SMap<T> dQ(const HeadQKV<T>& h) const { return SMap<T>(dq, h.Tn, h.dh, Eigen::OuterStride<>(ld)); }
  SMap<T> dK(const HeadQKV<T>& h) const { return SMap<T>(dk, h.Tn, h.dh, Eigen::OuterStride<>(ld)); }
  SMap<T> dV(const HeadQKV<T>& h) const { return SMap<T>(dv, h.Tn, h.dh, Eigen::OuterStride<>(ld)); }
};

}  // namespace cf::nn::detail
