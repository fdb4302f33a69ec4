// Issue 28, acceptance 3: an attention variant is one unit. This file defines a toy variant that
// exists only here, a scaled dot product with a fixed scale c = 1/4 and a learned gain per head
// (logits = c g_h Q K^T), and compiles it in through the documented extension point
// (cf::nn::register_attention_variant, docs/trainer.md "Attention variants as units"): no file of
// lib/nn knows it. It gets a name in the schedule parser, its parameter block in the layout, a
// dense oracle and a tiled score policy, and then trains: the tests check the name and the layout,
// the forward against the built-in full attention (an independent computation), tiled = dense,
// the backward against finite differences in double on both paths, and a few training steps.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/nn/attention_variant.hpp"
#include "cf/nn/detail/variants/unit.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/optim.hpp"

using namespace cf::nn;

namespace {

using detail::AttnLayer;
using detail::HeadQKV;
using detail::HeadQKVGrads;

constexpr double kToyScale = 0.25;

// d loss / d gain of a tile or a whole head: c sum_ij dS_ij (Q K^T)_ij (a plain loop: fixed order).
template <class T, class A, class B>
T gain_gradient(const A& dS, const B& qk) {
  T s = 0;
  for (Eigen::Index i = 0; i < dS.rows(); ++i)
    for (Eigen::Index j = 0; j < dS.cols(); ++j) s += dS(i, j) * qk(i, j);
  return T(kToyScale) * s;
}

// The tiled score policy: logits c g Q_I K_J^T of a tile; the raw product stays in Scratch for the
// backward's gain gradient.
template <class T>
struct ToyScores {
  struct Scratch {
    MatR<T> qk;
  };
  static constexpr bool kTransposedKeys = false;
  T gain = 1;
  T* dgain = nullptr;

  void logits(const HeadQKV<T>& h, int i0, int ni, int j0, int nj, detail::TileMat<T>& S, Scratch& s) const {
    s.qk.noalias() = h.Q().middleRows(i0, ni) * h.K().middleRows(j0, nj).transpose();
    S.resize(ni, nj);
    S = (T(kToyScale) * gain) * s.qk;
  }
  void backward(const HeadQKV<T>& h, const HeadQKVGrads<T>& g, int i0, int ni, int j0, int nj, detail::TileMat<T>& dS,
                const Scratch& s) const {
    const T a = T(kToyScale) * gain;
    g.dQ(h).middleRows(i0, ni).noalias() += a * dS * h.K().middleRows(j0, nj);
    g.dK(h).middleRows(j0, nj).noalias() += a * dS.transpose() * h.Q().middleRows(i0, ni);
    *dgain += gain_gradient<T>(dS, s.qk);
  }
};

// The unit: parameter block (h.{l}.attn.toy_gain [H]), saved state (per (sequence, head) gain
// gradients, reduced in a fixed order), dense oracle, tiled policy, GPU hook (none).
struct ToyUnit : detail::SoftmaxUnit<ToyUnit> {
  static constexpr GpuHook gpu{false, false};
  static std::vector<VariantParam> params(const ModelConfig& c, int) { return {{"attn.toy_gain", {c.n_head}}}; }
  template <class T>
  struct State {
    std::vector<T> dgain;  ///< [B, H]
    std::size_t bytes() const { return dgain.size() * sizeof(T); }
  };
  template <class T>
  static T gain(const AttnLayer<T>& L, int h) {
    return L.W[L.off().variant[0] + h];
  }
  template <class T>
  static void dense_scores(const AttnLayer<T>& L, const State<T>&, const HeadQKV<T>& hq, int, int h, MatR<T>& S) {
    S.noalias() = hq.Q() * hq.K().transpose();
    S *= T(kToyScale) * gain(L, h);
  }
  template <class T>
  static void dense_scores_backward(const AttnLayer<T>& L, State<T>& s, const HeadQKV<T>& hq, const HeadQKVGrads<T>& g,
                                    int b, int h, const MatR<T>& dS) {
    const T a = T(kToyScale) * gain(L, h);
    g.dQ(hq).noalias() += a * dS * hq.K();
    g.dK(hq).noalias() += a * dS.transpose() * hq.Q();
    const MatR<T> qk = hq.Q() * hq.K().transpose();
    s.dgain[static_cast<std::size_t>(b) * L.H + h] = gain_gradient<T>(dS, qk);
  }
  template <class T, class Pos>
  static auto scores(const AttnLayer<T>& L, State<T>& s, int b, int h, bool grads, const Pos& pos) {
    ToyScores<T> t;
    t.gain = gain(L, h);
    if (grads) t.dgain = &s.dgain[static_cast<std::size_t>(b) * L.H + h];
    return pos(t, h);
  }
  template <class T>
  static void begin_backward(AttnLayer<T>& L, State<T>& s) {
    s.dgain.assign(static_cast<std::size_t>(L.B) * L.H, T(0));
  }
  template <class T>
  static void finish_backward(AttnLayer<T>& L, State<T>& s) {
    for (int bh = 0; bh < L.B * L.H; ++bh) L.G[L.off().variant[0] + bh % L.H] += s.dgain[static_cast<std::size_t>(bh)];
  }
};

// Registered once per test process (the extension point refuses a taken name).
AttnKind toy_kind() {
  static const AttnKind k = register_attention_variant(detail::make_variant_entry<ToyUnit>("toy-dot", {"toy"}));
  return k;
}

ModelConfig toy_config(const std::string& schedule, PosKind pos) {
  toy_kind();
  ModelConfig c;
  c.vocab_size = 23;
  c.block_size = 96;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.pos = pos;
  LayerConfig proto;
  proto.w = 24;
  c.layers = parse_schedule(schedule, c.n_layer, proto);
  return c;
}

struct Batch {
  std::vector<std::int32_t> tok, tgt;
};
Batch batch(int B, int Tn, int V, unsigned seed) {
  std::mt19937 rng(seed);
  Batch b;
  b.tok.resize(static_cast<std::size_t>(B) * Tn);
  b.tgt.resize(b.tok.size());
  for (auto& t : b.tok) t = static_cast<std::int32_t>(rng() % V);
  for (auto& t : b.tgt) t = static_cast<std::int32_t>(rng() % V);
  return b;
}

template <class T>
T loss_of(const Model<T>& m, const Batch& bt, int B, int Tn, AttentionPath path, std::vector<T>* grad = nullptr) {
  Workspace<T> ws;
  ws.set_attention_path(path);
  return forward_backward<T>(m, bt.tok.data(), bt.tgt.data(), B, Tn, grad, ws);
}

}  // namespace

TEST_CASE("Toy variant unit: the extension point names it, the parser reads it, the layout holds its block",
          "[nn][variant]") {
  const AttnKind k = toy_kind();
  CHECK(is_registered_variant(k));
  CHECK(parse_attn_kind("toy-dot") == k);
  CHECK(parse_attn_kind(" TOY ") == k);
  CHECK(attn_name(k) == "toy-dot");
  CHECK_THROWS_AS(register_attention_variant(detail::make_variant_entry<ToyUnit>("swa")), cf::InvalidArgument);
  const ModelConfig c = toy_config("toy-dot,swa", PosKind::Learned);
  CHECK(c.layers[0].attn == k);
  const ParamLayout lay = make_layout(c);
  const ParamInfo& g = lay.find("h.0.attn.toy_gain");
  CHECK(g.shape == std::vector<std::int64_t>{2});
  CHECK(lay.layer[0].variant == std::vector<std::int64_t>{g.offset});
  CHECK(lay.layer[1].variant.empty());
  // the toy adds exactly n_head parameters to the same model with full attention in its place
  CHECK(param_count(c) == lay.total);
  CHECK(param_count(c) == param_count(toy_config("full,swa", PosKind::Learned)) + 2);
  // configs (and so checkpoints) carry it by name
  CHECK(config_from_json(to_json(c)).layers[0].attn == k);
}

TEST_CASE("Toy variant unit: with gain 1 / (c sqrt(d_head)) it is full attention (loss and gradients)",
          "[nn][variant]") {
  for (PosKind pos : {PosKind::Learned, PosKind::Alibi}) {
    const ModelConfig ct = toy_config("toy-dot,toy-dot", pos), cfull = toy_config("full,full", pos);
    Model<double> full = init_model<double>(cfull, 3);
    std::mt19937_64 rng(4);
    std::uniform_real_distribution<double> u(-0.2, 0.2);
    for (auto& x : full.params) x += u(rng);
    // the toy model: the full model's tensors by name, gains set so that c g = 1/sqrt(d_head)
    Model<double> toy = init_model<double>(ct, 3);
    for (const ParamInfo& t : toy.layout.tensors) {
      if (t.name.find("toy_gain") != std::string::npos) {
        for (std::int64_t i = 0; i < t.size; ++i) toy.params[t.offset + i] = 1.0 / (kToyScale * std::sqrt(8.0));
        continue;
      }
      const ParamInfo& f = full.layout.find(t.name);
      std::copy(full.params.begin() + f.offset, full.params.begin() + f.offset + f.size, toy.params.begin() + t.offset);
    }
    const Batch bt = batch(2, 70, ct.vocab_size, 5);
    for (AttentionPath path : {AttentionPath::Dense, AttentionPath::Tiled}) {
      std::vector<double> gt(toy.params.size(), 0.0), gf(full.params.size(), 0.0);
      const double lt = loss_of(toy, bt, 2, 70, path, &gt), lf = loss_of(full, bt, 2, 70, path, &gf);
      CHECK(lt == Approx(lf).epsilon(1e-12));
      for (const ParamInfo& f : full.layout.tensors) {
        const ParamInfo& t = toy.layout.find(f.name);
        for (std::int64_t i = 0; i < f.size; ++i) REQUIRE(gt[t.offset + i] == Approx(gf[f.offset + i]).margin(1e-12));
      }
    }
  }
}

TEST_CASE("Toy variant unit: tiled equals dense, and both backward passes match finite differences in double",
          "[nn][variant]") {
  const ModelConfig c = toy_config("toy-dot,swa", PosKind::Alibi);
  Model<double> m = init_model<double>(c, 7);
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(-0.3, 0.3);
  for (auto& x : m.params) x += u(rng);  // gains away from their zero initialisation
  const int B = 2, Tn = 75;              // not a multiple of the 64-row tile
  const Batch bt = batch(B, Tn, c.vocab_size, 9);
  std::vector<double> gd(m.params.size(), 0.0), gt(m.params.size(), 0.0);
  const double ld = loss_of(m, bt, B, Tn, AttentionPath::Dense, &gd);
  const double lt = loss_of(m, bt, B, Tn, AttentionPath::Tiled, &gt);
  CHECK(lt == Approx(ld).epsilon(1e-12));
  for (std::size_t i = 0; i < gd.size(); ++i) REQUIRE(gt[i] == Approx(gd[i]).margin(1e-11));
  // central differences on the gains and on every 97th parameter (layer 0's c_attn among them)
  std::vector<std::int64_t> idx;
  const ParamInfo& gain = m.layout.find("h.0.attn.toy_gain");
  for (std::int64_t i = 0; i < gain.size; ++i) idx.push_back(gain.offset + i);
  for (std::int64_t i = 0; i < m.layout.total; i += 97) idx.push_back(i);
  const double h = 1e-5;
  for (std::int64_t i : idx) {
    Model<double> p = m, q = m;
    p.params[i] += h;
    q.params[i] -= h;
    const double fd =
        (loss_of(p, bt, B, Tn, AttentionPath::Dense) - loss_of(q, bt, B, Tn, AttentionPath::Dense)) / (2 * h);
    INFO("parameter " << i);
    CHECK(gd[i] == Approx(fd).margin(1e-8).epsilon(1e-6));
    CHECK(gt[i] == Approx(fd).margin(1e-8).epsilon(1e-6));
  }
}

TEST_CASE("Toy variant unit: a float model with it trains (AdamW lowers the loss of a batch)", "[nn][variant]") {
  const ModelConfig c = toy_config("toy-dot,full", PosKind::Learned);
  Model<float> m = init_model<float>(c, 11);
  const Batch bt = batch(4, 64, c.vocab_size, 12);
  AdamWState st;
  const ParamInfo& gain = m.layout.find("h.0.attn.toy_gain");
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    std::vector<float> grad(m.params.size(), 0.f);
    const float loss = loss_of(m, bt, 4, 64, AttentionPath::Tiled, &grad);
    if (step == 0) {
      first = loss;
      CHECK(grad[gain.offset] != 0.f);  // the gain learns from its zero initialisation
    }
    last = loss;
    adamw_step(m.params, grad, st, m.layout, 3e-3, AdamWConfig{});
  }
  CHECK(std::isfinite(last));
  CHECK(last < first - 0.1f);
}
