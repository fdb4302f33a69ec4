#pragma once
// Saved activations and gradient scratch of one forward/backward pass (internal to model.cpp).
#include <cstdint>
#include <memory>
#include <vector>

#include "cf/nn/config.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/variants/score_policy.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/ops.hpp"

namespace cf::nn {

/// One layer's saved state of the attention variant unit that ran it (cf/nn/detail/variants/unit.hpp):
/// `unit` identifies the owner, `state` is its State<T>, `bytes` measures it.
struct UnitSlot {
  const void* unit = nullptr;
  std::shared_ptr<void> state;
  std::size_t (*bytes)(const void*) = nullptr;
};

template <class T>
struct Activations {
  int B = 0, Tn = 0;
  ModelConfig cfg;
  std::vector<MatR<T>> resid, ln1, ln2, qkv, atty, resid_mid, fch, fcg;
  std::vector<std::vector<T>> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, P;
  std::vector<std::vector<std::vector<std::uint8_t>>> masks;  ///< dense path only, built on first use
  std::vector<detail::TilePlan> plans;                        ///< per layer: branches and key tiles
  std::vector<int> nbranch;
  /// lse[l]: [B, H, nbranch, T] log-sum-exp per row and branch (both paths); obr[l]: tiled path with
  /// more than one branch, [B, H, nbranch - 1, T, dh] outputs of all branches but the last (the
  /// backward's D = dO . O_branch; the last branch's output is atty minus their sum).
  std::vector<std::vector<T>> lse, obr;
  /// per layer: the saved state of its attention variant unit (S-D damping, runway tau, ...)
  std::vector<UnitSlot> unit_state;
  /// scratch of the layer whose unit runs now (runway's bias, its per-head d v, S-D's d damping),
  /// shared by every layer: it lives only during one layer's forward or backward
  std::vector<T> unit_scratch;
  /// per (sequence, head): its keys transposed for the packing-free tile products
  /// (cf/nn/detail/tile_gemm.hpp); scratch of one layer's tiled forward at a time
  std::vector<detail::KeysT<T>> keys_t;
  AttentionPath path = AttentionPath::Tiled;
  /// Whether the forward pass refuses a non-finite residual stream or output (Workspace::set_finite_check).
  bool check_finite = true;
  std::vector<T> lnf_mean, lnf_rstd, losses;
  // ArchVariant (issue 13): token embeddings before emb_ln and its statistics; the MLP branch's
  // d input under a parallel residual.
  MatR<T> emb, dpar;
  std::vector<T> emb_mean, emb_rstd;
  MatR<T> lnf, logits, dres, dn, dfc, dfch, datty, dqkv;

  /// (Re)allocate for config `c` at batch B and length Tn; masks are rebuilt only when Tn or the
  /// config changes.
  void ensure(const ModelConfig& c, int B_, int T_) {
    const bool same_cfg = to_json(c) == to_json(cfg);
    if (same_cfg && B_ == B && T_ == Tn) return;
    if (!same_cfg || T_ != Tn) {
      masks.assign(static_cast<std::size_t>(c.n_layer), {});
      plans.assign(static_cast<std::size_t>(c.n_layer), detail::TilePlan{});
    }
    if (!same_cfg) unit_state.assign(static_cast<std::size_t>(c.n_layer), UnitSlot{});
    lse.resize(static_cast<std::size_t>(c.n_layer));
    obr.resize(static_cast<std::size_t>(c.n_layer));
    cfg = c;
    B = B_;
    Tn = T_;
    const int N = B * Tn, C = c.d_model, H = c.n_head, L = c.n_layer;
    const bool ln = c.norm != NormKind::None;  // LayerNorm or RMSNorm: normalised copies are saved
    resid.assign(L + 1, MatR<T>(N, C));
    ln1.assign(L, ln ? MatR<T>(N, C) : MatR<T>());
    ln2 = ln1;
    ln1_mean.assign(L, std::vector<T>(ln ? N : 0));
    ln1_rstd = ln2_mean = ln2_rstd = ln1_mean;
    qkv.resize(L);
    atty.resize(L);
    P.resize(L);
    nbranch.assign(L, 1);
    for (int l = 0; l < L; ++l) {
      const int HD = H * head_dim(c, l);
      qkv[l].resize(N, HD + 2 * kv_heads(c) * head_dim(c, l));
      atty[l].resize(N, HD);
    }
    resid_mid.assign(L, MatR<T>(N, C));
    const int F = ffn_dim(c);
    fch.assign(L, MatR<T>(N, (c.arch.mlp == MlpKind::SwiGLU ? 2 : 1) * F));
    fcg.assign(L, MatR<T>(N, F));
    emb.resize(c.arch.emb_norm ? N : 0, C);
    emb_mean.assign(c.arch.emb_norm ? N : 0, T(0));
    emb_rstd = emb_mean;
    lnf.resize(ln ? N : 0, C);
    lnf_mean.assign(ln ? N : 0, T(0));
    lnf_rstd = lnf_mean;
    logits.resize(N, c.vocab_size);
    losses.assign(N, T(0));
  }
  void ensure_P(int l, std::size_t n) {
    if (P[l].size() != n) P[l].assign(n, T(0));
  }
  std::size_t bytes() const {
    std::size_t n = 0;
    auto add = [&](const auto& v) {
      for (const auto& m : v) n += static_cast<std::size_t>(m.size()) * sizeof(T);
    };
    add(resid);
    add(ln1);
    add(ln2);
    add(qkv);
    add(atty);
    add(resid_mid);
    add(fch);
    add(fcg);
    add(ln1_mean);
    add(ln1_rstd);
    add(ln2_mean);
    add(ln2_rstd);
    add(P);
    add(lse);
    add(obr);
    for (const UnitSlot& u : unit_state)
      if (u.state) n += u.bytes(u.state.get());
    n += unit_scratch.size() * sizeof(T);
    for (const auto& k : keys_t) n += k.data.size() * sizeof(T);
    n += (lnf_mean.size() + lnf_rstd.size() + losses.size()) * sizeof(T);
    n += static_cast<std::size_t>(lnf.size() + logits.size() + dres.size() + dn.size() + dfc.size() + dfch.size() +
                                  datty.size() + dqkv.size()) *
         sizeof(T);
    return n;
  }
};

}  // namespace cf::nn
