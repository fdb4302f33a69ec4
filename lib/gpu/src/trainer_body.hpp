#pragma once
// The body of the device trainer (cf/gpu/trainer.hpp), one template for both back ends like
// ops_body.hpp: instantiated by g++ in trainer_emu.cpp (buffers in host memory, kernels
// emulated, Thrust on OpenMP, OpenBLAS) and by nvcc in trainer_cuda.cu (device memory, CUDA
// kernels, cuBLAS). The instantiating file first specialises TrainerTraits<Bk> (the contract,
// static_asserted by Impl below):
//   kBackend                                  which back end (for the counters of device_stats.hpp),
//   policy()                                  a Thrust execution policy on the context's stream that
//                                             does not wait for the device after each call,
//   policy(alloc)                             the same with Thrust's temporary storage from `alloc`,
//   device_alloc(bytes) / device_free(p)      device memory,
//   pinned_alloc(bytes) / pinned_free(p)      host memory the device copies from asynchronously,
//   to_device / to_host (dst, src, bytes)     blocking copies from / to host memory,
//   to_device_async(dst, src, bytes)          a copy from pinned memory, ordered on the stream,
//   wait()                                    the host waits for the stream,
//   fill_zero(p, bytes)                       memset 0 on the device, ordered on the stream,
//   Blas                                      made from the Context: row-major SGEMM with transposes.
// Plumbing (issue 31): every buffer a step uses is allocated with the plan (Thrust's temporary
// storage grows once, TempArena), masks are resident per layer, batches go up through pinned
// staging (Staging), and the host waits only for the scalars it returns (loss, norm, finiteness).
// The body counts each allocation and host wait where it calls the primitive (count_allocation,
// count_host_sync), so the emulated build's counts are the CUDA build's (tests/gpu).
// The data flow is cf::nn::forward_backward's (lib/nn/src/model.cpp) restricted to the features
// of make_train_plan: embed (+ norm), blocks (norm, qkv, RoPE, the attention unit, c_proj, residual;
// norm, c_fc, GELU / erf GELU / SwiGLU, c_proj, residual, sequential or parallel), final norm, LM
// head, cross-entropy, and back. Norms are LayerNorm or RMSNorm at the config's eps; a residual add
// and the norm that reads its sum are one kernel (residual_forward), and so are, backward, the
// norm's input gradient and the residual stream's gradient it joins (norm_backward). The LM head runs on a
// vocabulary padded to a multiple of 64 (PaddedVocab) and ends in the fused classifier (forward):
// a training step's forward leaves d loss / d logits in the logits, where the backward starts.
#include <thrust/count.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/inner_product.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/gpu/device_stats.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/gpu/trainer.hpp"
#include "precision_body.hpp"
#include "top_seed.hpp"
#include "trainer_common.hpp"
#include "trainer_norm_grad.hpp"

namespace cf::gpu {

/// A back end's primitives for the trainer body (specialised by trainer_emu.cpp / trainer_cuda.cu).
template <Backend Bk>
struct TrainerTraits;

namespace trainer_body {

/// The compile-checked contract of TrainerTraits<Bk> (what the body below uses).
template <class Tr, class = void>
struct IsTrainerTraits : std::false_type {};
template <class Tr>
struct IsTrainerTraits<
    Tr, std::void_t<decltype(Tr::kBackend), decltype(Tr::policy()), decltype(Tr::device_alloc(std::size_t(1))),
                    decltype(Tr::device_free(nullptr)), decltype(Tr::pinned_alloc(std::size_t(1))),
                    decltype(Tr::pinned_free(nullptr)), decltype(Tr::to_device(nullptr, nullptr, std::size_t(1))),
                    decltype(Tr::to_device_async(nullptr, nullptr, std::size_t(1))),
                    decltype(Tr::to_host(nullptr, nullptr, std::size_t(1))), decltype(Tr::wait()),
                    decltype(Tr::fill_zero(nullptr, std::size_t(1))),
                    decltype(std::declval<const typename Tr::Blas&>().gemm(false, false, 0, 0, 0, 1.0f, nullptr, 0,
                                                                           nullptr, 0, 0.0f, nullptr, 0))>>
    : std::is_constructible<typename Tr::Blas, Context&> {};

/// A device array of n elements of T (zero-filled), freed with the owner.
template <class Tr, class T>
class DBuf {
 public:
  DBuf() = default;
  explicit DBuf(std::size_t n) { reset(n); }
  ~DBuf() { Tr::device_free(p_); }
  DBuf(DBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DBuf& operator=(DBuf&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DBuf(const DBuf&) = delete;
  DBuf& operator=(const DBuf&) = delete;
  void reset(std::size_t n) {
    Tr::device_free(p_);
    p_ = nullptr;
    n_ = n;
    if (n) {
      p_ = static_cast<T*>(Tr::device_alloc(n * sizeof(T)));
      count_allocation(Tr::kBackend, n * sizeof(T));
      Tr::fill_zero(p_, n * sizeof(T));
    }
  }
  void zero() {
    if (n_) Tr::fill_zero(p_, n_ * sizeof(T));
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

inline thrust::counting_iterator<long long> index0() { return thrust::counting_iterator<long long>(0); }

/// Thrust's temporary storage for the calls that return a value (reductions, counts), as a Thrust
/// allocator: bump allocation from one block that grows when a call needs more and is kept, so
/// steps after the first allocate nothing. A call that does not fit gets an extra block; when no
/// storage is in use the blocks are merged into one of their total size.
template <class Tr>
class TempArena {
 public:
  using value_type = char;
  TempArena() = default;
  TempArena(const TempArena&) = delete;
  TempArena& operator=(const TempArena&) = delete;
  ~TempArena() {
    for (const Block& b : blocks_) Tr::device_free(b.p);
  }
  char* allocate(std::ptrdiff_t n) {
    const std::size_t bytes = (static_cast<std::size_t>(n) + 255) / 256 * 256;
    if (blocks_.empty() || top_ + bytes > blocks_.back().size) add(bytes), top_ = 0;
    char* p = blocks_.back().p + top_;
    top_ += bytes, ++live_;
    return p;
  }
  void deallocate(char*, std::size_t) {
    if (--live_ > 0) return;
    top_ = 0;
    if (blocks_.size() < 2) return;
    std::size_t total = 0;
    for (const Block& b : blocks_) total += b.size, Tr::device_free(b.p);
    blocks_.clear();
    add(total);
  }

 private:
  struct Block {
    char* p;
    std::size_t size;
  };
  void add(std::size_t bytes) {
    blocks_.push_back(Block{static_cast<char*>(Tr::device_alloc(bytes)), bytes});
    count_allocation(Tr::kBackend, bytes);
  }
  std::vector<Block> blocks_;
  std::size_t top_ = 0;
  int live_ = 0;
};

/// Host memory integers are staged in for copies to the device that the host does not wait for
/// (pinned on the CUDA build); it is rewritten only once the copies from it have run.
template <class Tr>
class Staging {
 public:
  explicit Staging(std::size_t n) {
    p_ = static_cast<std::int32_t*>(Tr::pinned_alloc(n * sizeof(std::int32_t)));
    count_allocation(Tr::kBackend, n * sizeof(std::int32_t));
  }
  ~Staging() { Tr::pinned_free(p_); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  /// The buffer to write the next copies' sources in: waits for the stream first if a copy from
  /// it may still be running (a counted host wait).
  std::int32_t* write() {
    if (pending_) count_host_sync(Tr::kBackend), Tr::wait(), done();
    return p_;
  }
  /// n ints from offset `at` to dst, ordered on the stream.
  void upload(std::int32_t* dst, std::size_t at, std::size_t n) {
    Tr::to_device_async(dst, p_ + at, n * sizeof(std::int32_t));
    pending_ = true;
  }
  /// The host has waited for the stream: every copy from here has run.
  void done() { pending_ = false; }

 private:
  std::int32_t* p_ = nullptr;
  bool pending_ = false;
};

/// The LM head padded from V to Vp = V rounded up to a multiple of 64 rows (llm.c's Vp): the
/// device's parameter array is the host's (cf::nn::make_layout, the checkpoint's) with (Vp - V) C
/// zeros inserted right after the head's last row, so the head's GEMMs see a [Vp, C] weight and
/// write logits rows of Vp columns. Every offset past the head moves by the padding: a tied head
/// is wte, the first tensor (every later tensor moves); an untied one is the last tensor (the
/// padding is the array's tail). The padding never crosses to or from the host (upload, download,
/// gradient copy the host's pieces around it); it stays zero because the padded logits' gradient
/// is zero (the classifier writes it), so the padded rows' weight gradient is zero and so is
/// AdamW's update of them (zero gradient, moments and weight: zero step, zero decay).
struct PaddedVocab {
  static constexpr int kMultiple = 64;
  int Vp = 0;
  std::int64_t end = 0;  ///< the host offset one past the head's rows
  std::int64_t pad = 0;  ///< (Vp - V) C floats after them on the device

  explicit PaddedVocab(const TrainPlan& h)
      : Vp((h.V + kMultiple - 1) / kMultiple * kMultiple),
        end(h.head + static_cast<std::int64_t>(h.V) * h.C),
        pad(static_cast<std::int64_t>(Vp - h.V) * h.C) {}
  /// The device offset of host offset `off` (-1, an absent tensor, stays -1).
  std::int64_t at(std::int64_t off) const { return off >= end ? off + pad : off; }
  /// The plan with the device's offsets, runs and total (V stays the model's).
  TrainPlan device_plan(TrainPlan q) const {
    for (std::int64_t* o : {&q.wte, &q.wpe, &q.lnf_w, &q.lnf_b, &q.head, &q.emb_ln_w, &q.emb_ln_b}) *o = at(*o);
    for (TrainLayer& l : q.layers)
      for (std::int64_t* o : {&l.ln1_w, &l.ln1_b, &l.attn_w, &l.attn_b, &l.proj_w, &l.proj_b, &l.ln2_w, &l.ln2_b,
                              &l.fc_w, &l.fc_b, &l.fcproj_w, &l.fcproj_b, &l.damp_w, &l.damp_b, &l.runway_B})
        *o = at(*o);
    // a run across the head's end covers the padding too (AdamW leaves its zeros zero)
    for (ParamRun& r : q.runs) {
      const std::int64_t first = at(r.offset);
      r.size = r.size > 0 ? at(r.offset + r.size - 1) + 1 - first : 0;
      r.offset = first;
    }
    q.total += pad;
    return q;
  }
  /// copy(device offset, host offset, floats) for the host array's pieces [0, end), [end, total)
  /// (one piece when nothing follows the padding or there is none).
  template <class Copy>
  void pieces(std::int64_t total, Copy&& copy) const {
    if (pad == 0 || total <= end) return copy(0, 0, total);
    copy(0, 0, end);
    copy(end + pad, end, total - end);
  }
};

}  // namespace trainer_body

template <Backend Bk>
struct DeviceTrainer<Bk>::Impl {
  using Tr = TrainerTraits<Bk>;
  using O = Ops<Bk>;
  template <class T>
  using DBuf = trainer_body::DBuf<Tr, T>;
  static_assert(trainer_body::IsTrainerTraits<Tr>::value, "TrainerTraits<Bk> breaks the contract (trainer_body.hpp)");

  using Out = kernels::ClassifierOut;

  Context& ctx;
  trainer_body::PaddedVocab vocab;
  TrainPlan given;  ///< the plan as given (plan()): the host's offsets
  TrainPlan p;      ///< the plan on the device: offsets into the padded parameter array (PaddedVocab)
  typename Tr::Blas blas;
  TrainerUse use;
  /// Whether the backward computes parameter gradients (training); an analysis trainer's seeded
  /// passes read only the input-gradient chain, so its backward skips every weight-gradient GEMM,
  /// bias sum and norm weight gradient (linear_backward, norm_backward, runway_backward consult it).
  bool param_grads;
  TrainPlan cap;                               ///< the plan the buffers were allocated for (fits, reshape)
  precision_body::PrecisionGemm<Tr, DBuf> lp;  // the GEMMs in p.precision (precision_body.hpp)
  DBuf<float> W, G, M, V;
  struct Layer {
    DBuf<float> ln1, ln1_mean, ln1_rstd, qkv, atty, lse, obr, ln2, ln2_mean, ln2_rstd, fch, fcg, slopes;
  };
  std::vector<Layer> L;
  /// Saved state of a layer's attention unit (S-D: the damping's pre-activation z [B T, H] and
  /// damping [B, H, T]; linear: the row denominators [B, H, T]).
  struct UnitSaved {
    DBuf<float> z, damp, den;
  };
  std::vector<UnitSaved> X;
  DBuf<float> ddamp, dz, dvs, dvl, dBs;  // backward scratch of the units' extras
  std::vector<DBuf<float>> resid, resid_mid;
  DBuf<float> emb, emb_mean, emb_rstd, dpar;
  DBuf<float> lnf, lnf_mean, lnf_rstd, logits, losses, ones;
  DBuf<float> dbias;      // a bias gradient from the weight GEMM's epilogue, before it joins G (float32 policy)
  DBuf<float> norm_part;  // the fused norm backwards' weight-gradient sums per block of rows (norm_backward)
  DBuf<float> q, k, v, y, dq, dk, dv, dy, dsum, tmp, dres, dn, datty, dqkv, dfc, dfch;
  DBuf<std::int32_t> tokens, targets, uniq, ptr, pos;
  DBuf<detail::TopPrediction> picks;           // a top-prediction seed's picks, one per sequence
  std::vector<detail::TopPrediction> h_picks;  // and on the host
  std::vector<std::int32_t> h_tokens, h_order, h_uniq, h_ptr;
  std::int64_t h_count = 0;                              // counted targets of the uploaded batch
  std::vector<std::unique_ptr<ResidentMask<Bk>>> masks;  // each layer's mask where the kernels read it
  DBuf<float> rw_u, rw_g;                                // the runway kernels' scratch (AttentionScratch)
  trainer_body::TempArena<Tr> arena;
  trainer_body::Staging<Tr> batch_in;  // tokens | targets [2 N]
  trainer_body::Staging<Tr> index_in;  // the embedding gradient's uniq | ptr | pos [3 N + 1]

  Impl(Context& c, TrainPlan plan, TrainerUse u)
      : ctx(c),
        vocab(plan),
        given(std::move(plan)),
        p(vocab.device_plan(given)),
        blas(c),
        use(u),
        param_grads(u == TrainerUse::Training),
        cap(given),
        lp(p.precision, p.total, gemm_span(true), gemm_span(false)),
        batch_in(2 * static_cast<std::size_t>(p.N)),
        index_in(3 * static_cast<std::size_t>(p.N) + 1) {
    const std::size_t N = static_cast<std::size_t>(p.N), C = static_cast<std::size_t>(p.C),
                      F = static_cast<std::size_t>(p.F), P = static_cast<std::size_t>(p.total);
    W.reset(P);
    if (param_grads) G.reset(P);
    if (use == TrainerUse::Training) M.reset(P), V.reset(P);
    std::size_t maxhd = 0, maxst = 0;
    for (const TrainLayer& tl : p.layers) {
      const std::size_t HD = static_cast<std::size_t>(p.H) * tl.dh, nb = static_cast<std::size_t>(tl.mask.nb);
      Layer a;
      if (p.normed()) {
        a.ln1.reset(N * C), a.ln1_mean.reset(N), a.ln1_rstd.reset(N);
        a.ln2.reset(N * C), a.ln2_mean.reset(N), a.ln2_rstd.reset(N);
      }
      a.atty.reset(N * HD);
      a.lse.reset(N * p.H * nb), a.obr.reset(N * HD * nb);
      a.fch.reset(N * static_cast<std::size_t>(p.fc_width())), a.fcg.reset(N * F);
      if (!tl.slopes.empty()) {
        a.slopes.reset(tl.slopes.size());
        to_device(a.slopes.get(), tl.slopes.data(), tl.slopes.size() * sizeof(float));
      }
      masks.push_back(std::make_unique<ResidentMask<Bk>>(tl.mask));
      L.push_back(std::move(a));
      maxhd = std::max(maxhd, HD);
      maxst = std::max(maxst, N * p.H * nb);
    }
    for (std::size_t l = 0; l <= p.layers.size(); ++l) resid.emplace_back(N * C);
    for (std::size_t l = 0; l < p.layers.size(); ++l) resid_mid.emplace_back(N * C);
    if (p.normed()) lnf.reset(N * C), lnf_mean.reset(N), lnf_rstd.reset(N);
    if (p.emb_ln_w >= 0) emb.reset(N * C), emb_mean.reset(N), emb_rstd.reset(N);
    if (p.parallel_residual) dpar.reset(N * C);
    logits.reset(N * static_cast<std::size_t>(vocab.Vp)), losses.reset(N), ones.reset(N);
    thrust::fill(Tr::policy(), ones.get(), ones.get() + N, 1.0f);
    if (param_grads && p.precision == Precision::Fp32) dbias.reset(gemm_span(true) / N);  // the widest output row
    if (param_grads && p.normed()) norm_part.reset(static_cast<std::size_t>(norm_partial_rows(p.N)) * 2 * C);
    for (DBuf<float>* b : {&q, &k, &v, &y, &dq, &dk, &dv, &dy, &datty}) b->reset(N * maxhd);
    dsum.reset(maxst);
    tmp.reset(N * C), dres.reset(N * C), dn.reset(N * C);
    if (p.mlp != TrainMlp::GeluTanh) dfc.reset(N * F);  // tanh GELU: the DGELU epilogue writes d fch directly
    dfch.reset(N * static_cast<std::size_t>(p.fc_width()));
    tokens.reset(N), targets.reset(N), uniq.reset(N), ptr.reset(N + 1), pos.reset(N);
    picks.reset(static_cast<std::size_t>(p.B));
    alloc_units();
  }

  /// The attention units' saved state and backward scratch (qkv rows of width qkv_ld).
  void alloc_units() {
    const std::size_t N = static_cast<std::size_t>(p.N), H = static_cast<std::size_t>(p.H);
    std::size_t maxqkv = 0, rw = 0, bil = 0, rwu = 0, rwg = 0;
    for (std::size_t l = 0; l < p.layers.size(); ++l) {
      const TrainLayer& tl = p.layers[l];
      const std::size_t ld = static_cast<std::size_t>(qkv_ld(tl)), dh = static_cast<std::size_t>(tl.dh);
      L[l].qkv.reset(N * ld);
      maxqkv = std::max(maxqkv, ld);
      UnitSaved u;
      if (tl.form == AttnForm::Sd) u.z.reset(N * H), u.damp.reset(N * H), ddamp.reset(N * H), dz.reset(N * H);
      if (tl.form == AttnForm::Linear) u.den.reset(N * H);
      if (tl.form == AttnForm::RunwayDot || tl.form == AttnForm::RunwayBilinear)
        rw = std::max(rw, N * H * dh), rwu = std::max(rwu, N * dh);
      if (tl.form == AttnForm::RunwayBilinear && param_grads)  // analysis use: no d B, so neither g
        bil = std::max(bil, static_cast<std::size_t>(p.B) * H * dh * dh), rwg = std::max(rwg, N * H * dh);
      X.push_back(std::move(u));
    }
    dqkv.reset(N * maxqkv);
    if (rw) dvs.reset(rw), dvl.reset(rw);
    if (bil) dBs.reset(bil);
    rw_u.reset(rwu), rw_g.reset(rwg);
  }

  /// The most elements a GEMM operand of linear_forward / _backward spans: the first operand
  /// (an input or an output gradient, N x max(IC, OC)) or the second when it is not a weight (an
  /// input, N x IC).
  std::size_t gemm_span(bool first) const {
    int widest = std::max(p.C, p.F);
    for (const TrainLayer& tl : p.layers) widest = std::max(widest, p.H * tl.dh);
    if (first) {
      widest = std::max({widest, p.fc_width(), vocab.Vp, p.H});
      for (const TrainLayer& tl : p.layers) widest = std::max(widest, static_cast<int>(qkv_ld(tl)));
    }
    return static_cast<std::size_t>(p.N) * static_cast<std::size_t>(widest);
  }

  // ---- the host's waits for the device and its copies (issue 31), counted here in both builds

  /// A blocking copy to the device (parameters, plan constants: never per step).
  void to_device(void* dst, const void* src, std::size_t bytes) {
    count_host_sync(Bk);
    Tr::to_device(dst, src, bytes);
  }
  /// A copy to the host: the host waits for the stream.
  void to_host(void* dst, const void* src, std::size_t bytes) {
    count_host_sync(Bk);
    Tr::to_host(dst, src, bytes);
    batch_in.done(), index_in.done();
  }
  /// A Thrust call returning a value to the host, with its temporary storage from the arena.
  template <class F>
  auto read_back(F&& call) {
    count_host_sync(Bk);
    const auto value = call(Tr::policy(arena));
    batch_in.done(), index_in.done();
    return value;
  }
  /// A device array in the host's layout (the head's padding left out).
  void download(float* dst, const float* src) {
    vocab.pieces(given.total, [&](std::int64_t at, std::int64_t to, std::int64_t n) {
      to_host(dst + to, src + at, sizeof(float) * static_cast<std::size_t>(n));
    });
  }
  AttentionScratch scratch() const { return AttentionScratch{rw_u.get(), rw_g.get()}; }

  const float* w(std::int64_t off) const { return off >= 0 ? W.get() + off : nullptr; }
  float* g(std::int64_t off) const { return off >= 0 ? G.get() + off : nullptr; }

  // out [N, OC] = inp [N, IC] W^T (+ b), W [OC, IC] row-major (cf::nn::linear_forward); the bias
  // added by the GEMM's epilogue (cf/gpu/gemm_epilogue.hpp).
  void linear_forward(float* out, const float* inp, std::int64_t wo, std::int64_t bo, int N, int IC, int OC) {
    const GemmEpilogueArgs e{bo >= 0 ? GemmEpilogue::Bias : GemmEpilogue::None, w(bo)};
    lp.gemm(blas, false, true, N, OC, IC, 1.0f, inp, IC, w(wo), IC, wo, 0.0f, out, OC, e);
  }
  // out = gelu_tanh(inp W^T + b), the pre-activation kept in pre for the backward: one GEMM with
  // cuBLASLt's GELU_AUX_BIAS epilogue (the tanh form only: erf GELU models run linear_forward).
  void linear_gelu_forward(float* out, float* pre, const float* inp, std::int64_t wo, std::int64_t bo, int N, int IC,
                           int OC) {
    const GemmEpilogueArgs e{GemmEpilogue::GeluAuxBias, w(bo), pre};
    lp.gemm(blas, false, true, N, OC, IC, 1.0f, inp, IC, w(wo), IC, wo, 0.0f, out, OC, e);
  }
  // dinp [N, IC] += dout W; dW += dout^T inp; db += column sums of dout (cf::nn::linear_backward).
  void linear_backward(float* dinp, std::int64_t wo, std::int64_t bo, const float* dout, const float* inp, int N,
                       int IC, int OC) {
    lp.gemm(blas, false, false, N, IC, OC, 1.0f, dout, OC, w(wo), IC, wo, 1.0f, dinp, IC);
    linear_param_backward(wo, bo, dout, inp, N, IC, OC);
  }
  // dW += dout^T inp; db += column sums of dout. In float32 the bias sum is the weight GEMM's
  // epilogue (cuBLASLt's BGRADB writes it, so it goes through dbias into G); under TF32 / bf16 it
  // stays a float32 sum of the unrounded dout (a reduction, not a product), which the epilogue,
  // reading the GEMM's rounded operand, would not be.
  void linear_param_backward(std::int64_t wo, std::int64_t bo, const float* dout, const float* inp, int N, int IC,
                             int OC) {
    if (!param_grads) return;  // analysis use: the input-gradient chain only
    if (bo >= 0 && lp.precision() == Precision::Fp32) {
      const GemmEpilogueArgs e{GemmEpilogue::BiasGrad, nullptr, nullptr, dbias.get()};
      lp.gemm(blas, true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, -1, 1.0f, g(wo), IC, e);
      add(g(bo), g(bo), dbias.get(), OC);
      return;
    }
    lp.gemm(blas, true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, -1, 1.0f, g(wo), IC);
    if (bo >= 0) blas.gemm(true, false, OC, 1, N, 1.0f, dout, OC, ones.get(), 1, 1.0f, g(bo), 1);
  }
  // Pre-norm of a sub-layer (cf::nn's norm_forward): the norm of x into `out`, statistics saved in
  // mean, rstd (RMSNorm keeps no mean), returning out; x itself without normalisation.
  const float* norm_forward(float* out, float* mean, float* rstd, const float* x, std::int64_t wo, std::int64_t bo) {
    if (p.norm == TrainNorm::LayerNorm)
      O::layernorm_forward(ctx, out, mean, rstd, x, w(wo), w(bo), p.N, p.C, p.norm_eps);
    else if (p.norm == TrainNorm::RMSNorm)
      O::rmsnorm_forward(ctx, out, rstd, x, w(wo), p.N, p.C, p.norm_eps);
    else
      return x;
    return out;
  }
  /// Where a pre-norm writes (norm_forward's out, mean, rstd) and its parameters; out == null: none.
  struct NormAt {
    float *out = nullptr, *mean = nullptr, *rstd = nullptr;
    std::int64_t wo = -1, bo = -1;
  };
  // The residual stream's next value s = a + b (cf::nn's residual add) and the pre-norm `n` that
  // reads it (norm_forward of s) in one kernel (llm.c's fused_residual_forward: the sum is written
  // once and normalised while its row is at hand; the same floats as the add, then norm_forward).
  // Returns what norm_forward returns: n.out, or s without normalisation (or without n).
  const float* residual_forward(float* s, const float* a, const float* b, const NormAt& n) {
    if (!n.out || !p.normed()) {
      add(s, a, b, static_cast<long long>(p.N) * p.C);
      return s;
    }
    if (p.norm == TrainNorm::LayerNorm)
      O::residual_layernorm_forward(ctx, s, n.out, n.mean, n.rstd, a, b, w(n.wo), w(n.bo), p.N, p.C, p.norm_eps);
    else
      O::residual_rmsnorm_forward(ctx, s, n.out, n.rstd, a, b, w(n.wo), p.N, p.C, p.norm_eps);
    return n.out;
  }
  // The pre-norm reading resid[l] in a forward over `blocks` blocks: block l's ln_1, ln_f after the
  // last block when the head runs, none past a residual seed's top.
  NormAt stream_norm(std::size_t l, std::size_t blocks, bool head) {
    if (l < blocks)
      return NormAt{L[l].ln1.get(), L[l].ln1_mean.get(), L[l].ln1_rstd.get(), p.layers[l].ln1_w, p.layers[l].ln1_b};
    if (head) return NormAt{lnf.get(), lnf_mean.get(), lnf_rstd.get(), p.lnf_w, p.lnf_b};
    return NormAt{};
  }
  // The residual stream's gradient through a pre-norm: dx = dres + d norm^T dnorm (LayerNorm or
  // RMSNorm; dnorm itself without normalisation) + dpar, dres and dpar null where there is none
  // (dres may be dx). One kernel writes dx (issue 31: the add and the norm backward fused, the
  // floats of the norm backward on dx = dres, then + dpar) and sums the weight gradients' terms per
  // block of rows; a second adds those sums to G in block order (deterministic, trainer_norm_grad.hpp).
  void norm_backward(float* dx, const float* dres, const float* dnorm, const float* x, const float* mean,
                     const float* rstd, std::int64_t wo, std::int64_t bo, const float* dpar = nullptr) {
    float* part = param_grads ? norm_part.get() : nullptr;  // analysis use: no weight gradient
    if (p.norm == TrainNorm::LayerNorm) {
      O::residual_layernorm_backward(ctx, dx, part, dres, dpar, dnorm, x, w(wo), mean, rstd, p.N, p.C);
      if (part) O::norm_weight_grad(ctx, g(wo), g(bo), part, p.N, p.C);
    } else if (p.norm == TrainNorm::RMSNorm) {
      O::residual_rmsnorm_backward(ctx, dx, part, dres, dpar, dnorm, x, w(wo), rstd, p.N, p.C);
      if (part) O::norm_weight_grad(ctx, g(wo), nullptr, part, p.N, p.C);
    } else {
      thrust::transform(Tr::policy(), trainer_body::index0(),
                        trainer_body::index0() + static_cast<long long>(p.N) * p.C, dx,
                        detail::ResidualGradSum{dres, dnorm, dpar});
    }
  }

  // Token (+ learned position) embedding into resid[0]; with an embedding norm (BLOOM) into emb,
  // normalised into resid[0] (cf::nn's embed_forward).
  void embed_forward() {
    const long long NC = static_cast<long long>(p.N) * p.C;
    float* e = p.emb_ln_w >= 0 ? emb.get() : resid[0].get();
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + NC, e,
                      detail::Embed{tokens.get(), w(p.wte), w(p.wpe), p.T, p.C});
    if (p.emb_ln_w >= 0) norm_forward(resid[0].get(), emb_mean.get(), emb_rstd.get(), e, p.emb_ln_w, p.emb_ln_b);
  }
  // d embedding from dres = d resid[0]: dres itself, or through the embedding norm into dn.
  const float* embed_norm_backward() {
    if (p.emb_ln_w < 0) return dres.get();
    norm_backward(dn.get(), nullptr, dres.get(), emb.get(), emb_mean.get(), emb_rstd.get(), p.emb_ln_w, p.emb_ln_b);
    return dn.get();
  }

  // The MLP's input stream of layer l: the block's input with a parallel residual (GPT-NeoX:
  // x + attn(ln_1 x) + mlp(ln_2 x)), else resid_mid[l].
  const float* mlp_source(std::size_t l) const { return p.parallel_residual ? resid[l].get() : resid_mid[l].get(); }
  // norm_2 of layer l's MLP stream: sequentially resid_mid[l], whose residual_forward in forward()
  // wrote it; with a parallel residual the block's input, normalised here.
  const float* mlp_input(std::size_t l) {
    Layer& a = L[l];
    if (p.parallel_residual)
      return norm_forward(a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), mlp_source(l), p.layers[l].ln2_w,
                          p.layers[l].ln2_b);
    return p.normed() ? a.ln2.get() : mlp_source(l);
  }
  // The MLP branch of layer l into tmp: c_proj(act(c_fc(norm_2(src)))) (cf::nn's mlp_sublayer_forward).
  void mlp_forward(std::size_t l) {
    const TrainLayer& tl = p.layers[l];
    Layer& a = L[l];
    const float* in = mlp_input(l);
    const std::int64_t NF = static_cast<std::int64_t>(p.N) * p.F;
    if (p.mlp == TrainMlp::GeluTanh) {
      linear_gelu_forward(a.fcg.get(), a.fch.get(), in, tl.fc_w, tl.fc_b, p.N, p.C, p.F);
    } else {
      linear_forward(a.fch.get(), in, tl.fc_w, tl.fc_b, p.N, p.C, p.fc_width());
      if (p.mlp == TrainMlp::SwiGLU)
        O::swiglu_forward(ctx, a.fcg.get(), a.fch.get(), p.N, p.F);
      else
        O::gelu_erf_forward(ctx, a.fcg.get(), a.fch.get(), NF);
    }
    linear_forward(tmp.get(), a.fcg.get(), tl.fcproj_w, tl.fcproj_b, p.N, p.F, p.C);
  }
  // Backward of mlp_forward from dres = d resid[l+1]: the branch's d src is added to dres
  // (sequential: dres becomes d resid_mid[l]) or written to dpar (parallel residual: dres is
  // already d resid_mid[l]; dpar joins d resid[l] after the attention sub-layer, as in cf::nn).
  void mlp_backward(std::size_t l) {
    const TrainLayer& tl = p.layers[l];
    Layer& a = L[l];
    const std::int64_t NF = static_cast<std::int64_t>(p.N) * p.F;
    if (p.mlp == TrainMlp::GeluTanh) {
      // c_proj's input gradient times GELU' of the saved pre-activation: the DGELU epilogue
      linear_param_backward(tl.fcproj_w, tl.fcproj_b, dres.get(), a.fcg.get(), p.N, p.F, p.C);
      const GemmEpilogueArgs e{GemmEpilogue::DGelu, nullptr, a.fch.get()};
      lp.gemm(blas, false, false, p.N, p.F, p.C, 1.0f, dres.get(), p.C, w(tl.fcproj_w), p.F, tl.fcproj_w, 0.0f,
              dfch.get(), p.F, e);
    } else {
      dfc.zero();
      linear_backward(dfc.get(), tl.fcproj_w, tl.fcproj_b, dres.get(), a.fcg.get(), p.N, p.F, p.C);
      dfch.zero();
      if (p.mlp == TrainMlp::SwiGLU)
        O::swiglu_backward(ctx, dfch.get(), a.fch.get(), dfc.get(), p.N, p.F);
      else
        O::gelu_erf_backward(ctx, dfch.get(), a.fch.get(), dfc.get(), NF);
    }
    const float* src = mlp_source(l);
    dn.zero();
    linear_backward(dn.get(), tl.fc_w, tl.fc_b, dfch.get(), p.normed() ? a.ln2.get() : src, p.N, p.C, p.fc_width());
    // sequential: dres += the branch's d src; parallel: dpar = it, added after ln_1's (backward())
    float* dsrc = p.parallel_residual ? dpar.get() : dres.get();
    norm_backward(dsrc, p.parallel_residual ? nullptr : dres.get(), dn.get(), src, a.ln2_mean.get(), a.ln2_rstd.get(),
                  tl.ln2_w, tl.ln2_b);
  }
  void add(float* out, const float* a, const float* b, long long n) {
    thrust::transform(Tr::policy(), a, a + n, b, out, thrust::plus<float>());
  }
  void to_heads(float* dst, const float* src, const TrainLayer& tl, long long ld, long long off) {
    const long long n = static_cast<long long>(p.N) * p.H * tl.dh;
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + n, dst,
                      detail::ToHeads{src, p.H, p.T, tl.dh, ld, off});
  }
  /// The attention's products in the GEMMs' precision (docs/gpu.md "Precision policies").
  AttentionShape shape(const TrainLayer& tl) const {
    return AttentionShape{p.B, p.H, p.T, tl.dh, tl.scale, p.precision};
  }

  // ---- the attention sub-layer between its input and the head outputs (cf::nn's
  // attention_sublayer_forward / _backward and the layer's unit)

  /// Width of a qkv row: H query heads, then the kv key and kv value heads.
  long long qkv_ld(const TrainLayer& tl) const { return static_cast<long long>(p.H + 2 * tl.kv) * tl.dh; }
  /// q, k, v [B, H, T, dh] from qkv rows (grouped-query attention: head h reads kv head h / (H / kv)).
  void split_heads(const TrainLayer& tl, const float* qkv) {
    const long long ld = qkv_ld(tl), HD = static_cast<long long>(p.H) * tl.dh, n = p.N * HD;
    to_heads(q.get(), qkv, tl, ld, 0);
    const int group = p.H / tl.kv;
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + n, k.get(),
                      detail::ToHeadsKv{qkv, p.H, p.T, tl.dh, group, ld, HD});
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + n, v.get(),
                      detail::ToHeadsKv{qkv, p.H, p.T, tl.dh, group, ld, HD + static_cast<long long>(tl.kv) * tl.dh});
  }
  /// RoPE on the query and key heads' columns of qkv rows (inverse: the backward rotation of dqkv).
  void rope_qk(const TrainLayer& tl, float* qkv, bool inverse) {
    if (tl.rope == 0) return;
    const long long ld = qkv_ld(tl);
    for (int j = 0; j < p.H + tl.kv; ++j)
      O::rope_apply(ctx, qkv + static_cast<long long>(j) * tl.dh, p.B, p.T, tl.dh, ld, p.T * ld, inverse, tl.rope,
                    tl.rope_theta);
  }
  /// S-D: the damping d = softplus(in W_d^T + b_d) + eps of layer l, saved for the backward.
  void damp_forward(std::size_t l, const float* in) {
    const TrainLayer& tl = p.layers[l];
    UnitSaved& u = X[l];
    linear_forward(u.z.get(), in, tl.damp_w, tl.damp_b, p.N, p.C, p.H);
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.N) * p.H,
                      u.damp.get(), detail::SdDamp{u.z.get(), p.H, p.T, tl.sd_eps});
  }
  /// The S-D and runway inputs of layer l's tiled kernels (the runway reads v of the current split).
  AttentionExtras extras(std::size_t l) {
    const TrainLayer& tl = p.layers[l];
    AttentionExtras x;
    if (tl.form == AttnForm::Sd) x.damp = X[l].damp.get();
    if (tl.form == AttnForm::RunwayDot || tl.form == AttnForm::RunwayBilinear) {
      const long long seq = static_cast<long long>(p.H) * p.T * tl.dh;  // the last head's values per sequence
      x.runway_v = v.get() + seq - static_cast<long long>(p.T) * tl.dh;
      x.runway_stride = seq;
      if (tl.form == AttnForm::RunwayBilinear) x.runway_B = w(tl.runway_B);
    }
    return x;
  }
  /// Layer l: qkv from the sub-layer input `in`, RoPE, the heads, a.atty [N, H dh].
  void attention_heads_forward(std::size_t l, const float* in) {
    const TrainLayer& tl = p.layers[l];
    Layer& a = L[l];
    const int HD = p.H * tl.dh;
    linear_forward(a.qkv.get(), in, tl.attn_w, tl.attn_b, p.N, p.C, static_cast<int>(qkv_ld(tl)));
    rope_qk(tl, a.qkv.get(), false);
    split_heads(tl, a.qkv.get());
    if (tl.form == AttnForm::Sd) damp_forward(l, in);
    if (tl.form == AttnForm::Linear)
      thrust::for_each(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.N) * p.H,
                       detail::LinearForward{q.get(), k.get(), v.get(), y.get(), X[l].den.get(), p.T, tl.dh});
    else
      O::attention_forward_ex(ctx, shape(tl), *masks[l], a.slopes.get(), extras(l), scratch(), q.get(), k.get(),
                              v.get(), y.get(), a.lse.get(), a.obr.get());
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.N) * HD,
                      a.atty.get(), detail::FromHeads{y.get(), y.get(), y.get(), p.H, p.T, tl.dh, 1});
  }
  /// Backward of attention_heads_forward from datty: dn = d in (overwritten), parameter gradients in G.
  void attention_heads_backward(std::size_t l, const float* in) {
    const TrainLayer& tl = p.layers[l];
    Layer& a = L[l];
    const int HD = p.H * tl.dh;
    to_heads(dy.get(), datty.get(), tl, HD, 0);
    split_heads(tl, a.qkv.get());
    for (DBuf<float>* b : {&dq, &dk, &dv}) Tr::fill_zero(b->get(), sizeof(float) * p.N * HD);
    if (tl.form == AttnForm::Linear)
      linear_heads_backward(l);
    else
      softmax_heads_backward(l);
    const long long ld = qkv_ld(tl);
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.N) * ld,
                      dqkv.get(), detail::FromHeadsQkv{dq.get(), dk.get(), dv.get(), p.H, tl.kv, p.T, tl.dh});
    rope_qk(tl, dqkv.get(), true);
    dn.zero();
    linear_backward(dn.get(), tl.attn_w, tl.attn_b, dqkv.get(), in, p.N, p.C, static_cast<int>(ld));
    if (tl.form == AttnForm::Sd) damp_backward(l, in);
  }
  /// dq, dk, dv (+ the extras' gradients) of the tiled softmax kernels from dy.
  void softmax_heads_backward(std::size_t l) {
    const TrainLayer& tl = p.layers[l];
    Layer& a = L[l];
    const AttentionExtras x = extras(l);
    AttentionExtraGrads g;
    if (x.damp) ddamp.zero(), g.ddamp = ddamp.get();
    if (x.runway_v) dvs.zero(), dvl.zero(), g.dvs = dvs.get(), g.dvl = dvl.get();
    if (x.runway_B && param_grads) dBs.zero(), g.dB = dBs.get();  // analysis use: d B not computed
    O::attention_backward_ex(ctx, shape(tl), *masks[l], a.slopes.get(), x, scratch(), q.get(), k.get(), v.get(),
                             dy.get(), a.lse.get(), a.obr.get(), dsum.get(), dq.get(), dk.get(), dv.get(), g);
    if (x.runway_v) runway_backward(tl, x);
  }
  /// dq, dk, dv of linear attention from dy, y (the saved head outputs) and the saved denominators.
  void linear_heads_backward(std::size_t l) {
    const TrainLayer& tl = p.layers[l];
    const long long rows = static_cast<long long>(p.N) * p.H;
    to_heads(y.get(), L[l].atty.get(), tl, static_cast<long long>(p.H) * tl.dh, 0);
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + rows, dsum.get(),
                      detail::RowDot{dy.get(), y.get(), tl.dh});
    const float* den = X[l].den.get();
    thrust::for_each(
        Tr::policy(), trainer_body::index0(), trainer_body::index0() + rows,
        detail::LinearBackwardQ{q.get(), k.get(), v.get(), dy.get(), den, dsum.get(), dq.get(), p.T, tl.dh});
    thrust::for_each(
        Tr::policy(), trainer_body::index0(), trainer_body::index0() + rows,
        detail::LinearBackwardKV{q.get(), k.get(), v.get(), dy.get(), den, dsum.get(), dk.get(), dv.get(), p.T, tl.dh});
  }
  /// The runway's per-(sequence, head) gradients into the last head's dv and into d B.
  void runway_backward(const TrainLayer& tl, const AttentionExtras& x) {
    thrust::for_each(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.N) * tl.dh,
                     detail::RunwayReduceV{dv.get(), dvs.get(), dvl.get(), p.H, p.T, tl.dh});
    if (!x.runway_B || !param_grads) return;  // analysis: no d B was computed
    const long long dd = static_cast<long long>(tl.dh) * tl.dh;
    thrust::for_each(Tr::policy(), trainer_body::index0(), trainer_body::index0() + dd,
                     detail::SumBlocks{g(tl.runway_B), dBs.get(), static_cast<long long>(p.B) * p.H, dd});
  }
  /// S-D: d damping through softplus and its linear map: dn +=, d W_d, d b_d +=.
  void damp_backward(std::size_t l, const float* in) {
    const TrainLayer& tl = p.layers[l];
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.N) * p.H,
                      dz.get(), detail::SdDampBackward{X[l].z.get(), ddamp.get(), p.H, p.T});
    linear_backward(dn.get(), tl.damp_w, tl.damp_b, dz.get(), in, p.N, p.C, p.H);
  }

  // The batch through the staging buffer; the counted targets on the host (cf::nn's count).
  void upload_batch(const std::int32_t* tok, const std::int32_t* tgt) {
    h_count = 0;
    for (int n = 0; n < p.N; ++n) {
      require(tok[n] >= 0 && tok[n] < p.V, "token ", tok[n], " at index ", n, " outside [0, vocab_size = ", p.V, ")");
      require(tgt[n] < p.V, "target ", tgt[n], " at index ", n, " >= vocab_size = ", p.V);
      h_count += tgt[n] >= 0;
    }
    h_tokens.assign(tok, tok + p.N);
    const std::size_t N = static_cast<std::size_t>(p.N);
    std::int32_t* st = batch_in.write();
    std::copy(tok, tok + N, st);
    std::copy(tgt, tgt + N, st + N);
    batch_in.upload(tokens.get(), 0, N);
    batch_in.upload(targets.get(), N, N);
  }

  // Forward over the uploaded batch; returns the mean loss over counted targets. The classifier
  // leaves the logits as `out` says: Gradient for a training step (backward() starts from them),
  // Probabilities for an output seed, Loss for validation. A residual seed's forward (top >= 0)
  // stops at h(top): blocks >= top and the head are not run; returns 0.
  double forward(std::int64_t& count, Out out, int top = -1) {
    const int N = p.N, C = p.C, H = p.H;
    const std::size_t blocks = top < 0 ? p.layers.size() : static_cast<std::size_t>(top);
    embed_forward();
    NormAt n = stream_norm(0, blocks, top < 0);
    const float* in = n.out ? norm_forward(n.out, n.mean, n.rstd, resid[0].get(), n.wo, n.bo) : resid[0].get();
    for (std::size_t l = 0; l < blocks; ++l) {
      const TrainLayer& tl = p.layers[l];
      Layer& a = L[l];
      const int HD = H * tl.dh;
      attention_heads_forward(l, in);
      linear_forward(tmp.get(), a.atty.get(), tl.proj_w, tl.proj_b, N, HD, C);
      // sequential: norm_2 reads resid_mid[l] (mlp_input); parallel: it reads resid[l]
      const NormAt n2 =
          p.parallel_residual ? NormAt{} : NormAt{a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), tl.ln2_w, tl.ln2_b};
      residual_forward(resid_mid[l].get(), resid[l].get(), tmp.get(), n2);
      mlp_forward(l);
      n = stream_norm(l + 1, blocks, top < 0);
      in = residual_forward(resid[l + 1].get(), resid_mid[l].get(), tmp.get(), n);
    }
    if (top >= 0) return 0.0;
    linear_forward(logits.get(), in, p.head, -1, N, C, vocab.Vp);  // in: ln_f(resid[n_layer]), or resid itself
    const float dloss = h_count > 0 ? 1.0f / static_cast<float>(h_count) : 0.0f;
    O::classifier(ctx, logits.get(), losses.get(), targets.get(), N, p.V, vocab.Vp, dloss, out);
    count = h_count;
    if (count == 0) return 0.0;
    const double sum = read_back([&](auto pol) {
      return thrust::transform_reduce(pol, losses.get(), losses.get() + N, detail::ToDouble(), 0.0,
                                      thrust::plus<double>());
    });
    return sum / static_cast<double>(count);
  }

  // Backward of the head from the logits' gradient (the classifier's, or an output seed's; zero in
  // the padded columns): dres = d resid[n_layer].
  void head_backward() {
    const float* f = p.normed() ? lnf.get() : resid.back().get();
    dn.zero();
    linear_backward(dn.get(), p.head, -1, logits.get(), f, p.N, p.C, vocab.Vp);
    norm_backward(dres.get(), nullptr, dn.get(), resid.back().get(), lnf_mean.get(), lnf_rstd.get(), p.lnf_w, p.lnf_b);
  }
  // An output seed: the probabilities refused when not finite (the CPU's forward refuses such
  // logits), then the top-prediction seed on the device, or the general callback on the host (the
  // probabilities there in rows of V, the padding dropped; the seed's d objective / d logits back in
  // rows of Vp, zero padding).
  void seed_logits(const TrainerSeed& s) {
    const std::size_t N = static_cast<std::size_t>(p.N), V = static_cast<std::size_t>(p.V),
                      Vp = static_cast<std::size_t>(vocab.Vp);
    const long long bad = read_back(
        [&](auto pol) { return thrust::count_if(pol, logits.get(), logits.get() + N * Vp, detail::NotFinite()); });
    require(bad == 0,
            "the device's next-token probabilities are not finite: the model's weights overflow float32 "
            "arithmetic (a damaged or mis-scaled checkpoint)");
    if (s.top) {
      seed_top(*s.top);
      return;
    }
    std::vector<float> probs(N * Vp);
    to_host(probs.data(), logits.get(), sizeof(float) * N * Vp);
    for (std::size_t n = 1; n < N; ++n) std::memmove(&probs[n * V], &probs[n * Vp], sizeof(float) * V);
    s.on_probs(probs.data(), p.N, p.V);
    for (std::size_t n = N; n-- > 0;) {
      std::memmove(&probs[n * Vp], &probs[n * V], sizeof(float) * V);
      std::fill(probs.begin() + static_cast<std::ptrdiff_t>(n * Vp + V),
                probs.begin() + static_cast<std::ptrdiff_t>((n + 1) * Vp), 0.0f);
    }
    to_device(logits.get(), probs.data(), sizeof(float) * N * Vp);
  }

  // cf::nn::TopSeed on the device: each sequence's top prediction at its last position, then
  // d objective / d logits in place of the probabilities; only the B predictions cross to the host.
  void seed_top(const nn::TopSeed<float>& t) {
    const long long n = static_cast<long long>(p.N) * vocab.Vp;
    O::top_prediction(ctx, logits.get(), picks.get(), p.B, p.T, p.V, vocab.Vp);
    thrust::transform(Tr::policy(), trainer_body::index0(), trainer_body::index0() + n, logits.get(),
                      detail::TopSeedGrad{logits.get(), picks.get(), p.T, p.V, vocab.Vp, t.objective});
    h_picks.resize(static_cast<std::size_t>(p.B));
    to_host(h_picks.data(), picks.get(), sizeof(detail::TopPrediction) * h_picks.size());
    if (t.yhat) t.yhat->resize(h_picks.size());
    if (t.p_yhat) t.p_yhat->resize(h_picks.size());
    for (std::size_t b = 0; b < h_picks.size(); ++b) {
      if (t.yhat) (*t.yhat)[b] = h_picks[b].token;
      if (t.p_yhat) (*t.p_yhat)[b] = h_picks[b].prob;
    }
  }

  // Backward of forward(Out::Gradient) for the mean loss over the counted targets (its logits hold
  // d loss / d logits); gradients accumulated in G. With a seed (DeviceTrainer::seeded): an output
  // seed's logits gradient (after forward(Out::Probabilities)), or a residual seed already in dres
  // (d resid[resid_layer]), back to resid[out_layer], which dres then holds; no embedding gradient.
  void backward(const TrainerSeed* seed = nullptr) {
    const int N = p.N, C = p.C, H = p.H;
    const bool resid_seed = seed && seed->resid_layer >= 0;
    if (seed && !resid_seed) seed_logits(*seed);
    if (!resid_seed) head_backward();
    const std::size_t top = resid_seed ? static_cast<std::size_t>(seed->resid_layer) : p.layers.size();
    const std::size_t bottom = seed ? static_cast<std::size_t>(seed->out_layer) : 0;
    for (std::size_t l = top; l-- > bottom;) {
      const TrainLayer& tl = p.layers[l];
      Layer& a = L[l];
      const int HD = H * tl.dh;
      mlp_backward(l);  // dres = d resid[l+1] -> d resid_mid[l]
      // attention sub-layer: d resid_mid[l] -> d resid[l]
      Tr::fill_zero(datty.get(), sizeof(float) * N * HD);
      linear_backward(datty.get(), tl.proj_w, tl.proj_b, dres.get(), a.atty.get(), N, HD, C);
      attention_heads_backward(l, p.normed() ? a.ln1.get() : resid[l].get());
      norm_backward(dres.get(), dres.get(), dn.get(), resid[l].get(), a.ln1_mean.get(), a.ln1_rstd.get(), tl.ln1_w,
                    tl.ln1_b, p.parallel_residual ? dpar.get() : nullptr);
    }
    if (seed) return;
    const float* de = embed_norm_backward();
    // embeddings: the rows of each distinct token gathered in increasing order (no atomics)
    auto &order = h_order, &hu = h_uniq, &hp = h_ptr;  // kept across micro-batches
    order.resize(static_cast<std::size_t>(N));
    for (int n = 0; n < N; ++n) order[static_cast<std::size_t>(n)] = n;
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return h_tokens[static_cast<std::size_t>(a)] < h_tokens[static_cast<std::size_t>(b)];
    });
    hu.clear(), hp.clear();
    for (int i = 0; i < N; ++i)
      if (i == 0 || h_tokens[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] !=
                        h_tokens[static_cast<std::size_t>(order[static_cast<std::size_t>(i - 1)])]) {
        hu.push_back(h_tokens[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]);
        hp.push_back(i);
      }
    hp.push_back(N);
    const std::size_t n = static_cast<std::size_t>(N);
    std::int32_t* st = index_in.write();
    std::copy(hu.begin(), hu.end(), st);
    std::copy(hp.begin(), hp.end(), st + n);
    std::copy(order.begin(), order.end(), st + 2 * n + 1);
    index_in.upload(uniq.get(), 0, hu.size());
    index_in.upload(ptr.get(), n, hp.size());
    index_in.upload(pos.get(), 2 * n + 1, order.size());
    thrust::for_each(Tr::policy(), trainer_body::index0(),
                     trainer_body::index0() + static_cast<long long>(hu.size()) * C,
                     detail::EmbedBackwardTokens{g(p.wte), de, uniq.get(), ptr.get(), pos.get(), C});
    if (p.wpe >= 0)
      thrust::for_each(Tr::policy(), trainer_body::index0(), trainer_body::index0() + static_cast<long long>(p.T) * C,
                       detail::EmbedBackwardPositions{g(p.wpe), de, p.B, p.T, C});
  }
};

template <Backend Bk>
DeviceTrainer<Bk>::DeviceTrainer(Context& ctx, TrainPlan plan, TrainerUse use)
    : impl_(new Impl(ctx, std::move(plan), use)) {}
template <Backend Bk>
DeviceTrainer<Bk>::DeviceTrainer(TrainPlan plan) : DeviceTrainer(default_context(), std::move(plan)) {}
template <Backend Bk>
DeviceTrainer<Bk>::~DeviceTrainer() {
  delete impl_;
}
template <Backend Bk>
const TrainPlan& DeviceTrainer<Bk>::plan() const {
  return impl_->given;
}

template <Backend Bk>
void DeviceTrainer<Bk>::upload(const float* params, const float* m, const float* v) {
  require((!m && !v) || impl_->use == TrainerUse::Training, "device trainer built for analysis: no AdamW moments");
  Impl& a = *impl_;
  // the host's array around the head's padding (PaddedVocab), which stays zero
  const auto up = [&](float* dst, const float* src) {
    a.vocab.pieces(a.given.total, [&](std::int64_t at, std::int64_t from, std::int64_t n) {
      a.to_device(dst + at, src + from, sizeof(float) * static_cast<std::size_t>(n));
    });
  };
  up(a.W.get(), params);
  if (m)
    up(a.M.get(), m);
  else
    a.M.zero();
  if (v)
    up(a.V.get(), v);
  else
    a.V.zero();
  a.lp.refresh_weights(a.W.get());
}

template <Backend Bk>
void DeviceTrainer<Bk>::download(float* params, float* m, float* v) const {
  require((!m && !v) || impl_->use == TrainerUse::Training, "device trainer built for analysis: no AdamW moments");
  if (params) impl_->download(params, impl_->W.get());
  if (m) impl_->download(m, impl_->M.get());
  if (v) impl_->download(v, impl_->V.get());
}

template <Backend Bk>
void DeviceTrainer<Bk>::gradient(float* grad) const {
  require(impl_->param_grads, "device trainer built for analysis: no parameter gradient");
  impl_->download(grad, impl_->G.get());
}

template <Backend Bk>
void DeviceTrainer<Bk>::zero_grad() {
  impl_->G.zero();
}

template <Backend Bk>
double DeviceTrainer<Bk>::micro_batch(const std::int32_t* tokens, const std::int32_t* targets) {
  require(impl_->param_grads, "device trainer built for analysis: no parameter gradient");
  impl_->upload_batch(tokens, targets);
  std::int64_t count = 0;
  const double loss = impl_->forward(count, Impl::Out::Gradient);
  if (count > 0) impl_->backward();
  return loss;
}

template <Backend Bk>
double DeviceTrainer<Bk>::loss(const std::int32_t* tokens, const std::int32_t* targets) {
  impl_->upload_batch(tokens, targets);
  std::int64_t count = 0;
  return impl_->forward(count, Impl::Out::Loss);
}

template <Backend Bk>
double DeviceTrainer<Bk>::clip(int accum, double max_norm) {
  require(impl_->param_grads, "device trainer built for analysis: no parameter gradient");
  float* G = impl_->G.get();
  const long long n = impl_->p.total;
  if (accum > 1) thrust::transform(Impl::Tr::policy(), G, G + n, G, detail::Divide{static_cast<float>(accum)});
  const double norm = std::sqrt(impl_->read_back([&](auto pol) {
    return thrust::transform_reduce(pol, G, G + n, detail::Square(), 0.0, thrust::plus<double>());
  }));
  if (max_norm > 0 && norm > max_norm && std::isfinite(norm))
    thrust::transform(Impl::Tr::policy(), G, G + n, G, detail::Scale{static_cast<float>(max_norm / (norm + 1e-6))});
  return norm;
}

template <Backend Bk>
void DeviceTrainer<Bk>::apply(const AdamWUpdate& u, float weight_decay) {
  Impl& a = *impl_;
  require(a.use == TrainerUse::Training, "device trainer built for analysis: no AdamW update");
  for (const ParamRun& r : a.p.runs) {
    AdamWUpdate ur = u;
    ur.wd = r.decay ? weight_decay : 0.0f;
    Impl::O::adamw_update(a.ctx, a.W.get() + r.offset, a.G.get() + r.offset, a.M.get() + r.offset, a.V.get() + r.offset,
                          r.size, ur);
  }
  a.lp.refresh_weights(a.W.get());
}

template <Backend Bk>
bool DeviceTrainer<Bk>::finite() const {
  const Impl& a = *impl_;
  const long long n = a.p.total;
  // parameters and both moments in one count: one host wait (an analysis trainer has no moments)
  const long long arrays = a.M.size() ? 3 : 1;
  const detail::NotFiniteIn3 bad{a.W.get(), a.M.get(), a.V.get(), n};
  return impl_->read_back([&](auto pol) {
    return thrust::count_if(pol, trainer_body::index0(), trainer_body::index0() + arrays * n, bad);
  }) == 0;
}

template <Backend Bk>
double DeviceTrainer<Bk>::seeded(const std::int32_t* tokens, const std::int32_t* targets, const TrainerSeed& s) {
  Impl& a = *impl_;
  const int L = static_cast<int>(a.p.layers.size());
  const bool resid = s.resid_layer >= 0;
  nn::check_seed_shape(L, s.resid_layer, s.resid != nullptr, int(bool(s.on_probs)) + int(s.top != nullptr),
                       s.out_layer);
  a.upload_batch(tokens, targets);
  a.G.zero();
  std::int64_t count = 0;
  double value = a.forward(count, Impl::Out::Probabilities, resid ? s.resid_layer : -1);
  const long long NC = static_cast<long long>(a.p.N) * a.p.C;
  if (resid) {  // the objective <seed, h(resid_layer)>, its gradient the seed itself
    a.to_device(a.dres.get(), s.resid, sizeof(float) * static_cast<std::size_t>(NC));
    const float* h = a.resid[static_cast<std::size_t>(s.resid_layer)].get();
    value = a.read_back([&](auto pol) {
      return thrust::inner_product(pol, a.dres.get(), a.dres.get() + NC, h, 0.0, thrust::plus<double>(),
                                   detail::ProductDouble());
    });
  }
  a.backward(&s);
  if (s.dresid) a.to_host(s.dresid, a.dres.get(), sizeof(float) * static_cast<std::size_t>(NC));
  return value;
}

template <Backend Bk>
bool DeviceTrainer<Bk>::fits(const TrainPlan& q) const {
  const TrainPlan& c = impl_->cap;
  if (q.total != c.total || q.C != c.C || q.V != c.V || q.precision != c.precision ||
      q.layers.size() != c.layers.size() || q.B > c.B || q.N > c.N)
    return false;
  for (std::size_t l = 0; l < q.layers.size(); ++l)
    if (q.layers[l].mask.nb > c.layers[l].mask.nb || q.layers[l].dh != c.layers[l].dh) return false;
  return true;
}

template <Backend Bk>
void DeviceTrainer<Bk>::reshape(TrainPlan q) {
  require(fits(q), "device trainer: a ", q.B, " x ", q.T, " batch does not fit the buffers of ", impl_->cap.B, " x ",
          impl_->cap.T);
  // the masks resident on the device belong to the sequence length (allocated here, not per step)
  for (std::size_t l = 0; l < q.layers.size(); ++l)
    impl_->masks[l] = std::make_unique<ResidentMask<Bk>>(q.layers[l].mask);
  impl_->p = impl_->vocab.device_plan(q);
  impl_->given = std::move(q);
}

}  // namespace cf::gpu
