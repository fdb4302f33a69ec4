// Forward and backward pass of the whole model (see cf/nn/model.hpp), written as the model's data
// flow in the style of llm.c:
//
//   forward_backward
//     embed_forward                      tokens -> resid[0]
//     block_forward(l), l = 0..L-1       resid[l] -> resid_mid[l] -> resid[l+1]
//       attention_sublayer_forward       norm_1, qkv (+ RoPE, S-D damping, runway tau), heads, c_proj, +
//       mlp_sublayer_forward             norm_2, c_fc, GELU, c_proj, +
//     head_forward                       norm_f, tied lm head, cross-entropy -> loss
//     head_backward                      d loss -> d resid[L]
//     block_backward(l), l = L-1..0      mlp_sublayer_backward, attention_sublayer_backward
//     embed_backward                     d resid[0] -> d wte, d wpe
//
// Each function takes a Pass (the config, parameter and gradient pointers, saved activations and
// batch shape of this call). The per-op kernels live in cf/nn/ops.hpp and
// cf/nn/detail/attention.hpp; this file only orchestrates and saves activations.
#include "cf/nn/model.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/nn/detail/activations.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_linear.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/attention_tiled.hpp"
#include "cf/nn/ops.hpp"
#include "cf/nn/variant_ops.hpp"

namespace cf::nn {

template <class T>
Workspace<T>::Workspace() : impl_(new Activations<T>()) {}
template <class T>
Workspace<T>::~Workspace() {
  delete impl_;
}
template <class T>
Workspace<T>::Workspace(Workspace&& o) noexcept : impl_(o.impl_) {
  o.impl_ = new Activations<T>();
}
template <class T>
Workspace<T>& Workspace<T>::operator=(Workspace&& o) noexcept {
  std::swap(impl_, o.impl_);
  return *this;
}
template <class T>
std::size_t Workspace<T>::bytes() const {
  return impl_->bytes();
}
template <class T>
const T* Workspace<T>::probabilities() const {
  return impl_->logits.data();
}

template <class T>
void Workspace<T>::set_attention_path(AttentionPath p) {
  impl_->path = p;
}
template <class T>
void Workspace<T>::set_finite_check(bool on) {
  impl_->check_finite = on;
}

namespace {

// ------------------------------------------------------------------------------------- the pass

// Everything one forward_backward call shares: config and layout, parameters W and gradient G
// (null in a forward-only pass), saved activations, batch shape, hooks, and a [N, C] scratch for
// sub-layer outputs before they join the residual stream.
template <class T>
struct Pass {
  const ModelConfig& cfg;
  const ParamLayout& lay;
  const T* W;
  T* G;
  Activations<T>& a;
  int B, Tn, N, C, H;
  const ForwardHooks* hooks;
  MatR<T> tmp;

  // Whether sub-layers read a normalised copy (LayerNorm or RMSNorm) rather than the stream itself.
  bool ln() const { return cfg.norm != NormKind::None; }
};

// ------------------------------------------------------------------------------- qkv layout

// Columns of one qkv row [N, (H + 2 KV) dh] (grouped-query attention, ArchVariant::n_kv_head):
// queries of the H heads, then keys and values of the KV key/value heads; head h reads kv head
// h / (H / KV). Without GQA (KV = H) this is the GPT-2 [q | k | v] layout.
struct QkvLayout {
  int H, KV, dh;
  std::int64_t ld() const { return static_cast<std::int64_t>(H + 2 * KV) * dh; }
  std::int64_t q(int h) const { return static_cast<std::int64_t>(h) * dh; }
  std::int64_t k(int h) const { return static_cast<std::int64_t>(H + h / (H / KV)) * dh; }
  std::int64_t v(int h) const { return static_cast<std::int64_t>(H + KV + h / (H / KV)) * dh; }
};
inline QkvLayout qkv_layout(const ModelConfig& c, int l) { return {c.n_head, kv_heads(c), head_dim(c, l)}; }

// ---------------------------------------------------------------------------- capture report

// Hand one layer's attention probabilities, Q, K and residual quantities to the capture hook, one
// sequence at a time (float copies, so the hook sees the same types for Model<float> and
// Model<double>). probs(b, h, dst) writes head h's T x T probabilities of sequence b (summed over
// branches) for the heads in `heads` (empty = all; the others stay zero); qkv: N x 3 H dh after
// RoPE; x, att, y: N x C residual in, attention output (after c_proj), residual out.
template <class T>
void report_layer(const CaptureHook& hook, int l, int B, int Tn, const QkvLayout& ql, int C,
                  const std::vector<int>& heads, const std::function<void(int, int, float*)>& probs_of, const T* qkv,
                  const T* x, const T* att, const T* y) {
  const int H = ql.H, dh = ql.dh;
  const std::size_t TT = static_cast<std::size_t>(Tn) * Tn, HD = static_cast<std::size_t>(H) * dh;
  std::vector<float> probs(static_cast<std::size_t>(H) * TT), q(HD * Tn), k(HD * Tn);
  std::vector<float> xin(static_cast<std::size_t>(Tn) * C), aout(xin.size()), yout(xin.size());
  std::vector<float> nx(Tn), na(Tn), ny(Tn);
  std::vector<char> want(static_cast<std::size_t>(H), heads.empty() ? 1 : 0);
  for (int h : heads)
    if (h >= 0 && h < H) want[static_cast<std::size_t>(h)] = 1;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      float* dst = probs.data() + static_cast<std::size_t>(h) * TT;
      if (want[static_cast<std::size_t>(h)])
        probs_of(b, h, dst);
      else
        std::fill(dst, dst + TT, 0.f);
      for (int t = 0; t < Tn; ++t) {
        const T* row = qkv + (static_cast<std::size_t>(b) * Tn + t) * ql.ld();
        for (int d = 0; d < dh; ++d) {
          q[(static_cast<std::size_t>(h) * Tn + t) * dh + d] = static_cast<float>(row[ql.q(h) + d]);
          k[(static_cast<std::size_t>(h) * Tn + t) * dh + d] = static_cast<float>(row[ql.k(h) + d]);
        }
      }
    }
    const std::size_t off = static_cast<std::size_t>(b) * Tn * C;
    auto copy_norms = [&](const T* src, std::vector<float>& dst, std::vector<float>& norms) {
      for (int t = 0; t < Tn; ++t) {
        double ss = 0;
        for (int c = 0; c < C; ++c) {
          const T v = src[off + static_cast<std::size_t>(t) * C + c];
          dst[static_cast<std::size_t>(t) * C + c] = static_cast<float>(v);
          ss += static_cast<double>(v) * static_cast<double>(v);
        }
        norms[t] = static_cast<float>(std::sqrt(ss));
      }
    };
    copy_norms(x, xin, nx);
    copy_norms(att, aout, na);
    copy_norms(y, yout, ny);
    LayerActivations la;
    la.layer = l;
    la.seq = b;
    la.n_head = H;
    la.seq_len = Tn;
    la.d_head = dh;
    la.d_model = C;
    la.attn_probs = probs.data();
    la.q = q.data();
    la.k = k.data();
    la.resid_in = xin.data();
    la.attn_out = aout.data();
    la.resid_out = yout.data();
    la.resid_in_norm = nx.data();
    la.attn_out_norm = na.data();
    la.resid_out_norm = ny.data();
    hook(la);
  }
}

// ------------------------------------------------------------------------------------ norms

// Pre-norm of a sub-layer: LayerNorm into `out` (mean/rstd saved) and return it, or the input
// itself when the model has no normalisation.
template <class T>
const T* norm_forward(Pass<T>& p, MatR<T>& out, std::vector<T>& mean, std::vector<T>& rstd, const T* x, std::int64_t w,
                      std::int64_t b) {
  if (!p.ln()) return x;
  if (p.cfg.norm == NormKind::RMSNorm)
    rmsnorm_forward(out.data(), rstd.data(), x, p.W + w, p.N, p.C, p.cfg.arch.norm_eps);
  else
    layernorm_forward(out.data(), mean.data(), rstd.data(), x, p.W + w, p.W + b, p.N, p.C, p.cfg.arch.norm_eps);
  return out.data();
}
// Backward of norm_forward: dx [N, C] += d(norm)/dx^T dn (identity without normalisation).
template <class T>
void norm_backward(Pass<T>& p, MatR<T>& dx, const MatR<T>& dn, const T* x, const std::vector<T>& mean,
                   const std::vector<T>& rstd, std::int64_t w, std::int64_t b) {
  if (p.cfg.norm == NormKind::RMSNorm)
    rmsnorm_backward(dx.data(), p.G + w, dn.data(), x, p.W + w, rstd.data(), p.N, p.C);
  else if (p.ln())
    layernorm_backward(dx.data(), p.G + w, p.G + b, dn.data(), x, p.W + w, mean.data(), rstd.data(), p.N, p.C);
  else
    dx += dn;
}

// ---------------------------------------------------------------------------- embedding

// Token (+ position) embedding into resid[0]; with arch.emb_norm (BLOOM) the embedding goes to
// a.emb and its norm (emb_ln) to resid[0].
template <class T>
void embed_forward(Pass<T>& p, const std::int32_t* tokens) {
  Activations<T>& a = p.a;
  const bool en = p.cfg.arch.emb_norm;
  encoder_forward(en ? a.emb.data() : a.resid[0].data(), tokens, p.W + p.lay.wte,
                  p.lay.wpe >= 0 ? p.W + p.lay.wpe : nullptr, p.B, p.Tn, p.C);
  if (en) norm_forward(p, a.resid[0], a.emb_mean, a.emb_rstd, a.emb.data(), p.lay.emb_ln_w, p.lay.emb_ln_b);
}
template <class T>
void embed_backward(Pass<T>& p, const std::int32_t* tokens) {
  Activations<T>& a = p.a;
  const T* d = a.dres.data();
  MatR<T> de;
  if (p.cfg.arch.emb_norm) {
    de.setZero(p.N, p.C);
    norm_backward(p, de, a.dres, a.emb.data(), a.emb_mean, a.emb_rstd, p.lay.emb_ln_w, p.lay.emb_ln_b);
    d = de.data();
  }
  encoder_backward(p.G + p.lay.wte, p.lay.wpe >= 0 ? p.G + p.lay.wpe : nullptr, d, tokens, p.B, p.Tn, p.C);
}

// ---------------------------------------------------------------------------- attention

// Which attention computation layer l runs in this pass (a linearize hook turns any layer into
// ELU+1 linear attention).
struct AttnMode {
  bool lin = false, sd = false, runway = false;
  bool dense = false;  ///< T x T path (AttentionPath::Dense or a score hook); else tiled / prefix-sum
};
template <class T>
AttnMode attn_mode(const Pass<T>& p, int l) {
  const AttnKind k = p.cfg.layers[l].attn;
  AttnMode m;
  m.lin =
      k == AttnKind::Linear || (p.hooks && l < static_cast<int>(p.hooks->linearize.size()) && p.hooks->linearize[l]);
  m.sd = !m.lin && k == AttnKind::Sd;
  m.runway = !m.lin && (k == AttnKind::RunwayDot || k == AttnKind::RunwayBilinear);
  m.dense = p.a.path == AttentionPath::Dense || (p.hooks && p.hooks->on_scores);
  return m;
}

// The head kernel's description of layer l (scale, S-D, linear, branch masks); builds the dense
// masks of the layer's branches on first use.
template <class T>
detail::HeadSpec head_spec(const Pass<T>& p, int l, const AttnMode& m) {
  const int dh = head_dim(p.cfg, l);
  if (p.a.masks[l].empty())
    for (const auto& br : p.a.plans[l].branches) p.a.masks[l].push_back(detail::dense_mask(br, p.Tn));
  detail::HeadSpec spec;
  spec.linear = m.lin;
  spec.sd = m.sd;
  spec.scale = m.sd ? 0.5 / std::sqrt(double(dh)) : 1.0 / std::sqrt(double(dh));
  for (const auto& mm : p.a.masks[l]) spec.masks.push_back(mm.data());
  return spec;
}

// RoPE on the query columns of the H heads and the key columns of the KV key heads of qkv (inverse
// = the backward rotation); the first rope_dims(l) dims of each head, base arch.rope_theta.
template <class T>
void rope_qk(const Pass<T>& p, int l, T* qkv, bool inverse) {
  const QkvLayout ql = qkv_layout(p.cfg, l);
  const int Tn = p.Tn, nh = ql.H + ql.KV, rot = rope_dims(p.cfg, l);
  const double base = p.cfg.arch.rope_theta;
  // omp-nothrow: rope_apply is arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (int bj = 0; bj < p.B * nh; ++bj) {
    const int b = bj / nh, j = bj % nh;  // j < H: query head j; else key head j - H
    T* col = qkv + static_cast<std::int64_t>(b) * Tn * ql.ld() + static_cast<std::int64_t>(j) * ql.dh;
    rope_apply(col, Tn, ql.dh, ql.ld(), inverse, rot, base);
  }
}

// S-D diagonal damping d = softplus(x W_d^T + b_d) + eps, [N, H] (Routing/filtering (Jamil & Kapadia), docs/spec.md
// §3).
template <class T>
void sd_damping_forward(Pass<T>& p, int l, const T* in) {
  const LayerOffsets& o = p.lay.layer[l];
  Activations<T>& a = p.a;
  linear_forward(a.damp_z[l].data(), in, p.W + o.damp_w, p.W + o.damp_b, p.N, p.C, p.H);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(p.N) * p.H; ++i)
    a.damp_d[l](i) = softplus(a.damp_z[l](i)) + T(p.cfg.layers[l].sd_eps);
}
// Backward of sd_damping_forward from a.ddamp [N, H]: dn [N, C] +=, d W_d, d b_d +=.
template <class T>
void sd_damping_backward(Pass<T>& p, int l, const T* in, MatR<T>& dn) {
  const LayerOffsets& o = p.lay.layer[l];
  Activations<T>& a = p.a;
  MatR<T> dz(p.N, p.H);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(p.N) * p.H; ++i) dz(i) = a.ddamp(i) * sigmoid(a.damp_z[l](i));
  linear_backward(dn.data(), p.G + o.damp_w, p.G + o.damp_b, dz.data(), in, p.W + o.damp_w, p.N, p.C, p.H);
}

// Runway rewiring (Runway (Lee & Clark) Eqs. 8-14): tau_{i,m} from the last head's values (dot: v_{i-1}.v_m /
// sqrt(dh); bilinear: v_{i-1}^T B v_m), bias log beta = -softplus(tau) on eligible edges
// 1 <= m <= i-2, shared by every head of the sequence. a.tau[l], a.rbias: [B, T, T].
template <class T>
void runway_forward(Pass<T>& p, int l, const T* qkv) {
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l);
  const QkvLayout ql = qkv_layout(p.cfg, l);
  const bool dot = p.cfg.layers[l].attn == AttnKind::RunwayDot;
  const T c = T(1) / std::sqrt(T(dh));
  const T* Bw = dot ? nullptr : p.W + p.lay.layer[l].runway_B;
  p.a.tau[l].resize(static_cast<std::size_t>(p.B) * Tn * Tn);
  p.a.rbias.resize(p.a.tau[l].size());
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
  for (int b = 0; b < p.B; ++b)
    omp_errors.run([&] {
      detail::CSMap<T> Vl(qkv + static_cast<std::int64_t>(b) * Tn * ql.ld() + ql.v(H - 1), Tn, dh,
                          Eigen::OuterStride<>(ql.ld()));
      MatR<T> Vs = MatR<T>::Zero(Tn, dh);
      for (int i = 1; i < Tn; ++i) Vs.row(i) = Vl.row(i - 1);
      MapR<T> tau(p.a.tau[l].data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
      if (dot)
        tau.noalias() = c * Vs * Vl.transpose();
      else
        tau.noalias() = Vs * CMapR<T>(Bw, dh, dh) * Vl.transpose();
      MapR<T> rb(p.a.rbias.data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
      rb.setZero();
      // beta = 1 - sigmoid(tau) on eligible edges 1 <= m <= i-2: log beta = -softplus(tau)
      for (int i = 3; i < Tn; ++i)
        for (int m = 1; m <= i - 2; ++m) rb(i, m) = -softplus(tau(i, m));
    });
  omp_errors.rethrow();
}
// Backward of runway_forward from the per-head logit gradients a.dS [B, H, T, T]: d V (last head)
// in dqkv +=, d B (bilinear) +=.
template <class T>
void runway_backward(Pass<T>& p, int l, const T* qkv, T* dqkv) {
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l);
  const QkvLayout ql = qkv_layout(p.cfg, l);
  const bool dot = p.cfg.layers[l].attn == AttnKind::RunwayDot;
  const std::int64_t Boff = p.lay.layer[l].runway_B;
  const T c = T(1) / std::sqrt(T(dh));
  std::vector<MatR<T>> dBpart(static_cast<std::size_t>(p.B));
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
  for (int b = 0; b < p.B; ++b)
    omp_errors.run([&] {
      const std::int64_t voff = static_cast<std::int64_t>(b) * Tn * ql.ld() + ql.v(H - 1);
      detail::CSMap<T> Vl(qkv + voff, Tn, dh, Eigen::OuterStride<>(ql.ld()));
      detail::SMap<T> dVl(dqkv + voff, Tn, dh, Eigen::OuterStride<>(ql.ld()));
      CMapR<T> tau(p.a.tau[l].data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
      MatR<T> Gt = MatR<T>::Zero(Tn, Tn);  // d loss / d tau
      for (int h = 0; h < H; ++h) {
        CMapR<T> dSh(p.a.dS.data() + (static_cast<std::size_t>(b) * H + h) * Tn * Tn, Tn, Tn);
        for (int i = 3; i < Tn; ++i)
          for (int mm = 1; mm <= i - 2; ++mm) Gt(i, mm) += dSh(i, mm);
      }
      for (int i = 3; i < Tn; ++i)
        for (int mm = 1; mm <= i - 2; ++mm) Gt(i, mm) *= -sigmoid(tau(i, mm));
      MatR<T> Vs = MatR<T>::Zero(Tn, dh);
      for (int i = 1; i < Tn; ++i) Vs.row(i) = Vl.row(i - 1);
      MatR<T> dVs;
      if (dot) {
        dVs = c * Gt * Vl;
        dVl.noalias() += c * Gt.transpose() * Vs;
      } else {
        CMapR<T> Bm(p.W + Boff, dh, dh);
        dVs = Gt * Vl * Bm.transpose();
        dVl.noalias() += Gt.transpose() * Vs * Bm;
        dBpart[b] = Vs.transpose() * Gt * Vl;
      }
      for (int i = 1; i < Tn; ++i) dVl.row(i - 1) += dVs.row(i);
    });
  omp_errors.rethrow();
  if (!dot) {
    MapR<T> dB(p.G + Boff, dh, dh);
    for (int b = 0; b < p.B; ++b) dB += dBpart[b];
  }
}

// fn(b, h) for every sequence b < B and head h < H, one OpenMP task per (sequence, key/value head):
// the query heads sharing a key/value head (grouped-query attention) accumulate into the same dK,
// dV columns, so they run in order inside the task (no race). The backward passes' loop.
template <class Fn>
void for_each_kv_group(int B, int H, int KV, Fn&& fn) {
  const int group = H / KV;
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
  for (int bg = 0; bg < B * KV; ++bg)
    omp_errors.run([&] {
      for (int h = (bg % KV) * group; h < (bg % KV + 1) * group; ++h) fn(bg / KV, h);
    });
  omp_errors.rethrow();
}

// The heads of layer l, dense path: qkv [N, 3 H dh] -> atty [N, H dh], probabilities saved in
// a.P[l], row statistics in a.lse[l].
template <class T>
void heads_forward_dense(Pass<T>& p, int l, const AttnMode& m) {
  Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l), HD = H * dh;
  const QkvLayout ql = qkv_layout(p.cfg, l);
  const detail::HeadSpec spec = head_spec(p, l, m);
  const std::size_t nb = m.lin ? 1 : spec.masks.size();
  a.nbranch[l] = static_cast<int>(nb);
  a.ensure_P(l, static_cast<std::size_t>(p.B) * H * nb * Tn * Tn);
  a.lse[l].assign(static_cast<std::size_t>(p.B) * H * nb * Tn, T(0));
  const T* qkv = a.qkv[l].data();
  const ForwardHooks* hooks = p.hooks;
  const bool serial = hooks && hooks->on_scores;
  const std::vector<double> slopes = p.cfg.pos == PosKind::Alibi ? alibi_slopes(p.cfg) : std::vector<double>{};
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic) if (!serial)
  for (int bh = 0; bh < p.B * H; ++bh)
    omp_errors.run([&] {
      const int b = bh / H, h = bh % H;
      detail::HeadSpec hs = spec;
      if (p.cfg.pos == PosKind::Alibi && !m.lin) hs.alibi_slope = slopes[static_cast<std::size_t>(h)];
      const T* base = qkv + static_cast<std::int64_t>(b) * Tn * ql.ld();
      std::vector<T> dvec;
      if (m.sd) {
        dvec.resize(Tn);
        for (int t = 0; t < Tn; ++t) dvec[t] = a.damp_d[l](static_cast<std::int64_t>(b * Tn + t) * H + h);
      }
      std::function<void(Eigen::Ref<Eigen::MatrixXf>)> hk;
      if (serial && !m.lin) hk = [&](Eigen::Ref<Eigen::MatrixXf> s) { hooks->on_scores(l, h, s); };
      detail::attention_head_forward<T>(hs, Tn, dh, base + ql.q(h), base + ql.k(h), base + ql.v(h), ql.ld(),
                                        a.atty[l].data() + static_cast<std::int64_t>(b) * Tn * HD + h * dh, HD,
                                        m.sd ? dvec.data() : nullptr,
                                        m.runway ? a.rbias.data() + static_cast<std::size_t>(b) * Tn * Tn : nullptr,
                                        a.P[l].data() + static_cast<std::size_t>(bh) * nb * Tn * Tn,
                                        a.lin_s[l].data() + static_cast<std::size_t>(bh) * Tn, hk ? &hk : nullptr,
                                        m.lin ? nullptr : a.lse[l].data() + static_cast<std::size_t>(bh) * nb * Tn);
    });
  omp_errors.rethrow();
}
// Backward of heads_forward_dense: datty [N, H dh] -> dqkv [N, 3 H dh] (+=), a.ddamp (S-D), a.dS
// (runway).
template <class T>
void heads_backward_dense(Pass<T>& p, int l, const AttnMode& m) {
  Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l), HD = H * dh;
  detail::HeadSpec spec = head_spec(p, l, m);
  if (m.lin || m.sd || m.runway) spec.masks.resize(1);
  const std::size_t nb = static_cast<std::size_t>(a.nbranch[l]);
  if (m.runway) a.dS.resize(static_cast<std::size_t>(p.B) * H * Tn * Tn);
  if (m.sd) a.ddamp.setZero(p.N, H);
  const T* qkv = a.qkv[l].data();
  T* dqkv = a.dqkv.data();
  const QkvLayout ql = qkv_layout(p.cfg, l);
  for_each_kv_group(p.B, H, ql.KV, [&](int b, int h) {
    const int bh = b * H + h;
    const std::int64_t off = static_cast<std::int64_t>(b) * Tn * ql.ld();
    std::vector<T> dd;
    if (m.sd) dd.resize(Tn);
    detail::attention_head_backward<T>(
        spec, Tn, dh, qkv + off + ql.q(h), qkv + off + ql.k(h), qkv + off + ql.v(h), ql.ld(), dqkv + off + ql.q(h),
        dqkv + off + ql.k(h), dqkv + off + ql.v(h), a.datty.data() + static_cast<std::int64_t>(b) * Tn * HD + h * dh,
        HD, a.P[l].data() + static_cast<std::size_t>(bh) * nb * Tn * Tn,
        a.lin_s[l].data() + static_cast<std::size_t>(bh) * Tn,
        m.runway ? a.dS.data() + static_cast<std::size_t>(bh) * Tn * Tn : nullptr, m.sd ? dd.data() : nullptr);
    if (m.sd)
      for (int t = 0; t < Tn; ++t) a.ddamp(static_cast<std::int64_t>(b * Tn + t), h) = dd[t];
  });
}

// Q, K, V of head h of sequence b (grouped-query attention: head h reads kv head h / (H / KV)).
template <class T>
detail::HeadQKV<T> head_qkv(const Pass<T>& p, int l, int b, int h) {
  const QkvLayout ql = qkv_layout(p.cfg, l);
  const T* seq = p.a.qkv[l].data() + static_cast<std::int64_t>(b) * p.Tn * ql.ld();
  detail::HeadQKV<T> hq;
  hq.Tn = p.Tn;
  hq.dh = ql.dh;
  hq.q = seq + ql.q(h);
  hq.k = seq + ql.k(h);
  hq.v = seq + ql.v(h);
  hq.ld = ql.ld();
  return hq;
}

// The variant dispatch of the tiled path: calls body(make) once, with make(b, h) returning the
// score policy (one unit each, cf/nn/detail/variants/) of head h of sequence b, so the tile loop is
// compiled per variant (no per-score branch or virtual call). With `grads` the policy's own
// gradient outputs point into the per-(b, h) scratch a.dd_t (S-D) and a.rw_* (runway). damp_t:
// [B, H, T] S-D damping (S-D only). ALiBi wraps whichever policy the layer uses.
template <class T, class Body>
void with_tiled_scores(const Pass<T>& p, int l, const AttnMode& m, const T* damp_t, bool grads, Body&& body) {
  const int H = p.H, Tn = p.Tn, dh = head_dim(p.cfg, l);
  Activations<T>& a = p.a;
  const std::vector<double> slope_list = p.cfg.pos == PosKind::Alibi ? alibi_slopes(p.cfg) : std::vector<double>{};
  const double* slopes = slope_list.data();           // the model's recipe (cf::nn::alibi_slopes)
  const auto pos = [&](auto inner_of, auto&& next) {  // ALiBi over the inner policy, or the inner policy
    if (p.cfg.pos == PosKind::Alibi)
      next([=](int b, int h) {
        detail::Alibi<decltype(inner_of(b, h))> al;
        al.inner = inner_of(b, h);
        al.slope = slopes[h];
        return al;
      });
    else
      next(inner_of);
  };
  const auto dot = [dh](int, int) {
    detail::DotScores<T> d;
    d.scale = T(1.0 / std::sqrt(double(dh)));
    return d;
  };
  if (m.sd) {
    pos(
        [=, &a](int b, int h) {
          detail::SdScores<T> s;
          s.scale = T(0.5 / std::sqrt(double(dh)));
          s.damp = damp_t + (static_cast<std::size_t>(b) * H + h) * Tn;
          if (grads) s.ddamp = a.dd_t.data() + (static_cast<std::size_t>(b) * H + h) * Tn;
          return s;
        },
        body);
  } else if (m.runway) {
    const QkvLayout ql = qkv_layout(p.cfg, l);
    const T* B = p.cfg.layers[l].attn == AttnKind::RunwayBilinear ? p.W + p.lay.layer[l].runway_B : nullptr;
    pos(dot, [&](auto inner_of) {
      body([=, &a](int b, int h) {
        detail::RunwayScores<T, decltype(inner_of(b, h))> r;
        r.inner = inner_of(b, h);
        r.vl = a.qkv[l].data() + static_cast<std::int64_t>(b) * Tn * ql.ld() + ql.v(H - 1);
        r.ld_vl = ql.ld();
        r.B = B;
        if (grads) {
          const std::size_t bh = static_cast<std::size_t>(b) * H + h;
          r.dvs = a.rw_dvs.data() + bh * Tn * dh;
          r.dvl = a.rw_dvl.data() + bh * Tn * dh;
          if (B) r.dB = a.rw_dB.data() + bh * dh * dh;
        }
        return r;
      });
    });
  } else {
    pos(dot, body);
  }
}

// S-D damping d [N, H] transposed to [B, H, T] (contiguous rows for the tiled kernels).
template <class T>
std::vector<T> damping_by_head(const Pass<T>& p, int l, const AttnMode& m) {
  std::vector<T> d;
  if (!m.sd) return d;
  d.resize(static_cast<std::size_t>(p.N) * p.H);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.H; ++h)
      for (int t = 0; t < p.Tn; ++t)
        d[(static_cast<std::size_t>(b) * p.H + h) * p.Tn + t] =
            p.a.damp_d[l](static_cast<std::int64_t>(b * p.Tn + t) * p.H + h);
  return d;
}

// The heads of layer l, tiled path: qkv [N, 3 H dh] -> atty [N, H dh]; a.lse[l] [B, H, nb, T] and,
// with several branches, a.obr[l] saved. Parallel over (sequence, head, query tile).
template <class T>
void heads_forward_tiled(Pass<T>& p, int l, const AttnMode& m) {
  Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l), HD = H * dh;
  const detail::TilePlan& plan = a.plans[l];
  const std::size_t nb = plan.branches.size();
  a.nbranch[l] = static_cast<int>(nb);
  a.lse[l].resize(static_cast<std::size_t>(p.B) * H * nb * Tn);
  a.obr[l].resize(nb > 1 ? static_cast<std::size_t>(p.B) * H * (nb - 1) * Tn * dh : 0);
  const std::vector<T> damp = damping_by_head(p, l, m);
  const std::int64_t nt = plan.n_tiles, tasks = static_cast<std::int64_t>(p.B) * H * nt;
  // every head's keys transposed once for the packing-free products of all its query tiles
  const bool keys_t = detail::tile_gemm_enabled() && detail::tile_gemm_ok<T>(dh) && !m.sd;
  a.keys_t.resize(keys_t ? static_cast<std::size_t>(p.B) * H : 0);
  {
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < static_cast<int>(a.keys_t.size()); ++bh)
      omp_errors.run([&] {
        const detail::HeadQKV<T> hq = head_qkv(p, l, bh / H, bh % H);
        a.keys_t[static_cast<std::size_t>(bh)].build(hq.k, hq.ld, dh, {{0, Tn}});
      });
    omp_errors.rethrow();
  }
  with_tiled_scores(p, l, m, damp.data(), false, [&](auto make) {
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t task = 0; task < tasks; ++task)
      omp_errors.run([&] {
        const int bh = static_cast<int>(task / nt), qt = static_cast<int>(task % nt), b = bh / H, h = bh % H;
        detail::HeadQKV<T> hq = head_qkv(p, l, b, h);
        if (keys_t) hq.kt = &a.keys_t[static_cast<std::size_t>(bh)];
        detail::tiled_forward_qtile(
            hq, make(b, h), plan, qt, a.atty[l].data() + static_cast<std::int64_t>(b) * Tn * HD + h * dh, HD,
            nb > 1 ? a.obr[l].data() + static_cast<std::size_t>(bh) * (nb - 1) * Tn * dh : nullptr,
            a.lse[l].data() + static_cast<std::size_t>(bh) * nb * Tn);
      });
    omp_errors.rethrow();
  });
}

// Backward of heads_forward_tiled: datty -> dqkv (+=), a.ddamp (S-D); runway: d V of the last head
// and d B accumulated here. Parallel over (sequence, head); per-(b, h) runway and damping
// gradients reduced afterwards in a fixed order.
template <class T>
void heads_backward_tiled(Pass<T>& p, int l, const AttnMode& m) {
  Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l), HD = H * dh, BH = p.B * H;
  const detail::TilePlan& plan = a.plans[l];
  const std::size_t nb = plan.branches.size();
  const std::vector<T> damp = damping_by_head(p, l, m);
  const bool bil = m.runway && p.cfg.layers[l].attn == AttnKind::RunwayBilinear;
  a.dd_t.assign(m.sd ? static_cast<std::size_t>(BH) * Tn : 0, T(0));
  a.rw_dvs.assign(m.runway ? static_cast<std::size_t>(BH) * Tn * dh : 0, T(0));
  a.rw_dvl.assign(a.rw_dvs.size(), T(0));
  a.rw_dB.assign(bil ? static_cast<std::size_t>(BH) * dh * dh : 0, T(0));
  T* dqkv = a.dqkv.data();
  const QkvLayout ql = qkv_layout(p.cfg, l);
  with_tiled_scores(p, l, m, damp.data(), true, [&](auto make) {
    for_each_kv_group(p.B, H, ql.KV, [&](int b, int h) {
      const int bh = b * H + h;
      const std::int64_t off = static_cast<std::int64_t>(b) * Tn * ql.ld(),
                         yo = static_cast<std::int64_t>(b) * Tn * HD + h * dh;
      detail::HeadQKVGrads<T> g;
      g.dq = dqkv + off + ql.q(h);
      g.dk = dqkv + off + ql.k(h);
      g.dv = dqkv + off + ql.v(h);
      g.ld = ql.ld();
      detail::tiled_backward_head(
          head_qkv(p, l, b, h), make(b, h), plan, a.datty.data() + yo, HD, a.atty[l].data() + yo,
          nb > 1 ? a.obr[l].data() + static_cast<std::size_t>(bh) * (nb - 1) * Tn * dh : nullptr,
          a.lse[l].data() + static_cast<std::size_t>(bh) * nb * Tn, g);
    });
  });
  if (m.sd) {
    a.ddamp.setZero(p.N, H);
    for (int bh = 0; bh < BH; ++bh)
      for (int t = 0; t < Tn; ++t)
        a.ddamp(static_cast<std::int64_t>((bh / H) * Tn + t), bh % H) = a.dd_t[static_cast<std::size_t>(bh) * Tn + t];
  }
  if (m.runway) {
    for (int bh = 0; bh < BH; ++bh) {
      const int b = bh / H;
      detail::SMap<T> dVl(dqkv + static_cast<std::int64_t>(b) * Tn * ql.ld() + ql.v(H - 1), Tn, dh,
                          Eigen::OuterStride<>(ql.ld()));
      CMapR<T> dvs(a.rw_dvs.data() + static_cast<std::size_t>(bh) * Tn * dh, Tn, dh),
          dvl(a.rw_dvl.data() + static_cast<std::size_t>(bh) * Tn * dh, Tn, dh);
      dVl += dvl;
      for (int i = 1; i < Tn; ++i) dVl.row(i - 1) += dvs.row(i);  // row i used v_{i-1}
      if (bil)
        MapR<T>(p.G + p.lay.layer[l].runway_B, dh, dh) +=
            CMapR<T>(a.rw_dB.data() + static_cast<std::size_t>(bh) * dh * dh, dh, dh);
    }
  }
}

// The heads of layer l, ELU+1 linear attention in prefix-sum form (cf/nn/detail/attention_linear.hpp):
// qkv -> atty, denominators saved in a.lin_s[l] [B, H, T]; no T x T buffer. Parallel over (b, h).
template <class T>
void heads_forward_linear(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l), HD = H * dh;
  const QkvLayout ql = qkv_layout(p.cfg, l);
  a.nbranch[l] = 1;
  a.lse[l].clear();  // no softmax row statistics
  a.obr[l].clear();
  const T* qkv = a.qkv[l].data();
  cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < p.B * H; ++bh)
    omp_errors.run([&] {
      const int b = bh / H, h = bh % H;
      const T* base = qkv + static_cast<std::int64_t>(b) * Tn * ql.ld();
      detail::linear_head_forward<T>(Tn, dh, base + ql.q(h), base + ql.k(h), base + ql.v(h), ql.ld(),
                                     a.atty[l].data() + static_cast<std::int64_t>(b) * Tn * HD + h * dh, HD,
                                     a.lin_s[l].data() + static_cast<std::size_t>(bh) * Tn);
    });
  omp_errors.rethrow();
}
// Backward of heads_forward_linear: datty -> dqkv (+=). One task per (sequence, key/value head),
// as in the other backward passes (heads sharing a key/value head accumulate into the same columns).
template <class T>
void heads_backward_linear(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H, dh = head_dim(p.cfg, l), HD = H * dh;
  const QkvLayout ql = qkv_layout(p.cfg, l);
  const T* qkv = a.qkv[l].data();
  T* dqkv = a.dqkv.data();
  for_each_kv_group(p.B, H, ql.KV, [&](int b, int h) {
    const int bh = b * H + h;
    const std::int64_t off = static_cast<std::int64_t>(b) * Tn * ql.ld(),
                       yo = static_cast<std::int64_t>(b) * Tn * HD + h * dh;
    detail::linear_head_backward<T>(Tn, dh, qkv + off + ql.q(h), qkv + off + ql.k(h), qkv + off + ql.v(h), ql.ld(),
                                    a.atty[l].data() + yo, a.datty.data() + yo, HD,
                                    a.lin_s[l].data() + static_cast<std::size_t>(bh) * Tn, dqkv + off + ql.q(h),
                                    dqkv + off + ql.k(h), dqkv + off + ql.v(h));
  });
}

// Layer l's heads: the dense oracle (AttentionPath::Dense or a score hook), the prefix-sum kernel
// (ELU+1 linear layers) or the tiled softmax kernel (every other variant).
template <class T>
void heads_forward(Pass<T>& p, int l, const AttnMode& m) {
  if (!m.dense && m.lin) {
    heads_forward_linear(p, l);
  } else if (m.dense) {
    if (m.runway) runway_forward(p, l, p.a.qkv[l].data());
    heads_forward_dense(p, l, m);
  } else {
    heads_forward_tiled(p, l, m);
  }
}
template <class T>
void heads_backward(Pass<T>& p, int l, const AttnMode& m) {
  if (!m.dense && m.lin) {
    heads_backward_linear(p, l);
  } else if (m.dense) {
    heads_backward_dense(p, l, m);
    if (m.runway) runway_backward(p, l, p.a.qkv[l].data(), p.a.dqkv.data());
  } else {
    heads_backward_tiled(p, l, m);
  }
}

// The probabilities of head h of sequence b (summed over branches) into dst (T x T): copied from
// the dense path's a.P[l], or recomputed tile by tile from Q, K and the saved row statistics.
template <class T>
void head_probs(const Pass<T>& p, int l, const AttnMode& m, int b, int h, float* dst) {
  const Activations<T>& a = p.a;
  const int Tn = p.Tn, H = p.H;
  const std::size_t TT = static_cast<std::size_t>(Tn) * Tn, nb = static_cast<std::size_t>(a.nbranch[l]);
  const std::size_t bh = static_cast<std::size_t>(b) * H + h;
  if (m.dense) {
    const T* Pb = a.P[l].data() + bh * nb * TT;
    for (std::size_t i = 0; i < TT; ++i) {
      T sum = 0;
      for (std::size_t br = 0; br < nb; ++br) sum += Pb[br * TT + i];
      dst[i] = static_cast<float>(sum);
    }
    return;
  }
  if (m.lin) {  // prefix-sum path: P_ij = phi(q_i).phi(k_j) / den_i
    const QkvLayout ql = qkv_layout(p.cfg, l);
    const T* seq = a.qkv[l].data() + static_cast<std::int64_t>(b) * Tn * ql.ld();
    detail::linear_probs_head(Tn, ql.dh, seq + ql.q(h), seq + ql.k(h), ql.ld(), a.lin_s[l].data() + bh * Tn, dst);
    return;
  }
  std::vector<T> damp;
  if (m.sd) {  // this head's damping only
    damp.assign(static_cast<std::size_t>(p.N) * H, T(0));
    for (int t = 0; t < Tn; ++t) damp[bh * Tn + t] = a.damp_d[l](static_cast<std::int64_t>(b * Tn + t) * H + h);
  }
  with_tiled_scores(p, l, m, damp.data(), false, [&](auto make) {
    detail::tiled_probs_head(head_qkv(p, l, b, h), make(b, h), a.plans[l], a.lse[l].data() + bh * nb * Tn, dst);
  });
}

// Attention sub-layer: resid_mid[l] = resid[l] + c_proj(heads(qkv(norm_1(resid[l])))).
template <class T>
void attention_sublayer_forward(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const LayerOffsets& o = p.lay.layer[l];
  const int dh = head_dim(p.cfg, l), HD = p.H * dh;
  const AttnMode m = attn_mode(p, l);
  const T* in = norm_forward(p, a.ln1[l], a.ln1_mean[l], a.ln1_rstd[l], a.resid[l].data(), o.ln1_w, o.ln1_b);
  T* qkv = a.qkv[l].data();
  const QkvLayout ql = qkv_layout(p.cfg, l);
  linear_forward(qkv, in, p.W + o.attn_w, o.attn_b >= 0 ? p.W + o.attn_b : nullptr, p.N, p.C,
                 static_cast<int>(ql.ld()));
  if (p.cfg.pos == PosKind::Rope) rope_qk(p, l, qkv, false);
  if (m.sd) sd_damping_forward(p, l, in);
  heads_forward(p, l, m);
  linear_forward(p.tmp.data(), a.atty[l].data(), p.W + o.proj_w, o.proj_b >= 0 ? p.W + o.proj_b : nullptr, p.N, HD,
                 p.C);
  a.resid_mid[l] = a.resid[l] + p.tmp;
  if (p.hooks && p.hooks->on_layer)
    report_layer<T>(
        p.hooks->on_layer, l, p.B, p.Tn, ql, p.C, p.hooks->capture_heads,
        [&](int b, int h, float* dst) { head_probs(p, l, m, b, h, dst); }, qkv, a.resid[l].data(), p.tmp.data(),
        a.resid_mid[l].data());
}
// Backward of attention_sublayer_forward: a.dres holds d resid_mid[l] on entry, d resid[l] on exit.
template <class T>
void attention_sublayer_backward(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const LayerOffsets& o = p.lay.layer[l];
  const int dh = head_dim(p.cfg, l), HD = p.H * dh;
  const AttnMode m = attn_mode(p, l);
  a.datty.setZero(p.N, HD);
  linear_backward(a.datty.data(), p.G + o.proj_w, o.proj_b >= 0 ? p.G + o.proj_b : nullptr, a.dres.data(),
                  a.atty[l].data(), p.W + o.proj_w, p.N, HD, p.C);
  const QkvLayout ql = qkv_layout(p.cfg, l);
  a.dqkv.setZero(p.N, ql.ld());
  heads_backward(p, l, m);
  if (p.cfg.pos == PosKind::Rope) rope_qk(p, l, a.dqkv.data(), true);
  const T* in = p.ln() ? a.ln1[l].data() : a.resid[l].data();
  a.dn.setZero(p.N, p.C);
  if (m.sd) sd_damping_backward(p, l, in, a.dn);
  linear_backward(a.dn.data(), p.G + o.attn_w, o.attn_b >= 0 ? p.G + o.attn_b : nullptr, a.dqkv.data(), in,
                  p.W + o.attn_w, p.N, p.C, static_cast<int>(ql.ld()));
  norm_backward(p, a.dres, a.dn, a.resid[l].data(), a.ln1_mean[l], a.ln1_rstd[l], o.ln1_w, o.ln1_b);
}

// ------------------------------------------------------------------------------------ MLP

// MLP sub-layer: resid[l+1] = resid_mid[l] + c_proj(act(c_fc(norm_2(src)))), src = resid_mid[l]
// (sequential) or resid[l] (arch.parallel_residual, GPT-NeoX: x + attn(ln_1 x) + mlp(ln_2 x)); act =
// GELU (tanh or erf) on [N, F] or SwiGLU on [N, 2F] -> [N, F].
template <class T>
const T* mlp_source(const Pass<T>& p, int l) {
  return p.cfg.arch.parallel_residual ? p.a.resid[l].data() : p.a.resid_mid[l].data();
}
template <class T>
void mlp_sublayer_forward(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const LayerOffsets& o = p.lay.layer[l];
  const int N = p.N, C = p.C, F = ffn_dim(p.cfg);
  const MlpKind act = p.cfg.arch.mlp;
  const int FW = act == MlpKind::SwiGLU ? 2 * F : F;
  const T* m = norm_forward(p, a.ln2[l], a.ln2_mean[l], a.ln2_rstd[l], mlp_source(p, l), o.ln2_w, o.ln2_b);
  linear_forward(a.fch[l].data(), m, p.W + o.fc_w, o.fc_b >= 0 ? p.W + o.fc_b : nullptr, N, C, FW);
  const std::int64_t NF = static_cast<std::int64_t>(N) * F;
  if (act == MlpKind::SwiGLU)
    swiglu_forward(a.fcg[l].data(), a.fch[l].data(), N, F);
  else if (act == MlpKind::Gelu)
    gelu_erf_forward(a.fcg[l].data(), a.fch[l].data(), NF);
  else
    gelu_forward(a.fcg[l].data(), a.fch[l].data(), NF);
  linear_forward(p.tmp.data(), a.fcg[l].data(), p.W + o.fcproj_w, o.fcproj_b >= 0 ? p.W + o.fcproj_b : nullptr, N, F,
                 C);
  a.resid[l + 1] = a.resid_mid[l] + p.tmp;
}
// Backward of mlp_sublayer_forward: a.dres holds d resid[l+1] on entry, d resid_mid[l] on exit
// (sequential); with a parallel residual dres is unchanged (d resid_mid = d resid[l+1]) and the
// MLP branch's d resid[l] goes to a.dpar, added by block_backward after the attention sub-layer.
template <class T>
void mlp_sublayer_backward(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const LayerOffsets& o = p.lay.layer[l];
  const int N = p.N, C = p.C, F = ffn_dim(p.cfg);
  const MlpKind act = p.cfg.arch.mlp;
  const int FW = act == MlpKind::SwiGLU ? 2 * F : F;
  a.dfc.setZero(N, F);
  linear_backward(a.dfc.data(), p.G + o.fcproj_w, o.fcproj_b >= 0 ? p.G + o.fcproj_b : nullptr, a.dres.data(),
                  a.fcg[l].data(), p.W + o.fcproj_w, N, F, C);
  const std::int64_t NF = static_cast<std::int64_t>(N) * F;
  if (act == MlpKind::GeluTanh) {  // writes every entry of d fch: no zero fill (ops.hpp)
    a.dfch.resize(N, FW);
    gelu_backward(a.dfch.data(), a.fch[l].data(), a.dfc.data(), NF, false);
  } else {
    a.dfch.setZero(N, FW);
    if (act == MlpKind::SwiGLU)
      swiglu_backward(a.dfch.data(), a.fch[l].data(), a.dfc.data(), N, F);
    else
      gelu_erf_backward(a.dfch.data(), a.fch[l].data(), a.dfc.data(), NF);
  }
  const T* src = mlp_source(p, l);
  const T* m = p.ln() ? a.ln2[l].data() : src;
  a.dn.setZero(N, C);
  linear_backward(a.dn.data(), p.G + o.fc_w, o.fc_b >= 0 ? p.G + o.fc_b : nullptr, a.dfch.data(), m, p.W + o.fc_w, N, C,
                  FW);
  if (p.cfg.arch.parallel_residual) {
    a.dpar.setZero(N, C);
    norm_backward(p, a.dpar, a.dn, src, a.ln2_mean[l], a.ln2_rstd[l], o.ln2_w, o.ln2_b);
  } else {
    norm_backward(p, a.dres, a.dn, src, a.ln2_mean[l], a.ln2_rstd[l], o.ln2_w, o.ln2_b);
  }
}

// ---------------------------------------------------------------------------------- block

// A non-finite value in the residual stream resid[k] (k = 0: after the embedding, k = l + 1: after
// block l) is refused naming where: finite weights can still overflow float arithmetic (3e38), and
// every result downstream (Jacobian norms, C*, losses) would be null, zero or infinite with exit 0.
template <class T>
void require_finite_stream(const Pass<T>& p, int k) {
  if (!p.a.check_finite) return;
  const MatR<T>& r = p.a.resid[k];
  if (r.allFinite()) return;
  Eigen::Index bad = 0;
  for (Eigen::Index i = 0; i < r.size(); ++i)
    if (!std::isfinite(r.data()[i])) {
      bad = i;
      break;
    }
  const Eigen::Index row = bad / r.cols();
  throw InvalidArgument(str("forward pass: the residual stream ",
                            k == 0 ? std::string("after the embedding") : str("after layer ", k - 1),
                            " holds a non-finite value (", r.data()[bad], " at sequence ", row / p.Tn, ", position ",
                            row % p.Tn, ", channel ", bad % r.cols(),
                            "): the model's weights overflow the arithmetic (a damaged or mis-scaled checkpoint)"));
}

template <class T>
void block_forward(Pass<T>& p, int l) {
  attention_sublayer_forward(p, l);
  mlp_sublayer_forward(p, l);
  require_finite_stream(p, l + 1);
}
template <class T>
void block_backward(Pass<T>& p, int l) {
  mlp_sublayer_backward(p, l);
  attention_sublayer_backward(p, l);
  if (p.cfg.arch.parallel_residual) p.a.dres += p.a.dpar;
}

// ---------------------------------------------------------------------------- head and loss

// Final norm, tied LM head (logits = norm_f(resid[L]) wte^T) and cross-entropy. Returns the mean
// loss over counted positions; `count` receives their number. a.logits holds probabilities after.
template <class T>
T head_forward(Pass<T>& p, const std::int32_t* targets, std::int64_t& count) {
  Activations<T>& a = p.a;
  const int N = p.N, V = p.cfg.vocab_size;
  const T* f = norm_forward(p, a.lnf, a.lnf_mean, a.lnf_rstd, a.resid[p.cfg.n_layer].data(), p.lay.lnf_w, p.lay.lnf_b);
  const std::int64_t head = p.lay.lm_head >= 0 ? p.lay.lm_head : p.lay.wte;  // untied or tied LM head
  linear_forward(a.logits.data(), f, p.W + head, static_cast<const T*>(nullptr), N, p.C, V);
  count = crossentropy_forward(a.logits.data(), a.losses.data(), targets, N, V);
  if (a.check_finite && !a.logits.allFinite())  // finite stream, overflowing LM head
    throw InvalidArgument(str("forward pass: the output layer (final norm and LM head after layer ", p.cfg.n_layer - 1,
                              ") gives non-finite logits: the model's weights overflow the arithmetic (a damaged or "
                              "mis-scaled checkpoint)"));
  T loss = 0;
  for (int n = 0; n < N; ++n) loss += a.losses[n];
  return count > 0 ? loss / T(count) : T(0);
}
// Backward of head_forward for the mean loss (or, with an output seed, for the seed's objective):
// a.dres receives d resid[L].
template <class T>
void head_backward(Pass<T>& p, const std::int32_t* targets, std::int64_t count, const GradientSeed<T>* seed) {
  Activations<T>& a = p.a;
  const int N = p.N, V = p.cfg.vocab_size, L = p.cfg.n_layer;
  if (seed)
    seed->on_probs(a.logits.data(), N, V);  // probabilities -> d objective / d logits
  else
    crossentropy_backward(a.logits.data(), targets, N, V, T(1) / T(count));
  const T* f = p.ln() ? a.lnf.data() : a.resid[L].data();
  a.dn.setZero(N, p.C);
  const std::int64_t head = p.lay.lm_head >= 0 ? p.lay.lm_head : p.lay.wte;
  linear_backward(a.dn.data(), p.G + head, static_cast<T*>(nullptr), a.logits.data(), f, p.W + head, N, p.C, V);
  a.dres.setZero(N, p.C);
  norm_backward(p, a.dres, a.dn, a.resid[L].data(), a.lnf_mean, a.lnf_rstd, p.lay.lnf_w, p.lay.lnf_b);
}

// ------------------------------------------------------------- gradient seeds (issue 10)

// Validate a GradientSeed (cf/nn/gradient_seed.hpp) against the model.
template <class T>
void check_seed(const GradientSeed<T>& s, int L, bool has_grad) {
  require(has_grad, "a gradient seed needs a parameter gradient buffer (scratch)");
  const bool resid = s.resid_layer >= 0;
  require(!resid || (s.resid_layer >= 1 && s.resid_layer <= L && s.resid),
          "gradient seed: resid_layer = ", s.resid_layer, " must lie in [1, n_layer = ", L, "] with a seed buffer");
  require(resid || s.on_probs, "gradient seed: neither on_probs nor a residual seed");
  const int top = resid ? s.resid_layer - 1 : L;
  require(s.out_layer >= 0 && s.out_layer <= top, "gradient seed: out_layer = ", s.out_layer, " outside [0, ", top,
          "]");
}
// Back through blocks top-1 .. out_layer (a.dres = d resid[top] on entry), then hand d resid[out_layer] out.
template <class T>
void seeded_blocks_backward(Pass<T>& p, int top, const GradientSeed<T>& s) {
  for (int l = top - 1; l >= s.out_layer; --l) block_backward(p, l);
  if (s.dresid) s.dresid->assign(p.a.dres.data(), p.a.dres.data() + static_cast<std::size_t>(p.N) * p.C);
}

// ---------------------------------------------------------------------------------- checks

template <class T>
void check_inputs(const Model<T>& model, const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                  const std::vector<T>* grad, const ForwardHooks* hooks) {
  const ModelConfig& cfg = model.config;
  const ParamLayout& lay = model.layout;
  require(B >= 1, "batch size B must be >= 1 (got ", B, ")");
  require(Tn >= 1 && Tn <= cfg.block_size, "sequence length T must be in [1, block_size = ", cfg.block_size, "] (got ",
          Tn, ")");
  require(static_cast<std::int64_t>(model.params.size()) == lay.total, "model has ", model.params.size(),
          " parameters but its layout needs ", lay.total);
  require(!grad || static_cast<std::int64_t>(grad->size()) == lay.total, "gradient buffer has ",
          grad ? grad->size() : 0, " entries but the layout needs ", lay.total);
  require(!(grad && hooks), "forward hooks are inference-only: no backward pass with hooks");
  const int V = cfg.vocab_size;
  for (int n = 0; n < B * Tn; ++n) {
    require(tokens[n] >= 0 && tokens[n] < V, "token ", tokens[n], " at index ", n, " outside [0, vocab_size = ", V,
            ")");
    require(targets[n] < V, "target ", targets[n], " at index ", n, " >= vocab_size = ", V);
  }
}

}  // namespace

template <class T>
T forward_backward(const Model<T>& model, const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                   std::vector<T>* grad, Workspace<T>& ws, const ForwardHooks* hooks, std::vector<T>* logprobs,
                   const GradientSeed<T>* seed) {
  check_inputs(model, tokens, targets, B, Tn, grad, hooks);
  const ModelConfig& cfg = model.config;
  const int L = cfg.n_layer, N = B * Tn;
  if (seed) check_seed(*seed, L, grad != nullptr);
  Activations<T>& a = ws.get();
  a.ensure(cfg, B, Tn);
  for (int l = 0; l < L; ++l)
    if (a.plans[l].Tn != Tn) a.plans[l] = detail::make_tile_plan(detail::layer_branches(cfg.layers[l], Tn), Tn);
  Pass<T> p{cfg,        model.layout, model.params.data(),    grad ? grad->data() : nullptr, a, B, Tn, N, cfg.d_model,
            cfg.n_head, hooks,        MatR<T>(N, cfg.d_model)};

  embed_forward(p, tokens);
  require_finite_stream(p, 0);
  if (seed && seed->resid_layer >= 0) {  // residual seed: the objective is <seed, resid[top]>
    const int top = seed->resid_layer;
    for (int l = 0; l < top; ++l) block_forward(p, l);
    a.dres = CMapR<T>(seed->resid, N, cfg.d_model);
    const T objective = (a.dres.array() * a.resid[top].array()).sum();
    seeded_blocks_backward(p, top, *seed);
    return objective;
  }
  for (int l = 0; l < L; ++l) block_forward(p, l);
  std::int64_t count = 0;
  const T loss = head_forward(p, targets, count);
  if (logprobs) {
    logprobs->assign(N, T(0));
    for (int n = 0; n < N; ++n) (*logprobs)[n] = -a.losses[n];
  }
  if (!grad || (count == 0 && !seed)) return loss;

  head_backward(p, targets, count, seed);
  if (seed) {
    seeded_blocks_backward(p, L, *seed);
    return loss;
  }
  for (int l = L - 1; l >= 0; --l) block_backward(p, l);
  embed_backward(p, tokens);
  return loss;
}

template class Workspace<float>;
template class Workspace<double>;
template float forward_backward<float>(const Model<float>&, const std::int32_t*, const std::int32_t*, int, int,
                                       std::vector<float>*, Workspace<float>&, const ForwardHooks*, std::vector<float>*,
                                       const GradientSeed<float>*);
template double forward_backward<double>(const Model<double>&, const std::int32_t*, const std::int32_t*, int, int,
                                         std::vector<double>*, Workspace<double>&, const ForwardHooks*,
                                         std::vector<double>*, const GradientSeed<double>*);

}  // namespace cf::nn
