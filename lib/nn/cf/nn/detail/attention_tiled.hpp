#pragma once
// Tiled softmax attention of one head of one sequence (issue 12): the forward visits only the key
// tiles that hold admitted keys of a query tile (a detail::TilePlan made from lib/graph's interval
// masks) with an online softmax (running max and sum), so no T x T matrix is ever stored; it saves
// one log-sum-exp per row and branch. The backward recomputes the probabilities tile by tile from
// Q, K and those statistics (FlashAttention-2 style, D_i = dO_i . O_i per branch). The logits are
// the same as the dense oracle's (cf/nn/detail/attention.hpp): scale Q K^T (S-D: scale (Q K^T -
// K Q^T) - diag(damp)), minus the ALiBi bias slope (i - j), plus the runway bias log beta =
// -softplus(tau) with tau computed tile by tile from the last head's values. Internal to lib/nn.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn::detail {

/// Runway rewiring inputs of a layer (seed 000 Eqs. 8-14): the last head's values vl (T x dh,
/// stride ld) of this sequence; tau_{i,m} = c v_{i-1}.v_m (dot, c = 1/sqrt(dh)) or v_{i-1}^T B v_m
/// (bilinear, B dh x dh row-major); bias -softplus(tau) on the eligible edges 1 <= m <= i-2.
template <class T>
struct RunwayArgs {
  const T* vl = nullptr;
  std::int64_t ld = 0;
  const T* B = nullptr;  ///< null = dot form
};

/// One head of one sequence: q, k, v (T x dh, row stride ld); scale, S-D damping (T values, null =
/// not S-D), ALiBi slope (0 = none), runway (vl null = none).
template <class T>
struct TiledHead {
  int Tn = 0, dh = 0;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t ld = 0;
  T scale = 1;
  const T* damp = nullptr;
  T alibi = 0;
  RunwayArgs<T> runway;
};

/// Logits of rows [i0, i0+ni) x keys [j0, j0+nj) into S (ni x nj); where the runway bias applies,
/// tau receives the tile's tau (for the backward).
template <class T>
void tile_logits(const TiledHead<T>& h, int i0, int ni, int j0, int nj, MatR<T>& S, MatR<T>* tau) {
  CSMap<T> Q(h.q, h.Tn, h.dh, Eigen::OuterStride<>(h.ld)), K(h.k, h.Tn, h.dh, Eigen::OuterStride<>(h.ld));
  S.resize(ni, nj);
  S.noalias() = Q.middleRows(i0, ni) * K.middleRows(j0, nj).transpose();
  if (h.damp) {
    S.noalias() -= K.middleRows(i0, ni) * Q.middleRows(j0, nj).transpose();
    S *= h.scale;
    for (int r = 0; r < ni; ++r) {
      const int c = i0 + r - j0;
      if (c >= 0 && c < nj) S(r, c) -= h.damp[i0 + r];
    }
  } else {
    S *= h.scale;
  }
  if (h.alibi != T(0))
    for (int r = 0; r < ni; ++r)
      for (int c = 0; c < nj; ++c) S(r, c) -= h.alibi * T(i0 + r - (j0 + c));
  if (h.runway.vl) {
    CSMap<T> Vl(h.runway.vl, h.Tn, h.dh, Eigen::OuterStride<>(h.runway.ld));
    // rows i use v_{i-1}: rows [max(i0,1)-1, ...)
    const int r0 = i0 == 0 ? 1 : 0;
    tau->setZero(ni, nj);
    if (ni > r0) {
      auto Vs = Vl.middleRows(i0 + r0 - 1, ni - r0);
      if (h.runway.B)
        tau->bottomRows(ni - r0).noalias() = Vs * CMapR<T>(h.runway.B, h.dh, h.dh) * Vl.middleRows(j0, nj).transpose();
      else
        tau->bottomRows(ni - r0).noalias() = (T(1) / std::sqrt(T(h.dh))) * Vs * Vl.middleRows(j0, nj).transpose();
    }
    for (int r = 0; r < ni; ++r) {
      const int i = i0 + r;
      for (int c = 0; c < nj; ++c) {
        const int m = j0 + c;
        if (i >= 3 && m >= 1 && m <= i - 2) S(r, c) += -softplus((*tau)(r, c));
      }
    }
  }
}

/// 0/1 admission of a tile (ni x nj) for a branch.
template <class T>
void tile_mask(const BranchRows& br, int i0, int ni, int j0, int nj, MatR<T>& M) {
  M.resize(ni, nj);
  for (int r = 0; r < ni; ++r) admitted_row(br, i0 + r, j0, nj, M.row(r).data());
}

/// Forward of query tile qt of one head, every branch. y (T x dh, stride ldy) rows of the tile are
/// overwritten with the sum of the branch outputs; obr (null when there is one branch): branch
/// outputs, nb blocks of T x dh (stride dh); lse: nb x T log-sum-exp per row (-inf where the
/// branch admits no key of the row).
template <class T>
void tiled_forward_qtile(const TiledHead<T>& h, const TilePlan& plan, int qt, T* y, std::int64_t ldy, T* obr, T* lse) {
  const int i0 = qt * kTile, ni = std::min(h.Tn, i0 + kTile) - i0, dh = h.dh;
  const T ninf = -std::numeric_limits<T>::infinity();
  CSMap<T> V(h.v, h.Tn, dh, Eigen::OuterStride<>(h.ld));
  SMap<T> Y(y + static_cast<std::int64_t>(i0) * ldy, ni, dh, Eigen::OuterStride<>(ldy));
  thread_local MatR<T> S, P, M, tau, O;
  thread_local Eigen::Matrix<T, Eigen::Dynamic, 1> mx, sum, mnew;
  const std::size_t nb = plan.branches.size();
  for (std::size_t br = 0; br < nb; ++br) {
    O.setZero(ni, dh);
    mx.setConstant(ni, ninf);
    sum.setZero(ni);
    for (const KeyTile& kt : plan.tiles[br][static_cast<std::size_t>(qt)]) {
      const int j0 = kt.kt * kTile, nj = std::min(h.Tn, j0 + kTile) - j0;
      tile_logits(h, i0, ni, j0, nj, S, &tau);
      if (!kt.full) {
        tile_mask(plan.branches[br], i0, ni, j0, nj, M);
        S = (M.array() > T(0)).select(S.array(), ninf).matrix();
      }
      mnew = mx.cwiseMax(S.rowwise().maxCoeff());
      P.resize(ni, nj);
      for (int r = 0; r < ni; ++r) {
        if (mnew(r) == ninf) {  // nothing admitted in this row so far
          P.row(r).setZero();
          continue;
        }
        P.row(r) = (S.row(r).array() - mnew(r)).exp();
        const T corr = std::exp(mx(r) - mnew(r));
        sum(r) = sum(r) * corr + P.row(r).sum();
        O.row(r) *= corr;
      }
      if (!kt.full) P.array() *= M.array();  // masked entries exactly 0 (exp(-inf) may be clamped)
      O.noalias() += P * V.middleRows(j0, nj);
      mx = mnew;
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

/// Probabilities of tile (qt, key tile) of branch br from the saved log-sum-exp (0 outside the mask).
template <class T>
void tile_probs(const TiledHead<T>& h, const TilePlan& plan, std::size_t br, int i0, int ni, const KeyTile& kt,
                const T* lse, MatR<T>& S, MatR<T>& P, MatR<T>& M, MatR<T>& tau) {
  const int j0 = kt.kt * kTile, nj = std::min(h.Tn, j0 + kTile) - j0;
  tile_logits(h, i0, ni, j0, nj, S, &tau);
  if (!kt.full) {
    tile_mask(plan.branches[br], i0, ni, j0, nj, M);
    S = (M.array() > T(0)).select(S.array(), -std::numeric_limits<T>::infinity()).matrix();
  }
  P.resize(ni, nj);
  for (int r = 0; r < ni; ++r) {
    const T l = lse[br * h.Tn + i0 + r];
    if (l == -std::numeric_limits<T>::infinity())
      P.row(r).setZero();
    else
      P.row(r) = (S.row(r).array() - l).exp();
  }
  if (!kt.full) P.array() *= M.array();  // exactly 0 outside the mask
}

/// Gradient outputs of one head: dq, dk, dv (stride ld, accumulated +=); ddamp (S-D: T values,
/// accumulated); runway: dvs, dvl (T x dh, stride dh, accumulated: d/d v_{i-1} by row i and d/d v_m)
/// and dB (dh x dh, accumulated; bilinear only).
template <class T>
struct TiledGrads {
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  std::int64_t ld = 0;
  T* ddamp = nullptr;
  T *dvs = nullptr, *dvl = nullptr, *dB = nullptr;
};

/// Backward of tiled_forward_qtile over every query tile of one head (serial: dK, dV accumulate
/// across query tiles). dy: T x dh (stride ldy); y: the forward's summed output (stride ldy) used
/// when there is one branch, else obr; lse from the forward.
template <class T>
void tiled_backward_head(const TiledHead<T>& h, const TilePlan& plan, const T* dy, std::int64_t ldy, const T* y,
                         const T* obr, const T* lse, const TiledGrads<T>& g) {
  const int dh = h.dh, Tn = h.Tn;
  const std::size_t nb = plan.branches.size();
  CSMap<T> Q(h.q, Tn, dh, Eigen::OuterStride<>(h.ld)), K(h.k, Tn, dh, Eigen::OuterStride<>(h.ld)),
      V(h.v, Tn, dh, Eigen::OuterStride<>(h.ld)), dY(dy, Tn, dh, Eigen::OuterStride<>(ldy));
  SMap<T> dQ(g.dq, Tn, dh, Eigen::OuterStride<>(g.ld)), dK(g.dk, Tn, dh, Eigen::OuterStride<>(g.ld)),
      dV(g.dv, Tn, dh, Eigen::OuterStride<>(g.ld));
  thread_local MatR<T> S, P, M, tau, dP, dS;
  thread_local Eigen::Matrix<T, Eigen::Dynamic, 1> D;
  const T c = T(1) / std::sqrt(T(dh));
  for (std::size_t br = 0; br < nb; ++br) {
    D.resize(Tn);
    for (int i = 0; i < Tn; ++i) {
      const T* o = nb == 1 ? y + static_cast<std::int64_t>(i) * ldy : obr + (br * Tn + i) * dh;
      T d = 0;
      for (int e = 0; e < dh; ++e) d += dY(i, e) * o[e];
      D(i) = d;
    }
    for (int qt = 0; qt < plan.n_tiles; ++qt) {
      const int i0 = qt * kTile, ni = std::min(Tn, i0 + kTile) - i0;
      for (const KeyTile& kt : plan.tiles[br][static_cast<std::size_t>(qt)]) {
        const int j0 = kt.kt * kTile, nj = std::min(Tn, j0 + kTile) - j0;
        tile_probs(h, plan, br, i0, ni, kt, lse, S, P, M, tau);
        dV.middleRows(j0, nj).noalias() += P.transpose() * dY.middleRows(i0, ni);
        dP.noalias() = dY.middleRows(i0, ni) * V.middleRows(j0, nj).transpose();
        dS = P.array() * (dP.array().colwise() - D.segment(i0, ni).array());
        if (h.damp) {
          dQ.middleRows(i0, ni).noalias() += h.scale * dS * K.middleRows(j0, nj);
          dK.middleRows(j0, nj).noalias() += h.scale * dS.transpose() * Q.middleRows(i0, ni);
          dK.middleRows(i0, ni).noalias() -= h.scale * dS * Q.middleRows(j0, nj);
          dQ.middleRows(j0, nj).noalias() -= h.scale * dS.transpose() * K.middleRows(i0, ni);
          for (int r = 0; r < ni; ++r) {
            const int cc = i0 + r - j0;
            if (cc >= 0 && cc < nj) g.ddamp[i0 + r] -= dS(r, cc);
          }
        } else {
          dQ.middleRows(i0, ni).noalias() += h.scale * dS * K.middleRows(j0, nj);
          dK.middleRows(j0, nj).noalias() += h.scale * dS.transpose() * Q.middleRows(i0, ni);
        }
        if (h.runway.vl) {
          // d loss / d tau = dS * d(-softplus(tau))/d tau = -dS sigmoid(tau) on eligible edges
          for (int r = 0; r < ni; ++r) {
            const int i = i0 + r;
            for (int cc = 0; cc < nj; ++cc) {
              const int m = j0 + cc;
              dS(r, cc) = (i >= 3 && m >= 1 && m <= i - 2) ? -dS(r, cc) * sigmoid(tau(r, cc)) : T(0);
            }
          }
          CSMap<T> Vl(h.runway.vl, Tn, dh, Eigen::OuterStride<>(h.runway.ld));
          MapR<T> dVs(g.dvs, Tn, dh), dVl(g.dvl, Tn, dh);
          const int r0 = i0 == 0 ? 1 : 0;
          if (ni > r0) {
            auto Gt = dS.bottomRows(ni - r0);
            auto Vs = Vl.middleRows(i0 + r0 - 1, ni - r0);
            if (h.runway.B) {
              CMapR<T> Bm(h.runway.B, dh, dh);
              dVs.middleRows(i0 + r0, ni - r0).noalias() += Gt * Vl.middleRows(j0, nj) * Bm.transpose();
              dVl.middleRows(j0, nj).noalias() += Gt.transpose() * Vs * Bm;
              MapR<T>(g.dB, dh, dh).noalias() += Vs.transpose() * Gt * Vl.middleRows(j0, nj);
            } else {
              dVs.middleRows(i0 + r0, ni - r0).noalias() += c * Gt * Vl.middleRows(j0, nj);
              dVl.middleRows(j0, nj).noalias() += c * Gt.transpose() * Vs;
            }
          }
        }
      }
    }
  }
}

/// Materialise the probabilities of one head (summed over branches) into P (T x T row-major,
/// zero outside the masks), from Q, K and the saved log-sum-exp: the capture path.
template <class T>
void tiled_probs_head(const TiledHead<T>& h, const TilePlan& plan, const T* lse, float* out) {
  const int Tn = h.Tn;
  std::fill(out, out + static_cast<std::size_t>(Tn) * Tn, 0.f);
  MatR<T> S, P, M, tau;
  for (std::size_t br = 0; br < plan.branches.size(); ++br)
    for (int qt = 0; qt < plan.n_tiles; ++qt) {
      const int i0 = qt * kTile, ni = std::min(Tn, i0 + kTile) - i0;
      for (const KeyTile& kt : plan.tiles[br][static_cast<std::size_t>(qt)]) {
        tile_probs(h, plan, br, i0, ni, kt, lse, S, P, M, tau);
        const int j0 = kt.kt * kTile;
        for (int r = 0; r < ni; ++r)
          for (int cc = 0; cc < P.cols(); ++cc)
            out[static_cast<std::size_t>(i0 + r) * Tn + j0 + cc] += static_cast<float>(P(r, cc));
      }
    }
}

}  // namespace cf::nn::detail
