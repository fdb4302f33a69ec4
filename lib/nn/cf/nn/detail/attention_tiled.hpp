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
// dot/bilinear), variants/alibi.hpp (ALiBi over any of them). The logits equal the unit's dense
// oracle's (variants/unit.hpp). Internal to lib/nn.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cf/nn/detail/attention_dense.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/detail/variants/alibi.hpp"
#include "cf/nn/detail/variants/score_policy.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

/// Logits of rectangle kt (rows ia..): computed, or copied from the query tile's share buffer when an
/// earlier branch visited the same rectangle (KeyTile::share_off; the logits do not depend on the
/// branch). Policies whose logits leave per-tile values in Scratch for the backward (runway) always
/// compute them; so does a null share buffer.
template <class T, class Scores>
void tile_logits(const HeadQKV<T>& h, const Scores& sc, const KeyTile& kt, int ia, T* share, TileMat<T>& S,
                 typename Scores::Scratch& scratch) {
  const bool shared = std::is_empty_v<typename Scores::Scratch> && share && kt.share_off >= 0;
  if (shared && !kt.share_first) {
    S.resize(kt.nr, kt.nj);
    std::copy(share + kt.share_off, share + kt.share_off + kt.nr * kt.nj, S.data());
    return;
  }
  sc.logits(h, ia, kt.nr, kt.j0, kt.nj, S, scratch);
  if (shared) std::copy(S.data(), S.data() + kt.nr * kt.nj, share + kt.share_off);
}

/// Forward of query tile qt of one head, every branch, with score policy `sc`. y (T x dh, stride
/// ldy) rows of the tile are overwritten with the sum of the branch outputs; obr (null when there
/// is one branch): the outputs of branches 0 .. nb-2, nb-1 blocks of T x dh (stride dh), for the
/// backward's D = dO . O_branch (the last branch's is y minus their sum: one block less to write
/// and to keep); lse: nb x T log-sum-exp per row (-inf where the branch admits no key of the row).
template <class T, class Scores>
void tiled_forward_qtile(const HeadQKV<T>& h, const Scores& sc, const TilePlan& plan, int qt, T* y, std::int64_t ldy,
                         T* obr, T* lse) {
  const int i0 = qt * kTile, ni = std::min(h.Tn, i0 + kTile) - i0, dh = h.dh;
  const T ninf = -std::numeric_limits<T>::infinity();
  auto V = h.V();
  SMap<T> Y(y + static_cast<std::int64_t>(i0) * ldy, ni, dh, Eigen::OuterStride<>(ldy));
  thread_local TileMat<T> S, P;
  thread_local MatR<T> O_own;  // the last branch's output (several branches)
  thread_local typename Scores::Scratch scratch;
  thread_local Eigen::Matrix<T, Eigen::Dynamic, 1> mx, sum;
  const BranchRows* rows = nullptr;
  const std::size_t nb = plan.branches.size();
  thread_local std::vector<T, Eigen::aligned_allocator<T>> share;  // logits of rectangles several branches visit
  share.resize(static_cast<std::size_t>(plan.share_size[static_cast<std::size_t>(qt)]));
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
      if (obr && br + 1 < nb) std::fill(obr + (br * h.Tn + i0) * dh, obr + (br * h.Tn + i0 + ni) * dh, T(0));
      continue;
    }
    // the branch output accumulates where it is kept (the tile's rows of y with one branch, of
    // obr with several, a scratch tile for the last: no copy of a 64 x dh buffer per branch and tile)
    T* o_ptr;
    std::int64_t ldo;
    if (nb == 1) {
      o_ptr = Y.data(), ldo = ldy;
    } else if (obr && br + 1 < nb) {
      o_ptr = obr + (br * h.Tn + i0) * dh, ldo = dh;
    } else {
      O_own.resize(ni, dh);
      o_ptr = O_own.data(), ldo = dh;
    }
    SMap<T> O(o_ptr, ni, dh, Eigen::OuterStride<>(ldo));
    O.setZero();
    mx.setConstant(ni, ninf);
    sum.setZero(ni);
    rows = &plan.branches[br];
    for (const KeyTile& kt : rects) {
      const int r0 = kt.r0, nr = kt.nr, ia = i0 + r0, j0 = kt.j0, nj = kt.nj;  // rows ia.., keys j0..
      tile_logits(hq, sc, kt, ia, share.data(), S, scratch);
      if (!kt.full)
        for (int r = 0; r < nr; ++r) fill_unadmitted(*rows, ia + r, j0, nj, S.row(r).data(), ninf);
      P.resize(nr, nj);
      for (int r = 0; r < nr; ++r) {
        const T m_old = mx(r0 + r), m_new = std::max(m_old, row_max(S.row(r).data(), nj));
        mx(r0 + r) = m_new;
        if (m_new == ninf) {  // nothing admitted in this row so far
          P.row(r).setZero();
          continue;
        }
        // masked entries (-inf) give exactly 0
        const T row_sum = exp_shift_row(S.row(r).data(), m_new, nj, P.row(r).data());
        // rescale what the row holds so far (nothing yet on its first visited rectangle: O's row
        // and the sum are 0; an unchanged maximum leaves them as they are)
        if (m_old == ninf) {
          sum(r0 + r) = row_sum;
        } else if (m_old == m_new) {
          sum(r0 + r) += row_sum;
        } else {
          const T corr = std::exp(m_old - m_new);
          sum(r0 + r) = sum(r0 + r) * corr + row_sum;
          O.row(r0 + r) *= corr;
        }
      }
      if (fast)
        nn_product_acc(nr, dh, nj, P.data(), nj, 1, h.v + j0 * h.ld, h.ld, o_ptr + r0 * ldo, ldo, T(1));
      else
        O.middleRows(r0, nr).noalias() += P * V.middleRows(j0, nj);
    }
    for (int r = 0; r < ni; ++r) {
      const bool any = sum(r) > T(0);
      if (any) O.row(r) /= sum(r);
      lse[br * h.Tn + i0 + r] = any ? mx(r) + std::log(sum(r)) : ninf;
    }
    if (nb == 1) continue;  // O is Y
    if (br == 0)
      Y = O;
    else
      Y += O;
  }
}

/// Probabilities of rectangle kt of query tile (rows from i0) of branch br from the saved
/// log-sum-exp (0 outside the mask): kt.nr x kt.nj, rows i0 + kt.r0.., keys kt.j0... share: the
/// query tile's share buffer (tile_logits) or null.
template <class T, class Scores>
void tile_probs(const HeadQKV<T>& h, const Scores& sc, const TilePlan& plan, std::size_t br, int i0_tile,
                const KeyTile& kt, const T* lse, T* share, TileMat<T>& S, TileMat<T>& P,
                typename Scores::Scratch& scratch) {
  const int i0 = i0_tile + kt.r0, ni = kt.nr, j0 = kt.j0, nj = kt.nj;
  tile_logits(h, sc, kt, i0, share, S, scratch);
  P.resize(ni, nj);
  for (int r = 0; r < ni; ++r) {
    const T l = lse[br * h.Tn + i0 + r];
    if (l == -std::numeric_limits<T>::infinity()) {
      P.row(r).setZero();
      continue;
    }
    // exactly 0 outside the mask: masked logits set to -inf first (exp_shift_row zeroes them)
    if (!kt.full)
      fill_unadmitted(plan.branches[br], i0 + r, j0, nj, S.row(r).data(), -std::numeric_limits<T>::infinity());
    exp_shift_row(S.row(r).data(), l, nj, P.row(r).data());
  }
}

/// Backward of tiled_forward_qtile over every query tile of one head (serial: dK, dV accumulate
/// across query tiles). dy: T x dh (stride ldy); y: the forward's summed output (stride ldy) and
/// obr (branches 0 .. nb-2), lse as the forward wrote them. dQ, dK, dV accumulate into g; the
/// variant's own gradients go where its policy points. A rectangle several branches visit
/// (KeyTile::share_off) computes its logits and dP = dY V^T once, and its products once with the
/// branches' P and dS summed: dV_J += (sum_b P_b)^T dY_I and the policy's backward of sum_b dS_b are
/// linear in them.
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
  using Buf = std::vector<T, Eigen::aligned_allocator<T>>;
  thread_local Buf sh_s, sh_dp, sh_p, sh_ds;  // per shared rectangle: logits, dP, sum of P, sum of dS
  // packing-free products (cf/nn/detail/tile_gemm.hpp): keys and values of the head transposed once
  const bool fast = tile_gemm_enabled() && tile_gemm_ok<T>(dh);
  constexpr bool can_share = std::is_empty_v<typename Scores::Scratch>;  // tile_logits
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
  // D_i = dO_i . O_i per branch and row (FlashAttention-2); rows a branch never visits are skipped
  D.resize(static_cast<Eigen::Index>(nb) * Tn);
  for (std::size_t br = 0; br < nb; ++br)
    for (int i = 0; i < Tn; ++i) {
      if (plan.tiles[br][static_cast<std::size_t>(i / kTile)].empty()) continue;
      // the last branch: O = y - sum of the others, so D = dO . y - the others' D (0 for a branch
      // that visits nothing in the row's tile: its output there is 0)
      const bool last = br + 1 == nb;
      const T* o = last ? y + static_cast<std::int64_t>(i) * ldy : obr + (br * Tn + i) * dh;
      // Eigen's vectorised dot (a plain loop is one dependent add per element: no reassociation)
      T d = dY.row(i).dot(Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(o, dh));
      if (last)
        for (std::size_t b = 0; b + 1 < nb; ++b)
          if (!plan.tiles[b][static_cast<std::size_t>(i / kTile)].empty())
            d -= D(static_cast<Eigen::Index>(b) * Tn + i);
      D(static_cast<Eigen::Index>(br) * Tn + i) = d;
    }
  for (int qt = 0; qt < plan.n_tiles; ++qt) {
    const int i0 = qt * kTile;
    const std::size_t nsh = can_share ? static_cast<std::size_t>(plan.share_size[static_cast<std::size_t>(qt)]) : 0;
    for (Buf* b : {&sh_s, &sh_dp, &sh_p, &sh_ds}) b->resize(nsh);
    for (std::size_t br = 0; br < nb; ++br)
      for (const KeyTile& kt : plan.tiles[br][static_cast<std::size_t>(qt)]) {
        const int ia = i0 + kt.r0, nr = kt.nr, j0 = kt.j0, nj = kt.nj, n = nr * nj;
        const bool shared = can_share && kt.share_off >= 0;
        tile_probs(hq, sc, plan, br, i0, kt, lse, sh_s.data(), S, P, scratch);
        dP.resize(nr, nj);
        if (shared && !kt.share_first) {
          std::copy(sh_dp.begin() + kt.share_off, sh_dp.begin() + kt.share_off + n, dP.data());
        } else {
          if (fast)  // dP = dY_I V_J^T
            nt_product(nr, nj, dh, dy + ia * ldy, ldy, values.col(j0), values.ld, dP.data(), nj, T(1));
          else
            dP.noalias() = dY.middleRows(ia, nr) * V.middleRows(j0, nj).transpose();
          if (shared) std::copy(dP.data(), dP.data() + n, sh_dp.begin() + kt.share_off);
        }
        dS.resize(nr, nj);
        dS = P.array() * (dP.array().colwise() - D.segment(static_cast<Eigen::Index>(br) * Tn + ia, nr).array());
        if (shared) {  // sum P and dS over the branches holding the rectangle; the last one runs the products
          Eigen::Map<MatR<T>> sp(sh_p.data() + kt.share_off, nr, nj), sds(sh_ds.data() + kt.share_off, nr, nj);
          if (kt.share_first) {
            sp = P;
            sds = dS;
          } else if (!kt.share_last) {
            sp += P;
            sds += dS;
          } else {
            P += sp;
            dS += sds;
          }
          if (!kt.share_last) continue;
        }
        if (fast)  // dV_J += P^T dY_I (P read transposed)
          nn_product_acc(nj, dh, nr, P.data(), 1, nj, dy + ia * ldy, ldy, g.dv + j0 * g.ld, g.ld, T(1));
        else
          dV.middleRows(j0, nj).noalias() += P.transpose() * dY.middleRows(ia, nr);
        sc.backward(hq, g, ia, nr, j0, nj, dS, scratch);
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
        tile_probs(h, sc, plan, br, i0, kt, lse, static_cast<T*>(nullptr), S, P, scratch);
        for (int r = 0; r < kt.nr; ++r)
          for (int cc = 0; cc < kt.nj; ++cc)
            out[static_cast<std::size_t>(i0 + kt.r0 + r) * Tn + kt.j0 + cc] += static_cast<float>(P(r, cc));
      }
    }
}

}  // namespace cf::nn::detail
