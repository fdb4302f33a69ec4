#pragma once
// The attention variant unit (issue 28): what a unit sees of one layer in one pass (AttnLayer), where
// its saved state lives (unit_state), and the softmax paths every softmax unit shares
// (SoftmaxUnit: the dense oracle around the unit's dense logits, the tiled kernel around its score
// policy, the capture probabilities). A unit is a type
//
//   struct MyUnit : SoftmaxUnit<MyUnit> {
//     static constexpr GpuHook gpu{...};                                     // lib/gpu's hook
//     static std::vector<VariantParam> params(const ModelConfig&, int l);   // parameter block
//     template <class T> struct State { std::size_t bytes() const; ... };   // saved state
//     template <class T> static void prepare(AttnLayer<T>&, State<T>&);     // before the heads
//     template <class T> static void dense_scores(const AttnLayer<T>&, const State<T>&,
//                                                 const HeadQKV<T>&, int b, int h, MatR<T>& S);
//     template <class T> static void dense_bias(const AttnLayer<T>&, const State<T>&, int b, int h, MatR<T>& S);
//     template <class T> static void dense_scores_backward(const AttnLayer<T>&, State<T>&,
//                                   const HeadQKV<T>&, const HeadQKVGrads<T>&, int b, int h, const MatR<T>& dS);
//     template <class T, class Pos> static auto scores(const AttnLayer<T>&, State<T>&, int b, int h,
//                                                      bool grads, const Pos& pos);  // tiled policy
//     template <class T> static void begin_backward(AttnLayer<T>&, State<T>&);
//     template <class T> static void finish_backward(AttnLayer<T>&, State<T>&);  // reductions, d input
//   };
//
// Members a unit does not declare come from SoftmaxUnit (no parameters, empty state, no-op hooks).
// A unit that is not a softmax (ELU+1 linear) defines forward / backward / probs itself.
// make_variant_entry<Unit>() turns a unit into the table entry of cf/nn/attention_variant.hpp.
// Internal to lib/nn (tests may define units).
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cf/core/omp_exception.hpp"
#include "cf/nn/attention_variant.hpp"
#include "cf/nn/detail/activations.hpp"
#include "cf/nn/detail/attention_dense.hpp"
#include "cf/nn/detail/attention_tiled.hpp"
#include "cf/nn/detail/variants/alibi.hpp"
#include "cf/nn/detail/variants/score_policy.hpp"

namespace cf::nn::detail {

/// Columns of one qkv row [N, (H + 2 KV) dh] (grouped-query attention, ArchVariant::n_kv_head):
/// queries of the H heads, then keys and values of the KV key/value heads; head h reads kv head
/// h / (H / KV). Without GQA (KV = H) this is the GPT-2 [q | k | v] layout.
struct QkvLayout {
  int H, KV, dh;
  std::int64_t ld() const { return static_cast<std::int64_t>(H + 2 * KV) * dh; }
  std::int64_t q(int h) const { return static_cast<std::int64_t>(h) * dh; }
  std::int64_t k(int h) const { return static_cast<std::int64_t>(H + h / (H / KV)) * dh; }
  std::int64_t v(int h) const { return static_cast<std::int64_t>(H + KV + h / (H / KV)) * dh; }
};
inline QkvLayout qkv_layout(const ModelConfig& c, int l) { return {c.n_head, kv_heads(c), head_dim(c, l)}; }

/// Layer l of one forward_backward call as a unit sees it: config, parameters W and gradient G
/// (null in a forward-only pass), saved activations (a.qkv[l] after RoPE, a.atty[l] the head
/// outputs, a.datty / a.dqkv the backward's), batch shape, hooks, which path runs, and the
/// sub-layer input `in` [N, C] (the norm's output, or the stream without norms) with its gradient
/// `dn` (backward, +=).
template <class T>
struct AttnLayer {
  const ModelConfig& cfg;
  const ParamLayout& lay;
  int l;
  const T* W;
  T* G;
  Activations<T>& a;
  int B, Tn, N, C, H, dh;
  QkvLayout ql;
  const ForwardHooks* hooks;
  bool dense;  ///< T x T path (AttentionPath::Dense or a score hook); else tiled / prefix-sum
  const T* in = nullptr;
  MatR<T>* dn = nullptr;

  const LayerConfig& lc() const { return cfg.layers[static_cast<std::size_t>(l)]; }
  const LayerOffsets& off() const { return lay.layer[static_cast<std::size_t>(l)]; }
  std::int64_t HD() const { return static_cast<std::int64_t>(H) * dh; }
  /// Row offset of sequence b in qkv / dqkv.
  std::int64_t seq(int b) const { return static_cast<std::int64_t>(b) * Tn * ql.ld(); }
  /// Offset of head h of sequence b in atty / datty (row stride HD()).
  std::int64_t out(int b, int h) const { return static_cast<std::int64_t>(b) * Tn * HD() + h * dh; }
  /// Q, K, V of head h of sequence b (grouped-query attention: head h reads kv head h / (H / KV)).
  HeadQKV<T> head(int b, int h) const {
    const T* s = a.qkv[static_cast<std::size_t>(l)].data() + seq(b);
    HeadQKV<T> hq;
    hq.Tn = Tn;
    hq.dh = dh;
    hq.q = s + ql.q(h);
    hq.k = s + ql.k(h);
    hq.v = s + ql.v(h);
    hq.ld = ql.ld();
    return hq;
  }
  /// dQ, dK, dV of head h of sequence b in a.dqkv.
  HeadQKVGrads<T> grads(int b, int h) const {
    T* s = a.dqkv.data() + seq(b);
    HeadQKVGrads<T> g;
    g.dq = s + ql.q(h);
    g.dk = s + ql.k(h);
    g.dv = s + ql.v(h);
    g.ld = ql.ld();
    return g;
  }
};

/// fn(b, h) for every sequence b < B and head h < H, one OpenMP task per (sequence, key/value head):
/// the query heads sharing a key/value head (grouped-query attention) accumulate into the same dK,
/// dV columns, so they run in order inside the task (no race). The backward passes' loop.
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

/// Identity of a unit type (the owner of a layer's saved state).
template <class Unit>
const void* unit_id() {
  static const char id = 0;
  return &id;
}

/// The saved state of Unit in layer L.l, made on first use and replaced when another unit ran the
/// layer before (a linearize hook switches a layer's unit between calls).
template <class Unit, class T>
typename Unit::template State<T>& unit_state(AttnLayer<T>& L) {
  using S = typename Unit::template State<T>;
  UnitSlot& slot = L.a.unit_state[static_cast<std::size_t>(L.l)];
  if (slot.unit != unit_id<Unit>() || !slot.state) {
    slot.unit = unit_id<Unit>();
    slot.state = std::make_shared<S>();
    slot.bytes = [](const void* p) { return static_cast<const S*>(p)->bytes(); };
  }
  return *static_cast<S*>(slot.state.get());
}

/// Position schemes as score-policy wrappers: none, or ALiBi (-slope_h (i - j), variants/alibi.hpp).
struct NoPosition {
  template <class P>
  P operator()(P p, int) const {
    return p;
  }
};
struct AlibiPosition {
  const double* slopes;
  template <class P>
  Alibi<P> operator()(P p, int h) const {
    Alibi<P> al;
    al.inner = p;
    al.slope = slopes[h];
    return al;
  }
};
/// fn(pos) with the layer's position wrapper, so the tile loop is compiled per (variant, position).
template <class T, class Fn>
void with_position(const AttnLayer<T>& L, Fn&& fn) {
  if (L.cfg.pos == PosKind::Alibi) {
    const std::vector<double> slopes = alibi_slopes(L.cfg);  // the model's recipe (cf::nn::alibi_slopes)
    fn(AlibiPosition{slopes.data()});
  } else {
    fn(NoPosition{});
  }
}

/// The softmax paths of a unit (CRTP base) and the defaults of the members it may leave out.
template <class Unit>
struct SoftmaxUnit {
  template <class T>
  struct State {
    std::size_t bytes() const { return 0; }
  };
  static std::vector<VariantParam> params(const ModelConfig&, int) { return {}; }
  template <class T, class S>
  static void prepare(AttnLayer<T>&, S&) {}
  template <class T, class S>
  static void dense_bias(const AttnLayer<T>&, const S&, int, int, MatR<T>&) {}
  template <class T, class S>
  static void begin_backward(AttnLayer<T>&, S&) {}
  template <class T, class S>
  static void finish_backward(AttnLayer<T>&, S&) {}

  template <class T>
  static void forward(AttnLayer<T>& L) {
    auto& s = unit_state<Unit>(L);
    Unit::prepare(L, s);
    if (L.dense)
      dense_forward(L, s);
    else
      tiled_forward(L, s);
  }
  template <class T>
  static void backward(AttnLayer<T>& L) {
    auto& s = unit_state<Unit>(L);
    Unit::begin_backward(L, s);
    if (L.dense)
      dense_backward(L, s);
    else
      tiled_backward(L, s);
    Unit::finish_backward(L, s);
  }
  /// Head h of sequence b's probabilities (summed over branches) into dst (T x T): copied from the
  /// dense path's a.P[l], or recomputed tile by tile from Q, K and the saved row statistics.
  template <class T>
  static void probs(AttnLayer<T>& L, int b, int h, float* dst) {
    const Activations<T>& a = L.a;
    const std::size_t TT = static_cast<std::size_t>(L.Tn) * L.Tn, nb = static_cast<std::size_t>(a.nbranch[L.l]);
    const std::size_t bh = static_cast<std::size_t>(b) * L.H + h;
    if (L.dense) {
      const T* Pb = a.P[L.l].data() + bh * nb * TT;
      for (std::size_t i = 0; i < TT; ++i) {
        T sum = 0;
        for (std::size_t br = 0; br < nb; ++br) sum += Pb[br * TT + i];
        dst[i] = static_cast<float>(sum);
      }
      return;
    }
    auto& s = unit_state<Unit>(L);
    with_position(L, [&](const auto& pos) {
      tiled_probs_head(L.head(b, h), Unit::scores(L, s, b, h, false, pos), a.plans[L.l],
                       a.lse[L.l].data() + bh * nb * L.Tn, dst);
    });
  }

  /// Dense oracle: per (sequence, head) the unit's T x T logits, the score hook, ALiBi, the unit's
  /// bias, then the masked softmax of every branch (a.P[l], a.lse[l] saved).
  template <class T, class S>
  static void dense_forward(AttnLayer<T>& L, S& s) {
    Activations<T>& a = L.a;
    const int l = L.l, Tn = L.Tn, H = L.H;
    if (a.masks[l].empty())
      for (const auto& br : a.plans[l].branches) a.masks[l].push_back(dense_mask(br, Tn));
    std::vector<const std::uint8_t*> masks;
    for (const auto& mm : a.masks[l]) masks.push_back(mm.data());
    const std::size_t nb = masks.size(), TT = static_cast<std::size_t>(Tn) * Tn;
    a.nbranch[l] = static_cast<int>(nb);
    a.ensure_P(l, static_cast<std::size_t>(L.B) * H * nb * TT);
    a.lse[l].assign(static_cast<std::size_t>(L.B) * H * nb * Tn, T(0));
    const ForwardHooks* hooks = L.hooks;
    const bool serial = hooks && hooks->on_scores;
    const std::vector<double> slopes = L.cfg.pos == PosKind::Alibi ? alibi_slopes(L.cfg) : std::vector<double>{};
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic) if (!serial)
    for (int bh = 0; bh < L.B * H; ++bh)
      omp_errors.run([&] {
        const int b = bh / H, h = bh % H;
        const HeadQKV<T> hq = L.head(b, h);
        // per-thread scratch: T x T temporaries would otherwise be mmap-allocated and page-faulted per head
        thread_local MatR<T> Sm;
        Sm.resize(Tn, Tn);
        Unit::dense_scores(L, s, hq, b, h, Sm);
        if (serial) {
          Eigen::MatrixXf tmp = Sm.template cast<float>();
          hooks->on_scores(l, h, tmp);
          Sm = tmp.template cast<T>();
        }
        if (!slopes.empty()) {
          const double slope = slopes[static_cast<std::size_t>(h)];
          for (int i = 0; i < Tn; ++i)
            for (int j = 0; j <= i; ++j) Sm(i, j) -= T(slope * (i - j));
        }
        Unit::dense_bias(L, s, b, h, Sm);
        SMap<T> Y(a.atty[l].data() + L.out(b, h), Tn, L.dh, Eigen::OuterStride<>(L.HD()));
        dense_softmax_forward<T>(Tn, Sm, masks, hq.V(), Y, a.P[l].data() + static_cast<std::size_t>(bh) * nb * TT,
                                 a.lse[l].data() + static_cast<std::size_t>(bh) * nb * Tn);
      });
    omp_errors.rethrow();
  }
  template <class T, class S>
  static void dense_backward(AttnLayer<T>& L, S& s) {
    Activations<T>& a = L.a;
    const int l = L.l, Tn = L.Tn, H = L.H;
    const std::size_t nb = static_cast<std::size_t>(a.nbranch[l]), TT = static_cast<std::size_t>(Tn) * Tn;
    for_each_kv_group(L.B, H, L.ql.KV, [&](int b, int h) {
      const HeadQKV<T> hq = L.head(b, h);
      const HeadQKVGrads<T> g = L.grads(b, h);
      thread_local MatR<T> dP, dS;
      SMap<T> dV = g.dV(hq);
      dense_softmax_backward<T>(Tn, nb, a.P[l].data() + (static_cast<std::size_t>(b) * H + h) * nb * TT, hq.V(),
                                CSMap<T>(a.datty.data() + L.out(b, h), Tn, L.dh, Eigen::OuterStride<>(L.HD())), dV, dP,
                                dS);
      Unit::dense_scores_backward(L, s, hq, g, b, h, dS);
    });
  }

  /// Tiled path: online softmax over the admitted tiles, parallel over (sequence, head, query tile);
  /// a.lse[l] [B, H, nb, T] and, with several branches, a.obr[l] saved.
  template <class T, class S>
  static void tiled_forward(AttnLayer<T>& L, S& s) {
    Activations<T>& a = L.a;
    const int l = L.l, Tn = L.Tn, H = L.H, dh = L.dh;
    const TilePlan& plan = a.plans[l];
    const std::size_t nb = plan.branches.size();
    a.nbranch[l] = static_cast<int>(nb);
    a.lse[l].resize(static_cast<std::size_t>(L.B) * H * nb * Tn);
    a.obr[l].resize(nb > 1 ? static_cast<std::size_t>(L.B) * H * (nb - 1) * Tn * dh : 0);
    const std::int64_t nt = plan.n_tiles, tasks = static_cast<std::int64_t>(L.B) * H * nt;
    with_position(L, [&](const auto& pos) {
      using Policy = decltype(Unit::scores(L, s, 0, 0, false, pos));
      // every head's keys transposed once for the packing-free products of all its query tiles
      const bool keys_t = Policy::kTransposedKeys && tile_gemm_enabled() && tile_gemm_ok<T>(dh);
      a.keys_t.resize(keys_t ? static_cast<std::size_t>(L.B) * H : 0);
      {
        cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(static)
        for (int bh = 0; bh < static_cast<int>(a.keys_t.size()); ++bh)
          omp_errors.run([&] {
            const HeadQKV<T> hq = L.head(bh / H, bh % H);
            a.keys_t[static_cast<std::size_t>(bh)].build(hq.k, hq.ld, dh, {{0, Tn}});
          });
        omp_errors.rethrow();
      }
      cf::OmpExceptions omp_errors;
#pragma omp parallel for schedule(dynamic)
      for (std::int64_t task = 0; task < tasks; ++task)
        omp_errors.run([&] {
          const int bh = static_cast<int>(task / nt), qt = static_cast<int>(task % nt), b = bh / H, h = bh % H;
          HeadQKV<T> hq = L.head(b, h);
          if (keys_t) hq.kt = &a.keys_t[static_cast<std::size_t>(bh)];
          tiled_forward_qtile(hq, Unit::scores(L, s, b, h, false, pos), plan, qt, a.atty[l].data() + L.out(b, h),
                              L.HD(),
                              nb > 1 ? a.obr[l].data() + static_cast<std::size_t>(bh) * (nb - 1) * Tn * dh : nullptr,
                              a.lse[l].data() + static_cast<std::size_t>(bh) * nb * Tn);
        });
      omp_errors.rethrow();
    });
  }
  /// Backward of tiled_forward, parallel over (sequence, key/value head): d atty -> d qkv (+=) and the
  /// unit's own per-(b, h) gradients where its policy points (finish_backward reduces them).
  template <class T, class S>
  static void tiled_backward(AttnLayer<T>& L, S& s) {
    Activations<T>& a = L.a;
    const int l = L.l, Tn = L.Tn, H = L.H, dh = L.dh;
    const TilePlan& plan = a.plans[l];
    const std::size_t nb = plan.branches.size();
    with_position(L, [&](const auto& pos) {
      for_each_kv_group(L.B, H, L.ql.KV, [&](int b, int h) {
        const std::size_t bh = static_cast<std::size_t>(b) * H + h;
        const std::int64_t yo = L.out(b, h);
        tiled_backward_head(L.head(b, h), Unit::scores(L, s, b, h, true, pos), plan, a.datty.data() + yo, L.HD(),
                            a.atty[l].data() + yo, nb > 1 ? a.obr[l].data() + bh * (nb - 1) * Tn * dh : nullptr,
                            a.lse[l].data() + bh * nb * Tn, L.grads(b, h));
      });
    });
  }
};

template <class Unit, class T>
void unit_forward(AttnLayer<T>& L) {
  Unit::forward(L);
}
template <class Unit, class T>
void unit_backward(AttnLayer<T>& L) {
  Unit::backward(L);
}
template <class Unit, class T>
void unit_probs(AttnLayer<T>& L, int b, int h, float* dst) {
  Unit::probs(L, b, h, dst);
}
template <class Unit, class T>
VariantKernels<T> unit_kernels() {
  VariantKernels<T> k;
  k.forward = &unit_forward<Unit, T>;
  k.backward = &unit_backward<Unit, T>;
  k.probs = &unit_probs<Unit, T>;
  return k;
}

/// The table entry of a unit (cf/nn/attention_variant.hpp): its parameter block, GPU hook and its
/// paths compiled for float and double. `name` / `aliases`: for register_attention_variant.
template <class Unit>
VariantEntry make_variant_entry(std::string name = {}, std::vector<std::string> aliases = {}) {
  static_assert(!Unit::gpu.trainer || Unit::gpu.form != GpuForm::None,
                "a unit whose GPU hook says the device trainer runs it must name its kernel form");
  VariantEntry e;
  e.name = std::move(name);
  e.aliases = std::move(aliases);
  e.params = &Unit::params;
  e.gpu = Unit::gpu;
  e.f32 = unit_kernels<Unit, float>();
  e.f64 = unit_kernels<Unit, double>();
  return e;
}

}  // namespace cf::nn::detail
