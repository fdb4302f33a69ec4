// Forward and backward pass of the whole model (see cf/nn/model.hpp), written as the model's data
// flow in the style of llm.c:
//
//   forward_backward
//     embed_forward                      tokens -> resid[0]
//     block_forward(l), l = 0..L-1       resid[l] -> resid_mid[l] -> resid[l+1]
//       attention_sublayer_forward       norm_1, qkv (+ RoPE), the layer's variant unit, c_proj, +
//       mlp_sublayer_forward             norm_2, c_fc, GELU, c_proj, +
//     head_forward                       norm_f, tied lm head, cross-entropy -> loss
//     head_backward                      d loss -> d resid[L]
//     block_backward(l), l = L-1..0      mlp_sublayer_backward, attention_sublayer_backward
//     embed_backward                     d resid[0] -> d wte, d wpe
//
// Each function takes a Pass (the config, parameter and gradient pointers, saved activations and
// batch shape of this call). The per-op kernels live in cf/nn/ops.hpp; each attention variant is a
// unit of its own (cf/nn/attention_variant.hpp, cf/nn/detail/variants/), reached through
// attention_unit, the one dispatch point. This file only orchestrates and saves activations.
#include "cf/nn/model.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/nn/attention_variant.hpp"
#include "cf/nn/detail/activations.hpp"
#include "cf/nn/detail/attention_masks.hpp"
#include "cf/nn/detail/variants/unit.hpp"
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

using detail::qkv_layout;
using detail::QkvLayout;

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

// The unit that runs layer l's attention in this pass: the layer's variant, or ELU+1 linear
// attention under the linearize hook. The one dispatch point over the variants
// (cf/nn/attention_variant.hpp); the unit owns everything variant-specific from qkv to the heads'
// output and back.
template <class T>
const VariantKernels<T>& attention_unit(const Pass<T>& p, int l) {
  const bool linearize =
      p.hooks && l < static_cast<int>(p.hooks->linearize.size()) && p.hooks->linearize[static_cast<std::size_t>(l)];
  return attention_variant(linearize ? AttnKind::Linear : p.cfg.layers[static_cast<std::size_t>(l)].attn)
      .template kernels<T>();
}
// Layer l as its unit sees it; `in` is the sub-layer input (the norm's output or the stream).
template <class T>
detail::AttnLayer<T> attn_layer(Pass<T>& p, int l, const T* in) {
  const bool dense = p.a.path == AttentionPath::Dense || (p.hooks && p.hooks->on_scores);
  detail::AttnLayer<T> L{
      p.cfg,   p.lay, l, p.W, p.G, p.a, p.B, p.Tn, p.N, p.C, p.H, head_dim(p.cfg, l), qkv_layout(p.cfg, l),
      p.hooks, dense};
  L.in = in;
  return L;
}

// Attention sub-layer: resid_mid[l] = resid[l] + c_proj(heads(qkv(norm_1(resid[l])))).
template <class T>
void attention_sublayer_forward(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const LayerOffsets& o = p.lay.layer[l];
  const int dh = head_dim(p.cfg, l), HD = p.H * dh;
  const T* in = norm_forward(p, a.ln1[l], a.ln1_mean[l], a.ln1_rstd[l], a.resid[l].data(), o.ln1_w, o.ln1_b);
  T* qkv = a.qkv[l].data();
  const QkvLayout ql = qkv_layout(p.cfg, l);
  linear_forward(qkv, in, p.W + o.attn_w, o.attn_b >= 0 ? p.W + o.attn_b : nullptr, p.N, p.C,
                 static_cast<int>(ql.ld()));
  if (p.cfg.pos == PosKind::Rope) rope_qk(p, l, qkv, false);
  const VariantKernels<T>& unit = attention_unit(p, l);
  detail::AttnLayer<T> L = attn_layer(p, l, in);
  unit.forward(L);
  linear_forward(p.tmp.data(), a.atty[l].data(), p.W + o.proj_w, o.proj_b >= 0 ? p.W + o.proj_b : nullptr, p.N, HD,
                 p.C);
  a.resid_mid[l] = a.resid[l] + p.tmp;
  if (p.hooks && p.hooks->on_layer)
    report_layer<T>(
        p.hooks->on_layer, l, p.B, p.Tn, ql, p.C, p.hooks->capture_heads,
        [&](int b, int h, float* dst) { unit.probs(L, b, h, dst); }, qkv, a.resid[l].data(), p.tmp.data(),
        a.resid_mid[l].data());
}
// Backward of attention_sublayer_forward: a.dres holds d resid_mid[l] on entry, d resid[l] on exit.
template <class T>
void attention_sublayer_backward(Pass<T>& p, int l) {
  Activations<T>& a = p.a;
  const LayerOffsets& o = p.lay.layer[l];
  const int dh = head_dim(p.cfg, l), HD = p.H * dh;
  a.datty.setZero(p.N, HD);
  linear_backward(a.datty.data(), p.G + o.proj_w, o.proj_b >= 0 ? p.G + o.proj_b : nullptr, a.dres.data(),
                  a.atty[l].data(), p.W + o.proj_w, p.N, HD, p.C);
  const QkvLayout ql = qkv_layout(p.cfg, l);
  a.dqkv.setZero(p.N, ql.ld());
  const T* in = p.ln() ? a.ln1[l].data() : a.resid[l].data();
  a.dn.setZero(p.N, p.C);
  detail::AttnLayer<T> L = attn_layer(p, l, in);
  L.dn = &a.dn;
  attention_unit(p, l).backward(L);  // d qkv, the unit's parameters, and its own share of d in
  if (p.cfg.pos == PosKind::Rope) rope_qk(p, l, a.dqkv.data(), true);
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
  if (seed && seed->top)
    apply_top_seed(*seed->top, a.logits.data(), p.B, p.Tn, V);
  else if (seed)
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
  check_seed_shape(s, L);
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
