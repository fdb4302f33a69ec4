// Benchmark (not a test) of the CUDA path against the CPU path in the same process:
//   bench_gpu train LAYERS D_MODEL HEADS T B VOCAB STEPS [WARMUP] [SCHEDULE] [PRECISION]
//       tokens/s of one training update of cf::gpu::cuda::Trainer (forward, backward, clip,
//       AdamW; the step of bench_train_step.cpp) and the device memory it holds; PRECISION
//       fp32 (default) | tf32 | bf16 is the trainer's GEMM policy (docs/gpu.md "Precision policies")
//   bench_gpu rollout LOG2_N HEADS STEPS
//       one structured ALiBi rollout step (Position bias (Herasimchyk et al.) Eqs. 1-3) on the device
//       (cf::gpu::cuda::alibi_rollout_apply_left) and on the CPU (cf::rollout::alibi_apply_left),
//       STEPS steps each, the largest relative difference between them
//   bench_gpu eig N BATCH REPS
//       BATCH symmetric N x N eigendecompositions (cuSOLVER syevd) against the CPU twin (Eigen)
//   bench_gpu attention T DH B H REPS [MASK] [HEAD]
//       the attention kernels with ALiBi, forward and backward, on a mask made resident once, side
//       by side in the same run: the FlashAttention-2 style kernels in float32
//       (CF_GPU_ATTENTION=flash under fp32), on tensor cores in TF32 and in bf16 (flash under tf32 /
//       bf16, kernels/flash_attention_mma.cuh; S-D and runway heads stay float32) and the reference
//       kernels; MASK full (default) | swa | block (a window / blocks of T / 8 positions); HEAD plain
//       (default; reference: the plain kernels) | sd | runway-dot | runway-bilinear (reference: the
//       general kernels, CF_GPU_ATTENTION=generic)
// Exits 2 on a bad argument, 77 without a usable CUDA device. docs/benchmarks.md.
#include <cuda_runtime_api.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cf/gpu/attention.hpp"
#include "cf/gpu/context.hpp"
#include "cf/gpu/device.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/gpu/train_step.hpp"
#include "cf/gpu/trainer.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/optim.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/rollout.hpp"

namespace {

using clk = std::chrono::steady_clock;
double secs(clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int usage() {
  std::fprintf(stderr,
               "usage: bench_gpu train LAYERS D_MODEL HEADS T B VOCAB STEPS [WARMUP] [SCHEDULE] [PRECISION]\n"
               "       bench_gpu rollout LOG2_N HEADS STEPS\n"
               "       bench_gpu eig N BATCH REPS\n"
               "       bench_gpu attention T DH B H REPS [full|swa|block] [plain|sd|runway-dot|runway-bilinear]\n");
  return 2;
}

// A positive integer argument in [1, hi], or -1 after a message naming it.
long arg(const char* s, long hi) {
  const std::string a = s;
  const bool digits = !a.empty() && a.size() <= 9 && a.find_first_not_of("0123456789") == std::string::npos;
  const long v = digits ? std::atol(s) : -1;
  if (v >= 1 && v <= hi) return v;
  std::fprintf(stderr, "bench_gpu: '%s' is not an integer in [1, %ld]\n", s, hi);
  return -1;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_gpu: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class T>
void dmalloc(T** p, std::size_t bytes, const char* what) {
  check(cudaMalloc(reinterpret_cast<void**>(p), bytes), what);
}

double used_mib() {
  std::size_t f = 0, t = 0;
  check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
  return double(t - f) / (1024.0 * 1024.0);
}

int run_train(int argc, char** argv) {
  if (argc < 9 || argc > 12) return usage();
  const auto precision = cf::gpu::kPrecisions.find(argc > 11 ? argv[11] : "fp32");
  if (!precision) {
    std::fprintf(stderr, "bench_gpu: the precision must be fp32, tf32 or bf16 (got '%s')\n", argv[11]);
    return usage();
  }
  long v[8];
  for (int i = 0; i < 7; ++i)
    if ((v[i] = arg(argv[2 + i], 1L << 20)) < 0) return usage();
  const long warm = argc > 9 ? arg(argv[9], 1000) : 1;
  if (warm < 0) return usage();
  using namespace cf::nn;
  ModelConfig c;
  c.n_layer = int(v[0]), c.d_model = int(v[1]), c.n_head = int(v[2]);
  const int T = int(v[3]), B = int(v[4]), steps = int(v[6]);
  c.vocab_size = int(v[5]), c.block_size = T;
  c.layers = parse_schedule(argc > 10 ? argv[10] : "full", c.n_layer, LayerConfig{});
  const Model<float> m = init_model<float>(c, 1);
  std::mt19937 rng(1);
  std::vector<std::int32_t> x(std::size_t(B) * T), y(x.size());
  for (auto& t : x) t = std::int32_t(rng() % c.vocab_size);
  for (auto& t : y) t = std::int32_t(rng() % c.vocab_size);
  const double mem0 = used_mib();
  cf::gpu::TrainPlan plan = cf::gpu::make_train_plan(c, B, T);
  plan.precision = *precision;
  cf::gpu::cuda::Trainer tr(std::move(plan));
  tr.upload(m.params.data(), nullptr, nullptr);
  const AdamWConfig ac;
  double total = 0, loss = 0;
  for (int s = 0; s < warm + steps; ++s) {
    const auto t0 = clk::now();
    tr.zero_grad();
    loss = tr.micro_batch(x.data(), y.data());  // returns the loss: synchronises
    tr.clip(1, 1.0);
    const int k = s + 1;
    tr.apply(cf::gpu::AdamWUpdate{1e-4f, float(ac.beta1), float(ac.beta2), float(1 - std::pow(ac.beta1, k)),
                                  float(1 - std::pow(ac.beta2, k)), float(ac.eps), 0.f},
             float(ac.weight_decay));
    check(cudaDeviceSynchronize(), "step");
    if (s >= warm) total += secs(t0, clk::now());
  }
  std::printf(
      "cuda-trainer params=%lld tokens_per_s=%.1f step_s=%.4f loss=%.4f device_mib=%.1f finite=%d precision=%s\n",
      static_cast<long long>(m.params.size()), double(B) * T * steps / total, total / steps, loss, used_mib() - mem0,
      int(tr.finite()), std::string(cf::gpu::kPrecisions.name(*precision)).c_str());
  return 0;
}

int run_rollout(int argc, char** argv) {
  if (argc != 5) return usage();
  const long lg = arg(argv[2], 28), H = arg(argv[3], 64), steps = arg(argv[4], 1000);
  if (lg < 0 || H < 0 || steps < 0) return usage();
  const long n = 1L << lg;
  cf::rollout::AlibiModel model;
  model.delta = Eigen::MatrixXd(1, H);
  std::vector<double> slopes(H), deltas(H), weights(H, 1.0 / double(H));
  for (long h = 0; h < H; ++h) {
    slopes[h] = std::pow(2.0, -8.0 * double(h + 1) / double(H));  // the ALiBi slope set
    deltas[h] = model.delta(0, h) = 0.5;
  }
  model.slopes = slopes;
  model.head_weights = weights;
  Eigen::VectorXd v0 = Eigen::VectorXd::Constant(n, 1.0 / double(n));
  // the device: v, out and the [H n] scan scratch resident; steps alternate v and out
  double *dS, *dD, *dW, *dV, *dO;
  cf::gpu::Affine* dScr;
  dmalloc(&dS, H * sizeof(double), "malloc");
  dmalloc(&dD, H * sizeof(double), "malloc");
  dmalloc(&dW, H * sizeof(double), "malloc");
  dmalloc(&dV, n * sizeof(double), "malloc");
  dmalloc(&dO, n * sizeof(double), "malloc");
  dmalloc(&dScr, std::size_t(H) * n * sizeof(cf::gpu::Affine), "malloc scratch");
  check(cudaMemcpy(dS, slopes.data(), H * sizeof(double), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(dD, deltas.data(), H * sizeof(double), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(dW, weights.data(), H * sizeof(double), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(dV, v0.data(), n * sizeof(double), cudaMemcpyHostToDevice), "copy");
  cf::gpu::cuda::alibi_rollout_apply_left(dS, dD, dW, int(H), dV, dO, n, dScr);  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  const auto t0 = clk::now();
  for (long s = 0; s < steps; ++s) {
    cf::gpu::cuda::alibi_rollout_apply_left(dS, dD, dW, int(H), dV, dO, n, dScr);
    std::swap(dV, dO);
  }
  check(cudaDeviceSynchronize(), "steps");
  const double tg = secs(t0, clk::now());
  std::vector<double> got(n);
  check(cudaMemcpy(got.data(), dV, n * sizeof(double), cudaMemcpyDeviceToHost), "copy back");
  Eigen::VectorXd w = v0;
  const auto t1 = clk::now();
  for (long s = 0; s < steps; ++s) w = cf::rollout::alibi_apply_left(model, 0, w);
  const double tc = secs(t1, clk::now());
  double worst = 0;
  for (long j = 0; j < n; ++j) worst = std::max(worst, std::abs(got[j] - w(j)) / std::max(std::abs(w(j)), 1e-300));
  std::printf("rollout n=2^%ld heads=%ld steps=%ld device_s=%.4f cpu_s=%.4f ratio=%.1f worst_rel_diff=%.2e\n", lg, H,
              steps, tg, tc, tc / tg, worst);
  for (void* p : {(void*)dS, (void*)dD, (void*)dW, (void*)dV, (void*)dO, (void*)dScr}) cudaFree(p);
  return 0;
}

int run_eig(int argc, char** argv) {
  if (argc != 5) return usage();
  const long n = arg(argv[2], 4096), batch = arg(argv[3], 100000), reps = arg(argv[4], 1000);
  if (n < 0 || batch < 0 || reps < 0) return usage();
  std::vector<float> a(std::size_t(batch) * n * n), w(std::size_t(batch) * n), V(a.size());
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (long b = 0; b < batch; ++b)
    for (long i = 0; i < n; ++i)
      for (long j = 0; j <= i; ++j)
        a[std::size_t(b) * n * n + i * n + j] = a[std::size_t(b) * n * n + j * n + i] = nd(gen);
  float *dA, *dw, *dV;
  dmalloc(&dA, a.size() * sizeof(float), "malloc");
  dmalloc(&dw, w.size() * sizeof(float), "malloc");
  dmalloc(&dV, V.size() * sizeof(float), "malloc");
  check(cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
  cf::gpu::cuda::sym_eig_batched(dA, int(n), int(batch), dw, dV);  // warm-up (handles, workspace)
  check(cudaDeviceSynchronize(), "warm-up");
  const auto t0 = clk::now();
  for (long r = 0; r < reps; ++r) cf::gpu::cuda::sym_eig_batched(dA, int(n), int(batch), dw, dV);
  check(cudaDeviceSynchronize(), "eig");
  const double tg = secs(t0, clk::now()) / double(reps);
  std::vector<float> wd(w.size());
  check(cudaMemcpy(wd.data(), dw, w.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy back");
  const auto t1 = clk::now();
  cf::gpu::emu::sym_eig_batched(a.data(), int(n), int(batch), w.data(), V.data());
  const double tc = secs(t1, clk::now());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    worst = std::max(worst, double(std::abs(wd[i] - w[i])));
    scale = std::max(scale, double(std::abs(w[i])));
  }
  std::printf("eig n=%ld batch=%ld device_s=%.4f cpu_s=%.4f ratio=%.1f worst_eigenvalue_diff_rel=%.2e\n", n, batch, tg,
              tc, tc / tg, worst / scale);
  cudaFree(dA), cudaFree(dw), cudaFree(dV);
  return 0;
}

// Milliseconds per call of f (REPS calls after one warm-up call), the device synchronised around them.
template <class F>
double time_ms(long reps, F&& f) {
  f();
  check(cudaDeviceSynchronize(), "warm-up");
  const auto t0 = clk::now();
  for (long r = 0; r < reps; ++r) f();
  check(cudaDeviceSynchronize(), "timed calls");
  return 1e3 * secs(t0, clk::now()) / double(reps);
}

int run_attention(int argc, char** argv) {
  if (argc < 7 || argc > 9) return usage();
  const long T = arg(argv[2], 1 << 16), dh = arg(argv[3], 128), B = arg(argv[4], 4096), H = arg(argv[5], 4096),
             reps = arg(argv[6], 100000);
  if (T < 0 || dh < 0 || B < 0 || H < 0 || reps < 0) return usage();
  const std::string kind = argc > 7 ? argv[7] : "full";
  if (kind != "full" && kind != "swa" && kind != "block") {
    std::fprintf(stderr, "bench_gpu: the mask must be full, swa or block (got '%s')\n", kind.c_str());
    return 2;
  }
  const std::string head = argc > 8 ? argv[8] : "plain";
  if (head != "plain" && head != "sd" && head != "runway-dot" && head != "runway-bilinear") {
    std::fprintf(stderr, "bench_gpu: the head must be plain, sd, runway-dot or runway-bilinear (got '%s')\n",
                 head.c_str());
    return 2;
  }
  const bool sd = head == "sd", rw = head.rfind("runway", 0) == 0, bil = head == "runway-bilinear";
  const long part = std::max(1L, T / 8);
  std::vector<std::uint8_t> mask(std::size_t(T) * T, 0);
  for (long i = 0; i < T; ++i)
    for (long j = 0; j <= i; ++j)
      mask[std::size_t(i) * T + j] = kind == "full" || (kind == "swa" ? i - j < part : i / part == j / part);
  const cf::gpu::TiledMask tm = cf::gpu::tiled_mask_from_dense({mask.data()}, int(T));
  using O = cf::gpu::Ops<cf::gpu::Backend::Cuda>;
  const cf::gpu::ResidentMask<cf::gpu::Backend::Cuda> resident(tm);
  const float scale = 1.0f / std::sqrt(float(dh));
  const std::size_t n = std::size_t(B) * H * T * dh, nl = std::size_t(B) * H * T;
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> host(n), slopes(H);
  for (auto& x : host) x = nd(gen);
  for (long h = 0; h < H; ++h) slopes[h] = std::pow(2.0f, -8.0f * float(h + 1) / float(H));
  float *q, *k, *v, *dy, *y, *lse, *obr, *dsum, *dq, *dk, *dv, *sl;
  for (float** p : {&q, &k, &v, &dy, &y, &obr, &dq, &dk, &dv}) {
    dmalloc(p, n * sizeof(float), "cudaMalloc");
    check(cudaMemcpy(*p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  for (float** p : {&lse, &dsum}) dmalloc(p, nl * sizeof(float), "cudaMalloc");
  dmalloc(&sl, H * sizeof(float), "cudaMalloc");
  check(cudaMemcpy(sl, slopes.data(), H * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  // S-D / runway inputs, gradients and scratch (damp > 0: |normal| values; B: normal / 8)
  float *damp = nullptr, *Bm = nullptr, *ddamp = nullptr, *dvs = nullptr, *dvl = nullptr, *dB = nullptr, *u = nullptr,
        *g = nullptr;
  if (sd) {
    std::vector<float> d(nl);
    for (auto& x : d) x = std::abs(nd(gen));
    for (float** p : {&damp, &ddamp}) dmalloc(p, nl * sizeof(float), "cudaMalloc");
    check(cudaMemcpy(damp, d.data(), nl * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  if (rw) {
    for (float** p : {&dvs, &dvl, &g}) dmalloc(p, n * sizeof(float), "cudaMalloc");
    dmalloc(&u, std::size_t(B) * T * dh * sizeof(float), "cudaMalloc");
  }
  if (bil) {
    std::vector<float> b(std::size_t(dh) * dh);
    for (auto& x : b) x = nd(gen) / 8;
    dmalloc(&Bm, b.size() * sizeof(float), "cudaMalloc");
    dmalloc(&dB, std::size_t(B) * H * dh * dh * sizeof(float), "cudaMalloc");
    check(cudaMemcpy(Bm, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  cf::gpu::AttentionExtras x;
  x.damp = damp;
  if (rw) x.runway_v = v + std::size_t(H - 1) * T * dh, x.runway_stride = std::int64_t(H) * T * dh, x.runway_B = Bm;
  const cf::gpu::AttentionScratch w{u, bil ? g : nullptr};
  const cf::gpu::AttentionExtraGrads xg{ddamp, dvs, dvl, dB};
  const cf::gpu::AttentionPath reference = sd || rw ? cf::gpu::AttentionPath::Generic : cf::gpu::AttentionPath::Plain;
  // flash fp32, flash tf32, flash bf16 (tensor cores on plain heads), the reference kernels (float32)
  struct Variant {
    const char* name;
    cf::gpu::AttentionPath path;
    cf::gpu::Precision prec;
  };
  const Variant variants[] = {{"flash fp32", cf::gpu::AttentionPath::Flash, cf::gpu::Precision::Fp32},
                              {"flash tf32", cf::gpu::AttentionPath::Flash, cf::gpu::Precision::Tf32},
                              {"flash bf16", cf::gpu::AttentionPath::Flash, cf::gpu::Precision::Bf16},
                              {"reference", reference, cf::gpu::Precision::Fp32}};
  double ms[4][2];
  for (int i = 0; i < 4; ++i) {
    cf::gpu::Context ctx(cf::gpu::ContextOptions{variants[i].path});
    const cf::gpu::AttentionShape s{int(B), int(H), int(T), int(dh), scale, variants[i].prec};
    ms[i][0] = time_ms(reps, [&] { O::attention_forward_ex(ctx, s, resident, sl, x, w, q, k, v, y, lse, obr); });
    ms[i][1] = time_ms(reps, [&] {
      O::attention_backward_ex(ctx, s, resident, sl, x, w, q, k, v, dy, lse, obr, dsum, dq, dk, dv, xg);
    });
  }
  std::printf("attention mask=%s head=%s T=%ld dh=%ld B=%ld H=%ld reps=%ld tiles(64)=%lld full=%lld\n", kind.c_str(),
              head.c_str(), T, dh, B, H, reps, static_cast<long long>(tm.flash_tiles_visited),
              static_cast<long long>(tm.flash_tiles_full));
  for (int pass = 0; pass < 2; ++pass) {
    std::printf("  %s ms:", pass == 0 ? "forward " : "backward");
    for (int i = 0; i < 4; ++i)
      std::printf(" %s %.4f (%.2fx flash fp32)%s", variants[i].name, ms[i][pass], ms[0][pass] / ms[i][pass],
                  i < 3 ? "," : "\n");
  }
  for (float* p : {q, k, v, dy, y, lse, obr, dsum, dq, dk, dv, sl, damp, Bm, ddamp, dvs, dvl, dB, u, g}) cudaFree(p);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    usage();
    return 0;
  }
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  if (cmd != "train" && cmd != "rollout" && cmd != "eig" && cmd != "attention") {
    std::fprintf(stderr, "bench_gpu: unknown command or option '%s'\n", cmd.c_str());
    return usage();
  }
  const cf::gpu::DeviceStatus st = cf::gpu::device_status();
  if (st.count == 0) {
    std::printf("SKIPPED: bench_gpu needs a CUDA device: %s\n", st.message.c_str());
    return 77;
  }
  try {
    if (cmd == "train") return run_train(argc, argv);
    if (cmd == "rollout") return run_rollout(argc, argv);
    if (cmd == "attention") return run_attention(argc, argv);
    return run_eig(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 2;
  }
}
