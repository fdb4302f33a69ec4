// Forward and backward pass of the whole model (see cf/nn/model.hpp). The per-op kernels live in
// cf/nn/ops.hpp and cf/nn/detail/attention.hpp; this file only orchestrates and saves activations.
#include "cf/nn/model.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/activations.hpp"
#include "cf/nn/ops.hpp"

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

namespace {

bool is_masked_family(AttnKind k) {
  return k == AttnKind::Full || k == AttnKind::Block || k == AttnKind::Swa || k == AttnKind::Bridge ||
         k == AttnKind::Pbb || k == AttnKind::SeBridge;
}

// Dense branch masks of a layer at length Tn (row = query t, column = key s).
std::vector<std::vector<std::uint8_t>> build_masks(const LayerConfig& lc, int Tn) {
  auto causal = [&]() {
    std::vector<std::uint8_t> m(static_cast<std::size_t>(Tn) * Tn, 0);
    for (int i = 0; i < Tn; ++i)
      for (int j = 0; j <= i; ++j) m[static_cast<std::size_t>(i) * Tn + j] = 1;
    return m;
  };
  if (!is_masked_family(lc.attn) || lc.attn == AttnKind::Full) return {causal()};
  graph::Pattern p;
  p.b = lc.b;
  p.w = lc.w;
  p.e = lc.e;
  p.kind = lc.attn == AttnKind::Block    ? graph::PatternKind::Block
           : lc.attn == AttnKind::Swa    ? graph::PatternKind::Swa
           : lc.attn == AttnKind::Bridge ? graph::PatternKind::Bridge
           : lc.attn == AttnKind::Pbb    ? graph::PatternKind::Pbb
                                         : graph::PatternKind::SeBridge;
  auto fill = [&](const std::function<graph::IntervalSet(graph::Index)>& src) {
    std::vector<std::uint8_t> m(static_cast<std::size_t>(Tn) * Tn, 0);
    for (int t = 0; t < Tn; ++t)
      for (const auto& iv : src(t))
        for (graph::Index s = iv.lo; s <= iv.hi && s <= t; ++s) m[static_cast<std::size_t>(t) * Tn + s] = 1;
    return m;
  };
  const graph::Mask mask = graph::make_mask(p, Tn);
  const bool bridged = p.kind == graph::PatternKind::Bridge || p.kind == graph::PatternKind::Pbb ||
                       p.kind == graph::PatternKind::SeBridge;
  if (!bridged || lc.fusion == graph::Fusion::Union) return {fill([&](graph::Index t) { return graph::sources(mask, t); })};
  graph::Pattern pb = p;
  pb.kind = graph::PatternKind::Block;
  const graph::Mask block = graph::make_mask(pb, Tn);
  return {fill([&](graph::Index t) { return graph::sources(block, t); }),
          fill([&](graph::Index t) { return graph::bridge_sources(mask, t); })};
}

template <class T>
void zero(MatR<T>& m, int r, int c) {
  m.setZero(r, c);
}

// Hand one layer's attention probabilities, Q, K and residual quantities to the capture hook, one
// sequence at a time (float copies, so the hook sees the same types for Model<float> and
// Model<double>). P: per (b, h) nb branch blocks of T x T (summed here); qkv: N x 3 H dh after RoPE;
// x, att, y: N x C residual in, attention output (after c_proj), residual out.
template <class T>
void report_layer(const CaptureHook& hook, int l, int B, int Tn, int H, int dh, int C, std::size_t nb, const T* qkv,
                  const T* P, const T* x, const T* att, const T* y) {
  const std::size_t TT = static_cast<std::size_t>(Tn) * Tn, HD = static_cast<std::size_t>(H) * dh;
  std::vector<float> probs(static_cast<std::size_t>(H) * TT), q(HD * Tn), k(HD * Tn);
  std::vector<float> xin(static_cast<std::size_t>(Tn) * C), aout(xin.size()), yout(xin.size());
  std::vector<float> nx(Tn), na(Tn), ny(Tn);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const T* Pb = P + (static_cast<std::size_t>(b) * H + h) * nb * TT;
      float* dst = probs.data() + static_cast<std::size_t>(h) * TT;
      for (std::size_t i = 0; i < TT; ++i) {
        T sum = 0;
        for (std::size_t br = 0; br < nb; ++br) sum += Pb[br * TT + i];
        dst[i] = static_cast<float>(sum);
      }
      for (int t = 0; t < Tn; ++t) {
        const T* row = qkv + (static_cast<std::size_t>(b) * Tn + t) * 3 * HD + static_cast<std::size_t>(h) * dh;
        for (int d = 0; d < dh; ++d) {
          q[(static_cast<std::size_t>(h) * Tn + t) * dh + d] = static_cast<float>(row[d]);
          k[(static_cast<std::size_t>(h) * Tn + t) * dh + d] = static_cast<float>(row[HD + d]);
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

}  // namespace

template <class T>
T forward_backward(const Model<T>& model, const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                   std::vector<T>* grad, Workspace<T>& ws, const ForwardHooks* hooks, std::vector<T>* logprobs) {
  const ModelConfig& cfg = model.config;
  const ParamLayout& lay = model.layout;
  require(B >= 1, "batch size B must be >= 1 (got ", B, ")");
  require(Tn >= 1 && Tn <= cfg.block_size, "sequence length T must be in [1, block_size = ", cfg.block_size,
          "] (got ", Tn, ")");
  require(static_cast<std::int64_t>(model.params.size()) == lay.total, "model has ", model.params.size(),
          " parameters but its layout needs ", lay.total);
  require(!grad || static_cast<std::int64_t>(grad->size()) == lay.total, "gradient buffer has ", grad ? grad->size() : 0,
          " entries but the layout needs ", lay.total);
  require(!(grad && hooks), "forward hooks are inference-only: no backward pass with hooks");
  const int N = B * Tn, C = cfg.d_model, H = cfg.n_head, L = cfg.n_layer, V = cfg.vocab_size;
  for (int n = 0; n < N; ++n) {
    require(tokens[n] >= 0 && tokens[n] < V, "token ", tokens[n], " at index ", n, " outside [0, vocab_size = ", V, ")");
    require(targets[n] < V, "target ", targets[n], " at index ", n, " >= vocab_size = ", V);
  }
  const bool ln = cfg.norm == NormKind::LayerNorm;
  const T* W = model.params.data();
  Activations<T>& a = ws.get();
  a.ensure(cfg, B, Tn);
  for (int l = 0; l < L; ++l)
    if (a.masks[l].empty()) a.masks[l] = build_masks(cfg.layers[l], Tn);

  encoder_forward(a.resid[0].data(), tokens, W + lay.wte, lay.wpe >= 0 ? W + lay.wpe : nullptr, B, Tn, C);
  MatR<T> tmp(N, C);
  for (int l = 0; l < L; ++l) {
    const LayerConfig& lc = cfg.layers[l];
    const LayerOffsets& o = lay.layer[l];
    const int dh = head_dim(cfg, l), HD = H * dh;
    const bool lin = lc.attn == AttnKind::Linear ||
                     (hooks && l < static_cast<int>(hooks->linearize.size()) && hooks->linearize[l]);
    const bool sd = !lin && lc.attn == AttnKind::Sd;
    const bool runway = !lin && (lc.attn == AttnKind::RunwayDot || lc.attn == AttnKind::RunwayBilinear);
    const T* x = a.resid[l].data();
    const T* in = x;
    if (ln) {
      layernorm_forward(a.ln1[l].data(), a.ln1_mean[l].data(), a.ln1_rstd[l].data(), x, W + o.ln1_w, W + o.ln1_b, N, C);
      in = a.ln1[l].data();
    }
    T* qkv = a.qkv[l].data();
    linear_forward(qkv, in, W + o.attn_w, o.attn_b >= 0 ? W + o.attn_b : nullptr, N, C, 3 * HD);
    if (cfg.pos == PosKind::Rope) {
      // omp-nothrow: rope_apply is arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
      for (int bh = 0; bh < B * H; ++bh) {
        const int b = bh / H, h = bh % H;
        T* base = qkv + static_cast<std::int64_t>(b) * Tn * 3 * HD + h * dh;
        rope_apply(base, Tn, dh, 3 * HD, false);
        rope_apply(base + HD, Tn, dh, 3 * HD, false);
      }
    }
    if (sd) {
      linear_forward(a.damp_z[l].data(), in, W + o.damp_w, W + o.damp_b, N, C, H);
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(N) * H; ++i)
        a.damp_d[l](i) = softplus(a.damp_z[l](i)) + T(lc.sd_eps);
    }
    if (runway) {
      const T c = T(1) / std::sqrt(T(dh));
      cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
      for (int b = 0; b < B; ++b) omp_errors.run([&] {
        detail::CSMap<T> Vl(qkv + static_cast<std::int64_t>(b) * Tn * 3 * HD + 2 * HD + (H - 1) * dh, Tn, dh,
                          Eigen::OuterStride<>(3 * HD));
        MatR<T> Vs = MatR<T>::Zero(Tn, dh);
        for (int i = 1; i < Tn; ++i) Vs.row(i) = Vl.row(i - 1);
        MapR<T> tau(a.tau[l].data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
        if (lc.attn == AttnKind::RunwayDot)
          tau.noalias() = c * Vs * Vl.transpose();
        else
          tau.noalias() = Vs * CMapR<T>(W + o.runway_B, dh, dh) * Vl.transpose();
        MapR<T> rb(a.rbias.data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
        rb.setZero();
        // beta = 1 - sigmoid(tau) on eligible edges 1 <= m <= i-2: log beta = -softplus(tau)
        for (int i = 3; i < Tn; ++i)
          for (int m = 1; m <= i - 2; ++m) rb(i, m) = -softplus(tau(i, m));
      });
      omp_errors.rethrow();
    }
    detail::HeadSpec spec;
    spec.linear = lin;
    spec.sd = sd;
    spec.scale = sd ? 0.5 / std::sqrt(double(dh)) : 1.0 / std::sqrt(double(dh));
    for (const auto& mm : a.masks[l]) spec.masks.push_back(mm.data());
    const std::size_t nb = lin ? 1 : spec.masks.size();
    a.nbranch[l] = static_cast<int>(nb);
    a.ensure_P(l, static_cast<std::size_t>(B) * H * nb * Tn * Tn);
    const bool serial = hooks && hooks->on_scores;
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic) if (!serial)
    for (int bh = 0; bh < B * H; ++bh) omp_errors.run([&] {
      const int b = bh / H, h = bh % H;
      detail::HeadSpec hs = spec;
      if (cfg.pos == PosKind::Alibi && !lin) hs.alibi_slope = alibi_slope(h, H);
      const T* base = qkv + static_cast<std::int64_t>(b) * Tn * 3 * HD + h * dh;
      std::vector<T> dvec;
      if (sd) {
        dvec.resize(Tn);
        for (int t = 0; t < Tn; ++t) dvec[t] = a.damp_d[l](static_cast<std::int64_t>(b * Tn + t) * H + h);
      }
      std::function<void(Eigen::Ref<Eigen::MatrixXf>)> hk;
      if (serial && !lin) hk = [&](Eigen::Ref<Eigen::MatrixXf> m) { hooks->on_scores(l, h, m); };
      detail::attention_head_forward<T>(hs, Tn, dh, base, base + HD, base + 2 * HD, 3 * HD,
                                        a.atty[l].data() + static_cast<std::int64_t>(b) * Tn * HD + h * dh, HD,
                                        sd ? dvec.data() : nullptr,
                                        runway ? a.rbias.data() + static_cast<std::size_t>(b) * Tn * Tn : nullptr,
                                        a.P[l].data() + static_cast<std::size_t>(bh) * nb * Tn * Tn,
                                        a.lin_s[l].data() + static_cast<std::size_t>(bh) * Tn, hk ? &hk : nullptr);
    });
    omp_errors.rethrow();
    linear_forward(tmp.data(), a.atty[l].data(), W + o.proj_w, o.proj_b >= 0 ? W + o.proj_b : nullptr, N, HD, C);
    a.resid_mid[l] = a.resid[l] + tmp;
    if (hooks && hooks->on_layer)
      report_layer<T>(hooks->on_layer, l, B, Tn, H, dh, C, nb, qkv, a.P[l].data(), a.resid[l].data(), tmp.data(),
                      a.resid_mid[l].data());
    const T* m = a.resid_mid[l].data();
    if (ln) {
      layernorm_forward(a.ln2[l].data(), a.ln2_mean[l].data(), a.ln2_rstd[l].data(), m, W + o.ln2_w, W + o.ln2_b, N, C);
      m = a.ln2[l].data();
    }
    linear_forward(a.fch[l].data(), m, W + o.fc_w, W + o.fc_b, N, C, 4 * C);
    gelu_forward(a.fcg[l].data(), a.fch[l].data(), static_cast<std::int64_t>(N) * 4 * C);
    linear_forward(tmp.data(), a.fcg[l].data(), W + o.fcproj_w, W + o.fcproj_b, N, 4 * C, C);
    a.resid[l + 1] = a.resid_mid[l] + tmp;
  }
  const T* f = a.resid[L].data();
  if (ln) {
    layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), f, W + lay.lnf_w, W + lay.lnf_b, N, C);
    f = a.lnf.data();
  }
  linear_forward(a.logits.data(), f, W + lay.wte, static_cast<const T*>(nullptr), N, C, V);
  const std::int64_t count = crossentropy_forward(a.logits.data(), a.losses.data(), targets, N, V);
  T loss = 0;
  for (int n = 0; n < N; ++n) loss += a.losses[n];
  loss = count > 0 ? loss / T(count) : T(0);
  if (logprobs) {
    logprobs->assign(N, T(0));
    for (int n = 0; n < N; ++n) (*logprobs)[n] = -a.losses[n];
  }
  if (!grad || count == 0) return loss;

  // ---------------------------------------------------------------- backward
  T* G = grad->data();
  crossentropy_backward(a.logits.data(), targets, N, V, T(1) / T(count));
  MatR<T>& dres = a.dres;
  MatR<T>& dn = a.dn;
  dn.setZero(N, C);
  linear_backward(dn.data(), G + lay.wte, static_cast<T*>(nullptr), a.logits.data(), f, W + lay.wte, N, C, V);
  dres.setZero(N, C);
  if (ln)
    layernorm_backward(dres.data(), G + lay.lnf_w, G + lay.lnf_b, dn.data(), a.resid[L].data(), W + lay.lnf_w,
                       a.lnf_mean.data(), a.lnf_rstd.data(), N, C);
  else
    dres += dn;
  for (int l = L - 1; l >= 0; --l) {
    const LayerConfig& lc = cfg.layers[l];
    const LayerOffsets& o = lay.layer[l];
    const int dh = head_dim(cfg, l), HD = H * dh;
    const bool lin = lc.attn == AttnKind::Linear;
    const bool sd = lc.attn == AttnKind::Sd;
    const bool runway = lc.attn == AttnKind::RunwayDot || lc.attn == AttnKind::RunwayBilinear;
    // MLP
    a.dfc.setZero(N, 4 * C);
    linear_backward(a.dfc.data(), G + o.fcproj_w, G + o.fcproj_b, dres.data(), a.fcg[l].data(), W + o.fcproj_w, N,
                    4 * C, C);
    a.dfch.setZero(N, 4 * C);
    gelu_backward(a.dfch.data(), a.fch[l].data(), a.dfc.data(), static_cast<std::int64_t>(N) * 4 * C);
    const T* m = ln ? a.ln2[l].data() : a.resid_mid[l].data();
    dn.setZero(N, C);
    linear_backward(dn.data(), G + o.fc_w, G + o.fc_b, a.dfch.data(), m, W + o.fc_w, N, C, 4 * C);
    if (ln)
      layernorm_backward(dres.data(), G + o.ln2_w, G + o.ln2_b, dn.data(), a.resid_mid[l].data(), W + o.ln2_w,
                         a.ln2_mean[l].data(), a.ln2_rstd[l].data(), N, C);
    else
      dres += dn;
    // attention
    a.datty.setZero(N, HD);
    linear_backward(a.datty.data(), G + o.proj_w, o.proj_b >= 0 ? G + o.proj_b : nullptr, dres.data(),
                    a.atty[l].data(), W + o.proj_w, N, HD, C);
    a.dqkv.setZero(N, 3 * HD);
    T* qkv = a.qkv[l].data();
    T* dqkv = a.dqkv.data();
    detail::HeadSpec spec;
    spec.linear = lin;
    spec.sd = sd;
    spec.scale = sd ? 0.5 / std::sqrt(double(dh)) : 1.0 / std::sqrt(double(dh));
    for (const auto& mm : a.masks[l]) spec.masks.push_back(mm.data());
    if (lin || sd || runway) spec.masks.resize(1);
    const std::size_t nb = static_cast<std::size_t>(a.nbranch[l]);
    if (runway) a.dS.resize(static_cast<std::size_t>(B) * H * Tn * Tn);
    if (sd) a.ddamp.setZero(N, H);
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic)
    for (int bh = 0; bh < B * H; ++bh) omp_errors.run([&] {
      const int b = bh / H, h = bh % H;
      const std::int64_t off = static_cast<std::int64_t>(b) * Tn * 3 * HD + h * dh;
      std::vector<T> dd;
      if (sd) dd.resize(Tn);
      detail::attention_head_backward<T>(spec, Tn, dh, qkv + off, qkv + off + HD, qkv + off + 2 * HD, 3 * HD,
                                         dqkv + off, dqkv + off + HD, dqkv + off + 2 * HD,
                                         a.datty.data() + static_cast<std::int64_t>(b) * Tn * HD + h * dh, HD,
                                         a.P[l].data() + static_cast<std::size_t>(bh) * nb * Tn * Tn,
                                         a.lin_s[l].data() + static_cast<std::size_t>(bh) * Tn,
                                         runway ? a.dS.data() + static_cast<std::size_t>(bh) * Tn * Tn : nullptr,
                                         sd ? dd.data() : nullptr);
      if (sd)
        for (int t = 0; t < Tn; ++t) a.ddamp(static_cast<std::int64_t>(b * Tn + t), h) = dd[t];
    });
    omp_errors.rethrow();
    if (runway) {
      const T c = T(1) / std::sqrt(T(dh));
      std::vector<MatR<T>> dBpart(static_cast<std::size_t>(B));
      cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
      for (int b = 0; b < B; ++b) omp_errors.run([&] {
        const std::int64_t voff = static_cast<std::int64_t>(b) * Tn * 3 * HD + 2 * HD + (H - 1) * dh;
        detail::CSMap<T> Vl(qkv + voff, Tn, dh, Eigen::OuterStride<>(3 * HD));
        detail::SMap<T> dVl(dqkv + voff, Tn, dh, Eigen::OuterStride<>(3 * HD));
        CMapR<T> tau(a.tau[l].data() + static_cast<std::size_t>(b) * Tn * Tn, Tn, Tn);
        MatR<T> Gt = MatR<T>::Zero(Tn, Tn);  // d loss / d tau
        for (int h = 0; h < H; ++h) {
          CMapR<T> dSh(a.dS.data() + (static_cast<std::size_t>(b) * H + h) * Tn * Tn, Tn, Tn);
          for (int i = 3; i < Tn; ++i)
            for (int mm = 1; mm <= i - 2; ++mm) Gt(i, mm) += dSh(i, mm);
        }
        for (int i = 3; i < Tn; ++i)
          for (int mm = 1; mm <= i - 2; ++mm) Gt(i, mm) *= -sigmoid(tau(i, mm));
        MatR<T> Vs = MatR<T>::Zero(Tn, dh);
        for (int i = 1; i < Tn; ++i) Vs.row(i) = Vl.row(i - 1);
        MatR<T> dVs;
        if (lc.attn == AttnKind::RunwayDot) {
          dVs = c * Gt * Vl;
          dVl.noalias() += c * Gt.transpose() * Vs;
        } else {
          CMapR<T> Bm(W + o.runway_B, dh, dh);
          dVs = Gt * Vl * Bm.transpose();
          dVl.noalias() += Gt.transpose() * Vs * Bm;
          dBpart[b] = Vs.transpose() * Gt * Vl;
        }
        for (int i = 1; i < Tn; ++i) dVl.row(i - 1) += dVs.row(i);
      });
      omp_errors.rethrow();
      if (lc.attn == AttnKind::RunwayBilinear) {
        MapR<T> dB(G + o.runway_B, dh, dh);
        for (int b = 0; b < B; ++b) dB += dBpart[b];
      }
    }
    if (cfg.pos == PosKind::Rope) {
      // omp-nothrow: rope_apply is arithmetic on raw pointers (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
      for (int bh = 0; bh < B * H; ++bh) {
        const int b = bh / H, h = bh % H;
        T* base = dqkv + static_cast<std::int64_t>(b) * Tn * 3 * HD + h * dh;
        rope_apply(base, Tn, dh, 3 * HD, true);
        rope_apply(base + HD, Tn, dh, 3 * HD, true);
      }
    }
    const T* in = ln ? a.ln1[l].data() : a.resid[l].data();
    dn.setZero(N, C);
    if (sd) {
      MatR<T> dz(N, H);
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(N) * H; ++i)
        dz(i) = a.ddamp(i) * sigmoid(a.damp_z[l](i));
      linear_backward(dn.data(), G + o.damp_w, G + o.damp_b, dz.data(), in, W + o.damp_w, N, C, H);
    }
    linear_backward(dn.data(), G + o.attn_w, o.attn_b >= 0 ? G + o.attn_b : nullptr, dqkv, in, W + o.attn_w, N, C,
                    3 * HD);
    if (ln)
      layernorm_backward(dres.data(), G + o.ln1_w, G + o.ln1_b, dn.data(), a.resid[l].data(), W + o.ln1_w,
                         a.ln1_mean[l].data(), a.ln1_rstd[l].data(), N, C);
    else
      dres += dn;
  }
  encoder_backward(G + lay.wte, lay.wpe >= 0 ? G + lay.wpe : nullptr, dres.data(), tokens, B, Tn, C);
  return loss;
}

template class Workspace<float>;
template class Workspace<double>;
template float forward_backward<float>(const Model<float>&, const std::int32_t*, const std::int32_t*, int, int,
                                       std::vector<float>*, Workspace<float>&, const ForwardHooks*,
                                       std::vector<float>*);
template double forward_backward<double>(const Model<double>&, const std::int32_t*, const std::int32_t*, int, int,
                                         std::vector<double>*, Workspace<double>&, const ForwardHooks*,
                                         std::vector<double>*);

}  // namespace cf::nn
