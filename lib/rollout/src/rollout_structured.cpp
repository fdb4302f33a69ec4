// Structured rollout for ALiBi kernels with constant-plus-diagonal content (docs/spec.md section 2).
//
// Head h of layer l has, on row i with k_i = min(i+1, w) admitted keys, weights
//   A[i,j] = a_i r^(i-j) for j < i,  A[i,i] = d_i,  r = exp(-m_h),
//   a_i = e^-s / Z_i,  d_i = e^(delta-s) / Z_i,  Z_i = e^-s r G(k_i - 1) + e^(delta-s),
// with s = max(delta, -m) the largest logit (no overflow for large content scores, no
// cancellation for very negative ones) and G(k) = sum_{d<k} r^d built as G(k) = 1 + r G(k-1)
// (positive terms; only ratios r^d <= 1 appear). Then (v A)_j = v_j d_j + T_j with the
// off-diagonal sum T_j = sum_{j < i <= j+w-1} r^(i-j) x_i, x_i = v_i a_i. Every quantity is a sum
// of non-negative terms: no subtraction anywhere, so each p_j carries a small relative error and
// positions the last token cannot reach (the window cuts every path) come out exactly 0.
//  * causal mask: T_j = r (x_{j+1} + T_{j+1}) (suffix recurrence, heads vectorised);
//  * window w >= 2: positions are cut into blocks of B = w-1; the window (j, j+B] covers the tail
//    of j+1's block (a within-block suffix sum, backward) and a head of the next block (a
//    within-block prefix sum, forward, stored per block, times r^(start-j)); heads vectorised,
//    O(B H) extra memory (heads in chunks beyond 2^24 doubles). The earlier form
//    S_j = x_j + r S_{j+1} - r^w x_{j+w} cancelled and returned small negative values.
// a_i, d_i are constant once r^(k_i) < 1e-17 relative (k >= 40/m) or k_i = w, so they are
// tabulated for the first K rows only.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/rollout/detail/flush_denormals.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

namespace {

// The head loops below run over 8-double (64-byte) vectors. Aligned storage keeps every vector load
// and store inside one cache line, whatever addresses the heap hands out: with std::vector's 16-byte
// alignment the two-thread sweep's speed depended on the allocation history of the whole program
// (bench_rollout at n = 2^20 differed by 7% between two builds of the same code; docs/benchmarks.md).
using Doubles = std::vector<double, Eigen::aligned_allocator<double>>;

double geometric_sum(double m, long k) {  // sum_{d<k} exp(-m d)
  if (m == 0.0) return static_cast<double>(k);
  return std::expm1(-m * static_cast<double>(k)) / std::expm1(-m);
}

/// Per-layer tables. Heads are sorted by their saturation row K_h (descending): row j needs a
/// tabulated coefficient only for the first cnt[j] heads (those with K_h > j); the others use
/// their saturated constant. Memory traffic is sum_h K_h instead of H max_h K_h.
struct LayerTables {
  int H = 0;
  long K = 0;                    // max_h K_h: rows >= K are saturated for every head
  Doubles r, m, w, wr, a_c;      // per sorted head: exp(-m), m, weight, weight * r, saturated a
  std::vector<long> cnt;         // cnt[j], j < K: heads still tabulated on row j
  std::vector<std::size_t> off;  // off[j]: start of row j's cnt[j] coefficients in a
  Doubles a, dw;                 // a: tabulated coefficients; dw[j] = sum_h w_h d_{h,j}
  double dw_c = 0;               // sum_h w_h d_h at saturation
};

/// Scratch vectors of the windowed sweep (two sets: one per thread of the two-way split).
struct Workspace {
  Doubles x, pre;
  Eigen::VectorXd part;
  std::unique_ptr<Workspace> other;
  Workspace& second() {
    if (!other) other = std::make_unique<Workspace>();
    return *other;
  }
};

long head_saturation(double m, const Mask& mask, long n) {
  // Beyond k = 40/m keys r^k < 4e-18: the row normaliser is constant to double precision.
  long k = n;
  if (m > 0) {
    const double kk = std::ceil(40.0 / m) + 1;  // compared as a double: no overflowing cast
    if (kk < static_cast<double>(n)) k = static_cast<long>(kk);
  }
  if (mask.window > 0) k = std::min<long>(k, mask.window);
  return std::max<long>(1, std::min(k, n));
}

LayerTables make_tables(const AlibiModel& model, int l, long n) {
  LayerTables t;
  const auto& slopes = model_slopes(model, l);
  const auto w = model_head_weights(model, l);
  const int H = static_cast<int>(slopes.size());
  t.H = H;
  std::vector<long> Kh(H);
  std::vector<int> order(H);
  for (int h = 0; h < H; ++h) Kh[h] = head_saturation(slopes[h], model.mask, n), order[h] = h;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return Kh[x] > Kh[y]; });
  t.K = Kh[order[0]];
  t.r.resize(H), t.m.resize(H), t.w.resize(H), t.wr.resize(H), t.a_c.resize(H);
  t.cnt.assign(t.K, 0);
  for (int q = 0; q < H; ++q)
    for (long j = 0; j < Kh[order[q]]; ++j) ++t.cnt[j];
  // Round each row's count up to a multiple of 8 doubles (one AVX-512 vector; heads that are
  // already saturated get their constant) so the head loops run without scalar remainders.
  for (long j = 0; j < t.K; ++j) t.cnt[j] = std::min<long>(H, (t.cnt[j] + 7) / 8 * 8);
  t.off.assign(t.K + 1, 0);
  for (long j = 0; j < t.K; ++j) t.off[j + 1] = t.off[j] + static_cast<std::size_t>(t.cnt[j]);
  t.a.assign(t.off[t.K], 0.0);
  t.dw.assign(t.K, 0.0);
  for (int q = 0; q < H; ++q) {
    const int h = order[q];
    const double m = slopes[h];
    const double delta = model_delta(model, l, h);
    const double r = std::exp(-m);
    t.r[q] = r;
    t.m[q] = m;
    t.w[q] = w[h];
    t.wr[q] = w[h] * r;
    const double sh = std::max(delta, -m);  // the largest logit of a row with >= 2 keys
    const double off = std::exp(-sh), diag = std::exp(delta - sh);
    // Off-diagonal mass off * sum_{1<=d<k} r^d = off * r * G(k-1) (never 1 + x - 1), with
    // G(k) = 1 + r G(k-1): a recurrence of positive terms, relative error ~ k * 2^-53 at worst.
    auto coeffs_from = [&](long k, double g_km1, double& a, double& d) {
      if (k == 1) {  // a single admitted key (row 0 or w = 1): all weight on the diagonal
        a = 0;
        d = 1;
        return;
      }
      const double z = off * r * g_km1 + diag;
      a = off / z;
      d = diag / z;
    };
    // Saturated row: row n-1 (k = min(n, w)); identical to rows >= K_h to double precision.
    double a_sat, d_sat;
    const long k_sat = model.mask.row_size(n - 1);
    coeffs_from(k_sat, geometric_sum(m, k_sat - 1), a_sat, d_sat);
    t.a_c[q] = a_sat;
    t.dw_c += w[h] * d_sat;
    for (long i = Kh[h]; i < t.K && q < t.cnt[i]; ++i) t.a[t.off[i] + q] = a_sat;  // padding
    for (long i = Kh[h]; i < t.K; ++i) t.dw[i] += w[h] * d_sat;
    double g = 0;  // G(k-1) for the current row
    long kprev = 1;
    for (long i = 0; i < Kh[h]; ++i) {
      const long k = model.mask.row_size(i);
      if (k != kprev) {
        g = 1 + r * g;
        kprev = k;
      }
      double a, d;
      coeffs_from(k, g, a, d);
      t.a[t.off[i] + q] = a;  // q < cnt[i] because K_h > i
      t.dw[i] += w[h] * d;
    }
  }
  return t;
}

using detail::FlushDenormals;

// Causal mask: out_j = sum_q w_q T_{q,j} for sorted heads [q0, q1), j descending, with
// T_j = r S_{j+1} and S_j = x_j + r S_{j+1} (S holds S_{j+1} when row j is reached).
void sweep_causal(const LayerTables& t, const double* v, double* out, int q0, int q1, long n) {
  const FlushDenormals ftz;
  Doubles S(t.H, 0.0);
  double* __restrict Sp = S.data();
  const double* __restrict rp = t.r.data();
  const double* __restrict wrp = t.wr.data();
  const double* __restrict ac = t.a_c.data();
  for (long j = n - 1; j >= 0; --j) {
    const double vj = v[j];
    const int c = j < t.K ? static_cast<int>(t.cnt[j]) : 0;
    const double* __restrict a = c > 0 ? t.a.data() + t.off[j] : ac;
    const int split = std::clamp(c, q0, q1);  // heads [q0, split) tabulated, [split, q1) saturated
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int q = q0; q < split; ++q) {
      acc += wrp[q] * Sp[q];
      Sp[q] = vj * a[q] + rp[q] * Sp[q];
    }
#pragma omp simd reduction(+ : acc)
    for (int q = split; q < q1; ++q) {
      acc += wrp[q] * Sp[q];
      Sp[q] = vj * ac[q] + rp[q] * Sp[q];
    }
    out[j] = acc;
  }
}

// Sliding window w >= 2, heads vectorised, blocks of B = w - 1 positions from the last one
// (van Herk / Gil-Werman): out_j = sum_q w_q T_{q,j} with
//   T_j = r Suf_{j+1} + r^(s-j) Pre_{min(j+B, n-1)},
// Suf = within-block suffix sum over j+1's block c (backward state, reset at the block end s),
// Pre = within-block prefix sum over block c+1 (forward, stored: B x (q1-q0) doubles).
void sweep_window_blocked(const LayerTables& t, long window, const double* v, double* out, int q0, int q1, long n,
                          Doubles& pre) {
  const FlushDenormals ftz;
  const long B = window - 1;
  const int Hq = q1 - q0;
  pre.resize(static_cast<std::size_t>(B) * Hq);
  Doubles S(Hq), RS(Hq), P(Hq), PW(Hq);
  double* __restrict Sp = S.data();
  double* __restrict RSp = RS.data();
  double* __restrict Pp = P.data();
  double* __restrict PWp = PW.data();
  const double* __restrict rp = t.r.data() + q0;
  const double* __restrict wp = t.w.data() + q0;
  const double* __restrict acp = t.a_c.data() + q0;
  auto coeffs = [&](long i, int& split) -> const double* {  // row i's a for heads q0.. (tabulated part)
    const int c = i < t.K ? static_cast<int>(t.cnt[i]) : 0;
    split = std::clamp(c, q0, q1) - q0;
    return c > 0 ? t.a.data() + t.off[i] + q0 : acp;
  };
  const long nblocks = (n + B - 1) / B;
  for (long c = nblocks - 1; c >= 0; --c) {
    const long s = (c + 1) * B, end = std::min(s, n);  // block c = [cB, end)
    const bool next = s < n;
    if (next) {  // Pre over block c+1 = [s, min(s+B, n))
      const long e1 = std::min(s + B, n);
      for (int q = 0; q < Hq; ++q) Pp[q] = 0, PWp[q] = 1;
      for (long i = s; i < e1; ++i) {
        int split;
        const double* __restrict a = coeffs(i, split);
        const double vi = v[i];
        double* __restrict row = pre.data() + static_cast<std::size_t>(i - s) * Hq;
#pragma omp simd
        for (int q = 0; q < split; ++q) {
          Pp[q] += PWp[q] * (vi * a[q]);
          row[q] = Pp[q];
          PWp[q] *= rp[q];
        }
#pragma omp simd
        for (int q = split; q < Hq; ++q) {
          Pp[q] += PWp[q] * (vi * acp[q]);
          row[q] = Pp[q];
          PWp[q] *= rp[q];
        }
      }
      for (int q = 0; q < Hq; ++q) RSp[q] = 1;  // r^(s-j) / r, advanced before use
    }
    for (int q = 0; q < Hq; ++q) Sp[q] = 0;
    for (long j = end - 1; j >= c * B; --j) {
      double acc = 0;
      if (next) {
        const double* __restrict row = pre.data() + static_cast<std::size_t>(std::min(j + B, n - 1) - s) * Hq;
#pragma omp simd reduction(+ : acc)
        for (int q = 0; q < Hq; ++q) {
          RSp[q] *= rp[q];
          acc += wp[q] * (rp[q] * Sp[q] + RSp[q] * row[q]);
        }
      } else {
#pragma omp simd reduction(+ : acc)
        for (int q = 0; q < Hq; ++q) acc += wp[q] * (rp[q] * Sp[q]);
      }
      int split;
      const double* __restrict a = coeffs(j, split);
      const double vj = v[j];
#pragma omp simd
      for (int q = 0; q < split; ++q) Sp[q] = vj * a[q] + rp[q] * Sp[q];
#pragma omp simd
      for (int q = split; q < Hq; ++q) Sp[q] = vj * acp[q] + rp[q] * Sp[q];
      out[j] = acc;
    }
  }
}

// The windowed sweep over heads [q0, q1) in chunks whose B x chunk buffer stays below `limit`
// doubles (RolloutOptions; chunks of one head for windows above it), accumulated into out.
void sweep_window(const LayerTables& t, long window, const double* v, double* out, int q0, int q1, long n, Doubles& pre,
                  Doubles& part, double limit) {
  const double B = static_cast<double>(window - 1);
  const int chunk = static_cast<int>(std::clamp(limit / B, 1.0, static_cast<double>(q1 - q0)));
  if (chunk >= q1 - q0) return sweep_window_blocked(t, window, v, out, q0, q1, n, pre);
  part.resize(n);
  for (long j = 0; j < n; ++j) out[j] = 0;
  for (int c0 = q0; c0 < q1; c0 += chunk) {
    sweep_window_blocked(t, window, v, part.data(), c0, std::min(q1, c0 + chunk), n, pre);
    for (long j = 0; j < n; ++j) out[j] += part[j];
  }
}

void sweep_layer(const AlibiModel& model, const LayerTables& t, const Eigen::VectorXd& v, Eigen::VectorXd& out,
                 Workspace& ws, const RolloutOptions& o) {
  const long n = v.size();
  const int H = t.H;
  const long window = model.mask.window;
  out.resize(n);
  const bool windowed = window > 0 && window < n;  // a window >= n admits every earlier key: causal
  if (windowed && window == 1) {
    out.setZero();  // w = 1: every row attends only to itself
  } else {
    // Two head groups on two threads only for large work: on a loaded 2-core machine a fork per
    // layer costs more than it saves below ~1e7 head-steps.
    const bool par = static_cast<double>(n) * H > 1e7 && H >= 2;
    auto run = [&](int q0, int q1, double* dst, Workspace& w) {
      if (windowed)
        sweep_window(t, window, v.data(), dst, q0, q1, n, w.pre, w.x, o.window_buffer_doubles);
      else
        sweep_causal(t, v.data(), dst, q0, q1, n);
    };
    if (par) {
      ws.part.resize(n);
      const int mid = H / 2;
      cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel sections num_threads(2)
      {
#pragma omp section
        omp_errors.run([&] { run(0, mid, out.data(), ws); });
#pragma omp section
        omp_errors.run([&] { run(mid, H, ws.part.data(), ws.second()); });
      }
      omp_errors.rethrow();
      out += ws.part;
    } else {
      run(0, H, out.data(), ws);
    }
  }
  for (long j = 0; j < n; ++j) out[j] += v[j] * (j < t.K ? t.dw[j] : t.dw_c);
}

}  // namespace

struct AlibiKernels::State {
  LayerTables t;
  int t_layer = -1;  // the layer `t` was made for; layers with identical kernels (e.g. no content) share it
  Workspace ws;
};

AlibiKernels::AlibiKernels(const AlibiModel& model, long n, RolloutOptions o)
    : m_(model), n_(n), o_(o), s_(std::make_unique<State>()) {}

AlibiKernels::~AlibiKernels() = default;

void AlibiKernels::check(const Eigen::VectorXd& alpha) const {
  validate_model(m_);
  require(n_ >= 1, "rollout: n >= 1 required, got ", n_);
  validate_alpha(alpha, static_cast<int>(alpha.size()));
  require(m_.delta.rows() <= 1 || m_.delta.rows() == alpha.size(), "rollout: delta has ", m_.delta.rows(),
          " layers but the schedule has L = ", alpha.size());
  require(m_.layer_slopes.empty() || static_cast<long>(m_.layer_slopes.size()) == alpha.size(),
          "rollout: per-layer slopes for ", m_.layer_slopes.size(), " layers but the schedule has L = ", alpha.size());
  require(m_.layer_head_weights.empty() || static_cast<long>(m_.layer_head_weights.size()) == alpha.size(),
          "rollout: per-layer head weights for ", m_.layer_head_weights.size(),
          " layers but the schedule has L = ", alpha.size());
}

void AlibiKernels::apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) {
  State& s = *s_;
  if (s.t_layer < 0 || !same_layer_kernel(m_, s.t_layer, l)) {
    s.t = make_tables(m_, l, n_);
    s.t_layer = l;
  }
  sweep_layer(m_, s.t, v, out, s.ws, o_);
}

Eigen::VectorXd alibi_apply_left(const AlibiModel& model, int l, const Eigen::VectorXd& v) {
  validate_model(model);
  require(v.size() >= 1, "rollout: v must have n >= 1 entries");
  Eigen::VectorXd out;
  AlibiKernels op(model, v.size());
  op.apply_left(l, v, out);
  return out;
}

Eigen::VectorXd rollout_last_row_alibi(const AlibiModel& model, const Eigen::VectorXd& alpha, long n,
                                       const RolloutOptions& o) {
  AlibiKernels op(model, n, o);
  return rollout_last_row(op, alpha);
}

}  // namespace cf::rollout
