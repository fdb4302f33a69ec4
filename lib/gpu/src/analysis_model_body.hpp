#pragma once
// The body of the device analysis model (cf/gpu/device_analysis_model.hpp), one template for both
// back ends like trainer_body.hpp: instantiated by g++ in analysis_model_emu.cpp (host memory, the
// functors on Thrust / OpenMP, OpenBLAS) and by nvcc in analysis_model_cuda.cu (device memory,
// Thrust on CUDA, cuBLAS). The instantiating file first specialises AnalysisTraits<Bk>:
//   policy()                                  a Thrust execution policy,
//   device_alloc(bytes) / device_free(p)      device memory,
//   to_device / to_host (dst, src, bytes)     copies from / to host memory,
//   fill_zero(p, bytes)                       memset 0 on the device,
//   host_alloc(bytes) / host_free(p)          the staging buffer (pinned on CUDA),
//   chunk_to_device(scratch, host, bytes)     a staged chunk readable on the device, the copy
//                                             complete on return (CUDA: cudaMemcpyAsync into the
//                                             scratch, then synchronised; emulated, kChunkInPlace:
//                                             `host` itself, no scratch),
//   kBackend                                  which back end (the GEMM counters of device_stats.hpp),
//   Blas                                      made from the Context: row-major SGEMM with transposes,
//                                             one call (gemm) and strided batches (gemm_batched), and
//                                             the precision policies' GEMMs (precision_body.hpp; the
//                                             trainer's classes, blas_emu.hpp / blas_cuda.hpp).
// The data flow is cf::nn::forward_backward's forward (lib/nn/src/model.cpp) with the dense
// attention path: embed (+ emb norm), blocks (norm, qkv, RoPE, scores, ALiBi, branch masks,
// softmax, P V, c_proj, residual; norm, c_fc, GELU / SwiGLU, c_proj, residual, sequential or
// parallel), final norm, LM head, the loss of each target. The linear layers' GEMMs (qkv, c_proj,
// c_fc, the MLP's c_proj, the LM head) run in the plan's precision policy through the trainer's
// PrecisionGemm; the attention GEMMs (scores, P V) stay float32, as in the trainer.
#include <thrust/count.h>
#include <thrust/find.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "analysis_model_functors.hpp"
#include "cf/core/error.hpp"
#include "cf/gpu/device_analysis_model.hpp"
#include "cf/gpu/ops.hpp"
#include "precision_body.hpp"
#include "trainer_common.hpp"

namespace cf::gpu {

/// A back end's primitives for the analysis model (specialised by analysis_model_emu.cpp /
/// analysis_model_cuda.cu).
template <Backend Bk>
struct AnalysisTraits;

namespace analysis_body {

/// A device array of n elements of T, freed with the owner; grown (never shrunk) by ensure.
template <class Tr, class T>
class DBuf {
 public:
  DBuf() = default;
  ~DBuf() { Tr::device_free(p_); }
  DBuf(DBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DBuf(const DBuf&) = delete;
  DBuf& operator=(const DBuf&) = delete;
  DBuf& operator=(DBuf&&) = delete;
  /// At least n elements (contents undefined after growing).
  T* ensure(std::size_t n) {
    if (n > n_) {
      Tr::device_free(p_);
      p_ = static_cast<T*>(Tr::device_alloc(n * sizeof(T)));
      n_ = n;
    }
    return p_;
  }
  /// Exactly n elements (PrecisionGemm's scratch; contents undefined).
  void reset(std::size_t n) {
    Tr::device_free(p_);
    p_ = n ? static_cast<T*>(Tr::device_alloc(n * sizeof(T))) : nullptr;
    n_ = n;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

inline thrust::counting_iterator<long long> index0() { return thrust::counting_iterator<long long>(0); }

}  // namespace analysis_body

template <Backend Bk>
struct DeviceAnalysisModel<Bk>::Impl {
  using Tr = AnalysisTraits<Bk>;
  using O = Ops<Bk>;
  template <class T>
  using DBuf = analysis_body::DBuf<Tr, T>;

  Context& ctx;
  AnalysisPlan p;
  typename Tr::Blas blas;
  DBuf<float> W;             ///< the float32 array (and the matrices when p.one_array)
  DBuf<std::uint8_t> M;      ///< the matrices in p.wtype (stored weights; every float32 model's under bf16)
  DBuf<float> wide;          ///< one matrix widened to float32 for its GEMM
  DBuf<std::uint8_t> chunk;  ///< a staged chunk on the device (CUDA)
  DBuf<long long> inverse;   ///< a Rows chunk's row map
  std::uint8_t* host_staging = nullptr;
  std::size_t mat_max = 0, in_width = 0;       ///< the largest matrix; the widest GEMM input row
  precision_body::PrecisionGemm<Tr, DBuf> lp;  ///< the linear layers' GEMMs in p.precision
  struct Layer {
    DBuf<std::int64_t> q_col, k_col, v_col;
    DBuf<float> slopes;
    DBuf<std::uint8_t> masks;  ///< the branches at length `T`, each T x T
    int T = 0, n_branches = 0;
  };
  std::vector<Layer> L;
  // activations of one batch, reused across layers (inference keeps nothing for a backward)
  DBuf<float> x, mid, tmp, nrm, qkv, q, k, v, y, S, P, atty, fch, fcg, logits, losses, norms;
  DBuf<std::int32_t> tokens, targets;

  // Weights uploaded from `params` (lib/nn's layout, p.one_array), or zeroed for place() (null).
  Impl(Context& c, AnalysisPlan plan, const float* params)
      : ctx(c), p(std::move(plan)), blas(c), lp(p.precision, 0, 0, 0) {
    const std::size_t P = static_cast<std::size_t>(p.total);
    require(
        p.one_array == (params != nullptr) && (params || p.precision != Precision::Bf16 || p.wtype == WeightType::BF16),
        "device analysis model: the weights do not match the plan");
    if (params) {
      Tr::to_device(W.ensure(P), params, P * sizeof(float));
      if (p.precision == Precision::Bf16) round_matrices();
    } else {
      Tr::fill_zero(W.ensure(std::max<std::size_t>(P, 1)), P * sizeof(float));
      const std::size_t mb = static_cast<std::size_t>(p.mat_total) * elem_bytes(p.wtype);
      Tr::fill_zero(M.ensure(std::max<std::size_t>(mb, 1)), mb);
    }
    for (const AnalysisLayer& al : p.layers) {
      Layer a;
      upload(a.q_col, al.q_col);
      upload(a.k_col, al.k_col);
      upload(a.v_col, al.v_col);
      if (!al.slopes.empty()) upload(a.slopes, al.slopes);
      L.push_back(std::move(a));
    }
    size_gemms();
    if (p.precision == Precision::Bf16) lp.borrow_weights(M.get());
  }
  // The bf16 policy on a float32 model (lib/nn's layout): the matrix array becomes a bfloat16
  // copy of the whole layout, rounded once (nearest even); matrices are read from it at their
  // lib/nn offsets, norms, biases and positions from the float32 array as before.
  void round_matrices() {
    const std::size_t P = static_cast<std::size_t>(p.total);
    auto* m16 = reinterpret_cast<std::uint16_t*>(M.ensure(std::max<std::size_t>(P, 1) * 2));
    thrust::transform(Tr::policy(), W.get(), W.get() + P, m16, ToBf16());
    p.one_array = false, p.wtype = WeightType::BF16, p.mat_total = p.total;
  }
  // The largest matrix (the TF32 policy rounds each widened matrix into a scratch this size) and
  // the widest row a linear layer reads (its activations are rounded per GEMM under tf32 / bf16).
  void size_gemms() {
    const std::size_t V = p.V, C = p.C, F = p.F, FW = p.mlp == MlpOp::SwiGLU ? 2 * F : F;
    mat_max = std::max({V * C, FW * C, C * F}), in_width = std::max(C, F);
    for (const AnalysisLayer& al : p.layers) {
      const std::size_t HD = static_cast<std::size_t>(p.H) * al.dh;
      mat_max = std::max({mat_max, static_cast<std::size_t>(al.ld) * C, C * HD});
      in_width = std::max(in_width, HD);
    }
  }
  template <class T>
  static void upload(DBuf<T>& d, const std::vector<T>& h) {
    Tr::to_device(d.ensure(h.size()), h.data(), h.size() * sizeof(T));
  }

  ~Impl() { release_staging(); }
  static std::size_t elem_bytes(WeightType t) { return t == WeightType::F32 ? 4 : 2; }

  const float* w(std::int64_t off) const { return off >= 0 ? W.get() + off : nullptr; }
  // The matrix array from element `off`, in p.wtype.
  const void* mat_at(std::int64_t off) const {
    if (p.one_array) return W.get() + off;
    return M.get() + static_cast<std::size_t>(off) * elem_bytes(p.wtype);
  }
  // The n-element matrix at `off` as float32: in place, or widened into `wide` (exact).
  const float* mat(std::int64_t off, long long n) {
    if (p.wtype == WeightType::F32) return static_cast<const float*>(mat_at(off));
    float* out = wide.ensure(static_cast<std::size_t>(n));
    thrust::transform(Tr::policy(), analysis_body::index0(), analysis_body::index0() + n, out,
                      detail::Widen{mat_at(off), p.wtype});
    return out;
  }

  std::uint8_t* staging(std::size_t bytes) {
    release_staging();
    host_staging = static_cast<std::uint8_t*>(Tr::host_alloc(bytes));
    return host_staging;
  }
  void release_staging() {
    Tr::host_free(host_staging);
    host_staging = nullptr;
  }
  void place(const WeightChunk& c) {
    require(!p.one_array && c.count >= 0 &&
                (!c.matrix || c.src == p.wtype || p.wtype == WeightType::F32 || p.precision == Precision::Bf16),
            "device analysis model: a weight chunk the plan cannot take");
    if (c.count == 0) return;
    const std::size_t bytes = static_cast<std::size_t>(c.count) * elem_bytes(c.src);
    const void* src = Tr::chunk_to_device(Tr::kChunkInPlace ? nullptr : chunk.ensure(bytes), c.data, bytes);
    const long long* inv = nullptr;
    if (c.op == PlaceOp::Rows) {
      static_assert(sizeof(long long) == sizeof(std::int64_t), "row maps are 64-bit");
      Tr::to_device(inverse.ensure(static_cast<std::size_t>(c.rows)), c.inverse,
                    static_cast<std::size_t>(c.rows) * sizeof(long long));
      inv = inverse.get();
    }
    void* dst = c.matrix ? const_cast<void*>(mat_at(0)) : static_cast<void*>(W.get());
    const WeightType dt = c.matrix ? p.wtype : WeightType::F32;
    thrust::for_each(Tr::policy(), analysis_body::index0(), analysis_body::index0() + c.count,
                     detail::PlaceWeights{src, c.src, dst, dt, c.first, c.dst, c.rows, c.cols, c.op, inv});
  }

  // out [N, OC] = inp [N, IC] W^T (+ b), W [OC, IC] row-major (cf::nn::linear_forward), the GEMM
  // in p.precision: fp32 and tf32 read W widened to float32 (tf32 then rounds both inputs into
  // scratch), bf16 reads the bfloat16 matrix array in place (borrowed: no widening pass) and rounds
  // the activations.
  void linear(float* out, const float* inp, std::int64_t wo, std::int64_t bo, int N, int IC, int OC) {
    if (p.precision == Precision::Bf16)
      lp.gemm(blas, false, true, N, OC, IC, 1.0f, inp, IC, nullptr, IC, wo, 0.0f, out, OC);
    else
      lp.gemm(blas, false, true, N, OC, IC, 1.0f, inp, IC, mat(wo, static_cast<long long>(OC) * IC), IC, -1, 0.0f, out,
              OC);
    if (bo >= 0)
      thrust::for_each(Tr::policy(), analysis_body::index0(), analysis_body::index0() + static_cast<long long>(N) * OC,
                       detail::AddBias{out, w(bo), OC});
  }
  // The sub-layer input: the norm of x into nrm, or x itself without normalisation.
  const float* norm(const float* in, std::int64_t wo, std::int64_t bo, int N) {
    if (p.norm == NormOp::None) return in;
    float* out = nrm.get();
    thrust::for_each(Tr::policy(), analysis_body::index0(), analysis_body::index0() + N,
                     detail::NormRows{out, in, w(wo), w(bo), p.C, p.eps, p.norm == NormOp::RMSNorm});
    return out;
  }
  void add(float* out, const float* a, const float* b, long long n) {
    thrust::transform(Tr::policy(), a, a + n, b, out, thrust::plus<float>());
  }
  // The first non-finite value of x [n] refused naming where it appeared (cf::nn's check).
  void require_finite(const float* xs, long long n, int cols, int T, const std::string& where) {
    const float* bad = thrust::find_if(Tr::policy(), xs, xs + n, detail::NotFinite());
    if (bad == xs + n) return;
    const long long i = bad - xs, row = i / cols;
    float value = 0;
    Tr::to_host(&value, bad, sizeof(float));
    throw InvalidArgument(str("forward pass (device): ", where, " holds a non-finite value (", value, " at sequence ",
                              row / T, ", position ", row % T, ", column ", i % cols,
                              "): the model's weights overflow the arithmetic (a damaged or mis-scaled checkpoint)"));
  }

  void set_length(std::size_t l, int T) {
    Layer& a = L[l];
    if (a.T == T) return;
    const std::vector<std::vector<std::uint8_t>> br = p.layers[l].branch_masks(T);
    const std::size_t TT = static_cast<std::size_t>(T) * T;
    std::uint8_t* d = a.masks.ensure(std::max<std::size_t>(1, br.size() * TT));
    for (std::size_t b = 0; b < br.size(); ++b) Tr::to_device(d + b * TT, br[b].data(), TT);
    a.n_branches = static_cast<int>(br.size());
    a.T = T;
  }

  // Layer l's attention sub-layer: mid = x + c_proj(heads(qkv(norm_1 x))); the capture hook after it.
  void attention(std::size_t l, int B, int T, const DeviceHooks* cap) {
    const AnalysisLayer& al = p.layers[l];
    Layer& a = L[l];
    const int N = B * T, H = p.H, dh = al.dh, HD = H * dh;
    const long long NHD = static_cast<long long>(N) * HD, BH = static_cast<long long>(B) * H,
                    TT = static_cast<long long>(T) * T;
    const float* in = norm(x.get(), al.ln1_w, al.ln1_b, N);
    float* row = qkv.ensure(static_cast<std::size_t>(N) * al.ld);
    linear(row, in, al.attn_w, al.attn_b, N, p.C, static_cast<int>(al.ld));
    if (al.rope_dims > 0) {  // queries of every head, keys of every kv head (their columns in order)
      std::vector<std::int64_t> cols(al.q_col);
      for (std::int64_t c : al.k_col)
        if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
      for (std::int64_t c : cols)
        O::rope_apply(ctx, row + c, B, T, dh, al.ld, static_cast<std::int64_t>(T) * al.ld, false, al.rope_dims,
                      p.rope_theta);
    }
    float* qh = q.ensure(NHD);
    float* kh = k.ensure(NHD);
    float* vh = v.ensure(NHD);
    const auto i0 = analysis_body::index0();
    thrust::transform(Tr::policy(), i0, i0 + NHD, qh, detail::GatherHeads{row, a.q_col.get(), H, T, dh, al.ld});
    thrust::transform(Tr::policy(), i0, i0 + NHD, kh, detail::GatherHeads{row, a.k_col.get(), H, T, dh, al.ld});
    thrust::transform(Tr::policy(), i0, i0 + NHD, vh, detail::GatherHeads{row, a.v_col.get(), H, T, dh, al.ld});
    float* s = S.ensure(BH * TT);
    float* pr = P.ensure(BH * TT);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
    blas.gemm_batched(false, true, T, T, dh, scale, qh, dh, static_cast<long long>(T) * dh, kh, dh,
                      static_cast<long long>(T) * dh, 0.0f, s, T, TT, static_cast<int>(BH));
    if (cap && cap->on_scores) {  // the host's interventions on the scores (spectral surgery)
      std::vector<float> host(static_cast<std::size_t>(BH * TT));
      Tr::to_host(host.data(), s, host.size() * sizeof(float));
      cap->on_scores(static_cast<int>(l), B, T, host.data());
      Tr::to_device(s, host.data(), host.size() * sizeof(float));
    }
    Tr::fill_zero(pr, sizeof(float) * BH * TT);
    set_length(l, T);
    for (int b = 0; b < a.n_branches; ++b)
      thrust::for_each(Tr::policy(), i0, i0 + BH * T,
                       detail::MaskedSoftmaxAdd{pr, s, a.masks.get() + b * TT, a.slopes.get(), H, T});
    float* yh = y.ensure(NHD);
    blas.gemm_batched(false, false, T, dh, T, 1.0f, pr, T, TT, vh, dh, static_cast<long long>(T) * dh, 0.0f, yh, dh,
                      static_cast<long long>(T) * dh, static_cast<int>(BH));
    float* at = atty.ensure(NHD);
    thrust::transform(Tr::policy(), i0, i0 + NHD, at, detail::FromHeads{yh, yh, yh, H, T, dh, 1});
    linear(tmp.get(), at, al.proj_w, al.proj_b, N, HD, p.C);
    add(mid.get(), x.get(), tmp.get(), static_cast<long long>(N) * p.C);
    if (cap && cap->on_layer) report(l, B, T, *cap);
  }

  // Hand layer l to the capture hook one sequence at a time: the requested heads' probabilities,
  // the sequence's qkv rows, the residual in, attention output and residual out with their norms.
  void report(std::size_t l, int B, int T, const DeviceHooks& cap) {
    const AnalysisLayer& al = p.layers[l];
    const int C = p.C;
    const std::size_t TT = static_cast<std::size_t>(T) * T, TC = static_cast<std::size_t>(T) * C;
    std::vector<int> heads = cap.heads;
    if (heads.empty())
      for (int h = 0; h < p.H; ++h) heads.push_back(h);
    const long long N = static_cast<long long>(B) * T;
    float* nr = norms.ensure(3 * N);
    const float* src[3] = {x.get(), tmp.get(), mid.get()};
    for (int s = 0; s < 3; ++s)
      thrust::transform(Tr::policy(), analysis_body::index0(), analysis_body::index0() + N, nr + s * N,
                        detail::RowNorm{src[s], C});
    std::vector<float> probs(heads.size() * TT), rows(static_cast<std::size_t>(T) * al.ld), res(3 * TC), nrm3(3 * T);
    for (int b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < heads.size(); ++i)
        Tr::to_host(probs.data() + i * TT, P.get() + (static_cast<std::size_t>(b) * p.H + heads[i]) * TT,
                    TT * sizeof(float));
      Tr::to_host(rows.data(), qkv.get() + static_cast<std::size_t>(b) * T * al.ld, rows.size() * sizeof(float));
      for (int s = 0; s < 3; ++s) {
        Tr::to_host(res.data() + s * TC, src[s] + b * TC, TC * sizeof(float));
        Tr::to_host(nrm3.data() + s * T, nr + s * N + static_cast<long long>(b) * T, T * sizeof(float));
      }
      DeviceLayerCapture c;
      c.layer = static_cast<int>(l), c.seq = b, c.T = T;
      c.probs = probs.data(), c.qkv = rows.data();
      c.resid_in = res.data(), c.attn_out = res.data() + TC, c.resid_out = res.data() + 2 * TC;
      c.resid_in_norm = nrm3.data(), c.attn_out_norm = nrm3.data() + T, c.resid_out_norm = nrm3.data() + 2 * T;
      cap.on_layer(c);
    }
  }

  // Layer l's MLP sub-layer: x = mid + c_proj(act(c_fc(norm_2 src))), src = mid, or x (parallel residual).
  void mlp(std::size_t l, int N) {
    const AnalysisLayer& al = p.layers[l];
    const int C = p.C, F = p.F, FW = p.mlp == MlpOp::SwiGLU ? 2 * F : F;
    const long long NF = static_cast<long long>(N) * F;
    const float* in = norm(p.parallel_residual ? x.get() : mid.get(), al.ln2_w, al.ln2_b, N);
    float* h = fch.ensure(static_cast<std::size_t>(N) * FW);
    float* g = fcg.ensure(NF);
    linear(h, in, al.fc_w, al.fc_b, N, C, FW);
    if (p.mlp == MlpOp::SwiGLU)
      O::swiglu_forward(ctx, g, h, N, F);
    else if (p.mlp == MlpOp::GeluErf)
      O::gelu_erf_forward(ctx, g, h, NF);
    else
      O::gelu_forward(ctx, g, h, NF);
    linear(tmp.get(), g, al.fcproj_w, al.fcproj_b, N, F, C);
    add(x.get(), mid.get(), tmp.get(), static_cast<long long>(N) * C);
  }

  std::int64_t forward(const std::int32_t* tok, const std::int32_t* tgt, int B, int T, float* h_losses, float* h_logits,
                       const DeviceHooks* cap) {
    require(B >= 1 && T >= 1 && T <= p.block_size, "device analysis model: batch ", B, " x ", T,
            " (need B >= 1 and 1 <= T <= block_size = ", p.block_size, ")");
    const int N = B * T, C = p.C, V = p.V;
    for (int n = 0; n < N; ++n) {
      require(tok[n] >= 0 && tok[n] < V, "token ", tok[n], " at index ", n, " outside [0, vocab_size = ", V, ")");
      require(tgt[n] < V, "target ", tgt[n], " at index ", n, " >= vocab_size = ", V);
    }
    const std::size_t NC = static_cast<std::size_t>(N) * C;
    for (DBuf<float>* b : {&x, &mid, &tmp, &nrm}) b->ensure(NC);
    lp.reserve(static_cast<std::size_t>(N) * in_width, p.precision == Precision::Tf32 ? mat_max : 0);
    Tr::to_device(tokens.ensure(N), tok, sizeof(std::int32_t) * N);
    Tr::to_device(targets.ensure(N), tgt, sizeof(std::int32_t) * N);
    const auto i0 = analysis_body::index0();
    float* e = p.emb_ln_w >= 0 ? tmp.get() : x.get();  // BLOOM: the embedding, then its norm into x
    thrust::transform(Tr::policy(), i0, i0 + static_cast<long long>(NC), e,
                      detail::EmbedStored{tokens.get(), mat_at(p.wte), p.wtype, w(p.wpe), T, C});
    if (p.emb_ln_w >= 0)
      thrust::for_each(Tr::policy(), i0, i0 + N,
                       detail::NormRows{x.get(), e, w(p.emb_ln_w), w(p.emb_ln_b), C, p.eps, p.norm == NormOp::RMSNorm});
    require_finite(x.get(), static_cast<long long>(NC), C, T, "the residual stream after the embedding");
    for (std::size_t l = 0; l < p.layers.size(); ++l) {
      attention(l, B, T, cap);
      mlp(l, N);
      require_finite(x.get(), static_cast<long long>(NC), C, T, str("the residual stream after layer ", l));
    }
    const float* f = norm(x.get(), p.lnf_w, p.lnf_b, N);
    float* z = logits.ensure(static_cast<std::size_t>(N) * V);
    linear(z, f, p.head, -1, N, C, V);
    require_finite(z, static_cast<long long>(N) * V, V, T, "the output layer's logits");
    if (h_logits) Tr::to_host(h_logits, z, sizeof(float) * N * V);
    thrust::transform(Tr::policy(), i0, i0 + N, losses.ensure(N), detail::TargetLoss{z, targets.get(), V});
    Tr::to_host(h_losses, losses.get(), sizeof(float) * N);
    return thrust::count_if(Tr::policy(), targets.get(), targets.get() + N, detail::Counted());
  }
};

template <Backend Bk>
DeviceAnalysisModel<Bk>::DeviceAnalysisModel(Context& ctx, AnalysisPlan plan, const float* params)
    : impl_(new Impl(ctx, std::move(plan), params)) {}
template <Backend Bk>
DeviceAnalysisModel<Bk>::DeviceAnalysisModel(Context& ctx, AnalysisPlan plan)
    : impl_(new Impl(ctx, std::move(plan), nullptr)) {}
template <Backend Bk>
std::uint8_t* DeviceAnalysisModel<Bk>::staging(std::size_t bytes) {
  return impl_->staging(bytes);
}
template <Backend Bk>
void DeviceAnalysisModel<Bk>::release_staging() {
  impl_->release_staging();
}
template <Backend Bk>
void DeviceAnalysisModel<Bk>::place(const WeightChunk& chunk) {
  impl_->place(chunk);
}
template <Backend Bk>
DeviceAnalysisModel<Bk>::~DeviceAnalysisModel() {
  delete impl_;
}
template <Backend Bk>
const AnalysisPlan& DeviceAnalysisModel<Bk>::plan() const {
  return impl_->p;
}
template <Backend Bk>
std::int64_t DeviceAnalysisModel<Bk>::forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                                              float* losses, float* logits, const DeviceHooks* hooks) {
  return impl_->forward(tokens, targets, B, T, losses, logits, hooks);
}

}  // namespace cf::gpu
