#pragma once
// Tiled softmax attention of one head of one sequence (issue 12): the forward visits only the key
// tiles that hold admitted keys of a query tile (a detail::TilePlan made from lib/graph's interval
// masks) with an online softmax (running max and sum), so no T x T matrix is ever stored; it saves
// one log-sum-exp per row and branch. The backward recomputes the probabilities tile by tile from
// Q, K and those statistics (FlashAttention-2 style, D_i = dO_i . O_i per branch).
//
// The loop is generic over the variant: a score policy (cf/nn/detail/variants/score_policy.hpp)
// computes a tile's logits and its backward contribution; the variants are units of their own:
// variants/dot.hpp (every mask family), variants/sd.hpp (S-D), variants/runway.hpp (runway
// dot/bilinear), variants/alibi.hpp (ALiBi over any of them). The logits equal the dense oracle's
// (cf/nn/detail/attention.hpp). Internal to lib/nn.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/detail/variants/alibi.hpp"
#include "cf/nn/detail/variants/dot.hpp"
#include "cf/nn/detail/variants/runway.hpp"
#include "cf/nn/detail/variants/score_policy.hpp"
#include "cf/nn/detail/variants/sd.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

/// Forward of query tile qt of one head, every branch, with score policy `sc`. y (T x dh, stride
/// ldy) rows of the tile are overwritten with the sum of the branch outputs; obr (null when there
/// is one branch): branch outputs, nb blocks of T x dh (stride dh); lse: nb x T log-sum-exp per
/// row (-inf where the branch admits no key of the row).
template <class T, class Scores>
void tiled_forward_qtile(const HeadQKV<T>& h, const Scores& sc, const TilePlan& plan, int qt, T* y, std::int64_t ldy,
                         T* obr, T* lse) {
  const int i0 = qt * kTile, ni = std::min(h.Tn, i0 + kTile) - i0, dh = h.dh;
  const T ninf = -std::numeric_limits<T>::infinity();
  auto V = h.V();
  SMap<T> Y(y + static_cast<std::int64_t>(i0) * ldy, ni, dh, Eigen::OuterStride<>(ldy));
  thread_local TileMat<T> S, P;
  thread_local MatR<T> O;
  thread_local typename Scores::Scratch scratch;
  thread_local Eigen::Matrix<T, Eigen::Dynamic, 1> mx, sum, mnew;
  const BranchRows* rows = nullptr;
  const std::size_t nb = plan.branches.size();
  // packing-free products (cf/nn/detail/tile_gemm.hpp); the logits read the head's keys transposed
  // by the caller (h.kt, once per head: heads_forward_tiled), or use Eigen's product without them
  const bool fast = tile_gemm_enabled() && tile_gemm_ok<T>(dh);
  HeadQKV<T> hq = h;
  if (!fast || !Scores::kTransposedKeys) hq.kt = nullptr;
  for (std::size_t br = 0; br < nb; ++br) {
    const std::vector<KeyTile>& rects = plan.tiles[br][static_cast<std::size_t>(qt)];
    if (rects.empty()) {  // no row of the tile admits a key in this branch: no mass, output 0
      std::fill(lse + br * h.Tn + i0, lse + br * h.Tn + i0 + ni, ninf);
      if (br == 0) Y.setZero();
      if (obr) std::fill(obr + (br * h.Tn + i0) * dh, obr + (br * h.Tn + i0 + ni) * dh, T(0));
      continue;
    }
    O.setZero(ni, dh);
    mx.setConstant(ni, ninf);
    sum.setZero(ni);
    rows = &plan.branches[br];
    for (const KeyTile& kt : rects) {
      const int r0 = kt.r0, nr = kt.nr, ia = i0 + r0, j0 = kt.j0, nj = kt.nj;  // rows ia.., keys j0..
      sc.logits(hq, ia, nr, j0, nj, S, scratch);
      if (!kt.full)
        for (int r = 0; r < nr; ++r) fill_unadmitted(*rows, ia + r, j0, nj, S.row(r).data(), ninf);
      mnew = mx.segment(r0, nr).cwiseMax(S.rowwise().maxCoeff());
      P.resize(nr, nj);
      for (int r = 0; r < nr; ++r) {
        if (mnew(r) == ninf) {  // nothing admitted in this row so far
          P.row(r).setZero();
          continue;
        }
        P.row(r) = (S.row(r).array() - mnew(r)).exp();
        // masked entries exactly 0 (Eigen's vectorised exp clamps -inf to a tiny positive value)
        if (!kt.full) fill_unadmitted(*rows, ia + r, j0, nj, P.row(r).data(), T(0));
        // rescale what the row holds so far (nothing yet on its first visited rectangle: O's row
        // and the sum are 0; an unchanged maximum leaves them as they are)
        const T m_old = mx(r0 + r);
        if (m_old == ninf) {
          sum(r0 + r) = P.row(r).sum();
        } else if (m_old == mnew(r)) {
          sum(r0 + r) += P.row(r).sum();
        } else {
          const T corr = std::exp(m_old - mnew(r));
          sum(r0 + r) = sum(r0 + r) * corr + P.row(r).sum();
          O.row(r0 + r) *= corr;
        }
      }
      if (fast)
        nn_product_acc(nr, dh, nj, P.data(), nj, 1, h.v + j0 * h.ld, h.ld, O.data() + r0 * dh, dh, T(1));
      else
        O.middleRows(r0, nr).noalias() += P * V.middleRows(j0, nj);
      mx.segment(r0, nr) = mnew;
    }
    for (int r = 0; r < ni; ++r) {
      const bool any = sum(r) > T(0);
      if (any) O.row(r) /= sum(r);
      lse[br * h.Tn + i0 + r] = any ? mx(r) + std::log(sum(r)) : ninf;
    }
    if (br == 0)
      Y = O;
    else
      Y += O;
    if (obr) SMap<T>(obr + (br * h.Tn + i0) * dh, ni, dh, Eigen::OuterStride<>(dh)) = O;
  }
}

/// Probabilities of rectangle kt of query tile (rows from i0) of branch br from the saved
/// log-sum-exp (0 outside the mask): kt.nr x kt.nj, rows i0 + kt.r0.., keys kt.j0...
template <class T, class Scores>
void tile_probs(const HeadQKV<T>& h, const Scores& sc, const TilePlan& plan, std::size_t br, int i0_tile,
                const KeyTile& kt, const T* lse, TileMat<T>& S, TileMat<T>& P, typename Scores::Scratch& scratch) {
  const int i0 = i0_tile + kt.r0, ni = kt.nr, j0 = kt.j0, nj = kt.nj;
  sc.logits(h, i0, ni, j0, nj, S, scratch);
  P.resize(ni, nj);
  for (int r = 0; r < ni; ++r) {
    const T l = lse[br * h.Tn + i0 + r];
    if (l == -std::numeric_limits<T>::infinity()) {
      P.row(r).setZero();
      continue;
    }
    P.row(r) = (S.row(r).array() - l).exp();
    // exactly 0 outside the mask (the unmasked logit there is finite, so exp gave a number)
    if (!kt.full) fill_unadmitted(plan.branches[br], i0 + r, j0, nj, P.row(r).data(), T(0));
  }
}

/// Backward of tiled_forward_qtile over every query tile of one head (serial: dK, dV accumulate
/// across query tiles). dy: T x dh (stride ldy); y: the forward's summed output (stride ldy) used
/// when there is one branch, else obr; lse from the forward. dQ, dK, dV accumulate into g; the
/// variant's own gradients go where its policy points.
template <class T, class Scores>
void tiled_backward_head(const HeadQKV<T>& h, const Scores& sc, const TilePlan& plan, const T* dy, std::int64_t ldy,
                         const T* y, const T* obr, const T* lse, const HeadQKVGrads<T>& g) {
  const int dh = h.dh, Tn = h.Tn;
  const std::size_t nb = plan.branches.size();
  auto V = h.V();
  CSMap<T> dY(dy, Tn, dh, Eigen::OuterStride<>(ldy));
  auto dV = g.dV(h);
  thread_local TileMat<T> S, P, dP, dS;
  thread_local typename Scores::Scratch scratch;
  thread_local Eigen::Matrix<T, Eigen::Dynamic, 1> D;
  // packing-free products (cf/nn/detail/tile_gemm.hpp): keys and values of the head transposed once
  const bool fast = tile_gemm_enabled() && tile_gemm_ok<T>(dh);
  HeadQKV<T> hq = h;
  thread_local KeysT<T> keys, values;
  if (!fast) hq.kt = nullptr;
  if (fast) {
    const std::vector<std::pair<int, int>> all{{0, Tn}};
    if (Scores::kTransposedKeys && !h.kt) {
      keys.build(h.k, h.ld, dh, all);
      hq.kt = &keys;
    }
    values.build(h.v, h.ld, dh, all);
  }
  for (std::size_t br = 0; br < nb; ++br) {
    D.resize(Tn);
    for (int i = 0; i < Tn; ++i) {
      if (plan.tiles[br][static_cast<std::size_t>(i / kTile)].empty()) continue;  // rows the branch never visits
      const T* o = nb == 1 ? y + static_cast<std::int64_t>(i) * ldy : obr + (br * Tn + i) * dh;
      // Eigen's vectorised dot (a plain loop is one dependent add per element: no reassociation)
      D(i) = dY.row(i).dot(Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(o, dh));
    }
    for (int qt = 0; qt < plan.n_tiles; ++qt) {
      const int i0 = qt * kTile;
      for (const KeyTile& kt : plan.tiles[br][static_cast<std::size_t>(qt)]) {
        const int ia = i0 + kt.r0, nr = kt.nr, j0 = kt.j0, nj = kt.nj;
        tile_probs(hq, sc, plan, br, i0, kt, lse, S, P, scratch);
        if (fast) {  // dV_J += P^T dY_I (P read transposed); dP = dY_I V_J^T
          nn_product_acc(nj, dh, nr, P.data(), 1, nj, dy + ia * ldy, ldy, g.dv + j0 * g.ld, g.ld, T(1));
          dP.resize(nr, nj);
          nt_product(nr, nj, dh, dy + ia * ldy, ldy, values.col(j0), values.ld, dP.data(), nj, T(1));
        } else {
          dV.middleRows(j0, nj).noalias() += P.transpose() * dY.middleRows(ia, nr);
          dP.resize(nr, nj);
          dP.noalias() = dY.middleRows(ia, nr) * V.middleRows(j0, nj).transpose();
        }
        dS.resize(nr, nj);
        dS = P.array() * (dP.array().colwise() - D.segment(ia, nr).array());
        sc.backward(hq, g, ia, nr, j0, nj, dS, scratch);
      }
    }
  }
}

/// Materialise the probabilities of one head (summed over branches) into P (T x T row-major,
/// zero outside the masks), from Q, K and the saved log-sum-exp: the capture path.
template <class T, class Scores>
void tiled_probs_head(const HeadQKV<T>& h, const Scores& sc, const TilePlan& plan, const T* lse, float* out) {
  const int Tn = h.Tn;
  std::fill(out, out + static_cast<std::size_t>(Tn) * Tn, 0.f);
  TileMat<T> S, P;
  typename Scores::Scratch scratch;
  for (std::size_t br = 0; br < plan.branches.size(); ++br)
    for (int qt = 0; qt < plan.n_tiles; ++qt) {
      const int i0 = qt * kTile;
      for (const KeyTile& kt : plan.tiles[br][static_cast<std::size_t>(qt)]) {
        tile_probs(h, sc, plan, br, i0, kt, lse, S, P, scratch);
        for (int r = 0; r < kt.nr; ++r)
          for (int cc = 0; cc < kt.nj; ++cc)
            out[static_cast<std::size_t>(i0 + kt.r0 + r) * Tn + kt.j0 + cc] += static_cast<float>(P(r, cc));
      }
    }
}

}  // namespace cf::nn::detail
