// Structured rollout for ALiBi kernels with constant-plus-diagonal content (SPEC.md section 2).
//
// Head h of layer l has, on row i with k_i = min(i+1, w) admitted keys, weights
//   A[i,j] = a_i r^(i-j) + b_i [i = j],  r = exp(-m_h),
//   a_i = e^-s / Z_i,  b_i = (e^(delta-s) - e^-s) / Z_i,  Z_i = e^-s r G(k_i - 1) + e^(delta-s),
// with s = max(delta, -m) the largest logit (no overflow for large content scores, no
// cancellation for very negative ones) and G(k) = sum_{d<k} r^d
// = expm1(-m k) / expm1(-m) (stable for slopes near 0 and near 1: only ratios r^d <= 1 appear).
// Then (v A)_j = S_j + v_j b_j with the suffix recurrence
//   S_j = v_j a_j + r S_{j+1} - r^w v_{j+w} a_{j+w}   (the last term only for a window w),
// every term non-negative except the window correction. a_i, b_i are constant once
// r^(k_i) < 1e-17 relative (k >= 40/m) or k_i = w, so they are tabulated for the first K rows only.
#include <algorithm>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"
#include "cf/rollout/detail/flush_denormals.hpp"

namespace cf::rollout {

namespace {

double geometric_sum(double m, long k) {  // sum_{d<k} exp(-m d)
  if (m == 0.0) return static_cast<double>(k);
  return std::expm1(-m * static_cast<double>(k)) / std::expm1(-m);
}

/// Per-layer tables. Heads are sorted by their saturation row K_h (descending): row j needs a
/// tabulated coefficient only for the first cnt[j] heads (those with K_h > j); the others use
/// their saturated constant. Memory traffic is sum_h K_h instead of H max_h K_h.
struct LayerTables {
  int H = 0;
  long K = 0;                          // max_h K_h: rows >= K are saturated for every head
  std::vector<double> r, rw, w, a_c;   // per sorted head: exp(-m), exp(-m w), weight, saturated a
  std::vector<long> cnt;               // cnt[j], j < K: heads still tabulated on row j
  std::vector<std::size_t> off;        // off[j]: start of row j's cnt[j] coefficients in a
  std::vector<double> a, bw;           // a: tabulated coefficients; bw[j] = sum_h w_h b_{h,j}
  double bw_c = 0;                     // sum_h w_h b_h at saturation
};

long head_saturation(double m, const Mask& mask, long n) {
  // Beyond k = 40/m keys r^k < 4e-18: the row normaliser is constant to double precision.
  long k = n;
  if (m > 0) k = std::min<long>(n, static_cast<long>(std::ceil(40.0 / m)) + 1);
  if (mask.window > 0) k = std::min<long>(k, mask.window);
  return std::max<long>(1, std::min(k, n));
}

LayerTables make_tables(const AlibiModel& model, const std::vector<double>& w, int l, long n) {
  LayerTables t;
  const int H = static_cast<int>(model.slopes.size());
  t.H = H;
  std::vector<long> Kh(H);
  std::vector<int> order(H);
  for (int h = 0; h < H; ++h) Kh[h] = head_saturation(model.slopes[h], model.mask, n), order[h] = h;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return Kh[x] > Kh[y]; });
  t.K = Kh[order[0]];
  t.r.resize(H), t.rw.assign(H, 0.0), t.w.resize(H), t.a_c.resize(H);
  t.cnt.assign(t.K, 0);
  for (int q = 0; q < H; ++q)
    for (long j = 0; j < Kh[order[q]]; ++j) ++t.cnt[j];
  // Round each row's count up to a multiple of 8 doubles (one AVX-512 vector; heads that are
  // already saturated get their constant) so the head loops run without scalar remainders.
  for (long j = 0; j < t.K; ++j) t.cnt[j] = std::min<long>(H, (t.cnt[j] + 7) / 8 * 8);
  t.off.assign(t.K + 1, 0);
  for (long j = 0; j < t.K; ++j) t.off[j + 1] = t.off[j] + static_cast<std::size_t>(t.cnt[j]);
  t.a.assign(t.off[t.K], 0.0);
  t.bw.assign(t.K, 0.0);
  for (int q = 0; q < H; ++q) {
    const int h = order[q];
    const double m = model.slopes[h];
    const double delta = model_delta(model, l, h);
    const double r = std::exp(-m);
    t.r[q] = r;
    if (model.mask.window > 0) t.rw[q] = std::exp(-m * static_cast<double>(model.mask.window));
    t.w[q] = w[h];
    const double sh = std::max(delta, -m);  // the largest logit of a row with >= 2 keys
    const double off = std::exp(-sh), diag = std::exp(delta - sh);
    // Off-diagonal mass off * sum_{1<=d<k} r^d = off * r * G(k-1) (never 1 + x - 1), with
    // G(k) = 1 + r G(k-1): a recurrence of positive terms, relative error ~ k * 2^-53 at worst.
    auto coeffs_from = [&](long k, double g_km1, double& a, double& b) {
      if (k == 1) {  // a single admitted key (row 0 or w = 1): all weight on the diagonal
        a = 0;
        b = 1;
        return;
      }
      const double z = off * r * g_km1 + diag;
      a = off / z;
      b = (diag - off) / z;
    };
    // Saturated row: row n-1 (k = min(n, w)); identical to rows >= K_h to double precision.
    double a_sat, b_sat;
    const long k_sat = model.mask.row_size(n - 1);
    coeffs_from(k_sat, geometric_sum(m, k_sat - 1), a_sat, b_sat);
    t.a_c[q] = a_sat;
    t.bw_c += w[h] * b_sat;
    for (long i = Kh[h]; i < t.K && q < t.cnt[i]; ++i) t.a[t.off[i] + q] = a_sat;  // padding
    for (long i = Kh[h]; i < t.K; ++i) t.bw[i] += w[h] * b_sat;
    double g = 0;  // G(k-1) for the current row
    long kprev = 1;
    for (long i = 0; i < Kh[h]; ++i) {
      const long k = model.mask.row_size(i);
      if (k != kprev) {
        g = 1 + r * g;
        kprev = k;
      }
      double a, b;
      coeffs_from(k, g, a, b);
      t.a[t.off[i] + q] = a;  // q < cnt[i] because K_h > i
      t.bw[i] += w[h] * b;
    }
  }
  return t;
}

using detail::FlushDenormals;

// out_j = sum_q w_q S_{q,j} for sorted heads [q0, q1), j descending.
void sweep(const LayerTables& t, long window, const double* v, double* out, int q0, int q1, long n) {
  const FlushDenormals ftz;
  std::vector<double> S(t.H, 0.0);
  double* __restrict Sp = S.data();
  const double* __restrict rp = t.r.data();
  const double* __restrict rwp = t.rw.data();
  const double* __restrict wp = t.w.data();
  const double* __restrict ac = t.a_c.data();
  for (long j = n - 1; j >= 0; --j) {
    const double vj = v[j];
    const int c = j < t.K ? static_cast<int>(t.cnt[j]) : 0;
    const double* __restrict a = c > 0 ? t.a.data() + t.off[j] : ac;
    const int split = std::clamp(c, q0, q1);  // heads [q0, split) tabulated, [split, q1) saturated
    double acc = 0;
    if (window > 0 && j + window < n) {
      const double vjw = v[j + window];  // row j+w >= w-1 is saturated: its a is the constant
#pragma omp simd reduction(+ : acc)
      for (int q = q0; q < split; ++q) {
        Sp[q] = vj * a[q] + rp[q] * Sp[q] - rwp[q] * vjw * ac[q];
        acc += wp[q] * Sp[q];
      }
#pragma omp simd reduction(+ : acc)
      for (int q = split; q < q1; ++q) {
        Sp[q] = vj * ac[q] + rp[q] * Sp[q] - rwp[q] * vjw * ac[q];
        acc += wp[q] * Sp[q];
      }
    } else {
#pragma omp simd reduction(+ : acc)
      for (int q = q0; q < split; ++q) {
        Sp[q] = vj * a[q] + rp[q] * Sp[q];
        acc += wp[q] * Sp[q];
      }
#pragma omp simd reduction(+ : acc)
      for (int q = split; q < q1; ++q) {
        Sp[q] = vj * ac[q] + rp[q] * Sp[q];
        acc += wp[q] * Sp[q];
      }
    }
    out[j] = acc;
  }
}

bool same_deltas(const AlibiModel& model, int l1, int l2) {
  for (int h = 0; h < static_cast<int>(model.slopes.size()); ++h)
    if (model_delta(model, l1, h) != model_delta(model, l2, h)) return false;
  return true;
}

void apply_left(const AlibiModel& model, const LayerTables& t, const Eigen::VectorXd& v, Eigen::VectorXd& out) {
  const long n = v.size();
  const int H = t.H;
  out.resize(n);
  // Two head groups on two threads only for large work: on a loaded 2-core machine a fork per
  // layer costs more than it saves below ~1e7 head-steps.
  const bool par = static_cast<double>(n) * H > 1e7 && H >= 2;
  if (par) {
    Eigen::VectorXd part(n);
    const int mid = H / 2;
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
      omp_errors.run([&] { sweep(t, model.mask.window, v.data(), out.data(), 0, mid, n); });
#pragma omp section
      omp_errors.run([&] { sweep(t, model.mask.window, v.data(), part.data(), mid, H, n); });
    }
    omp_errors.rethrow();
    out += part;
  } else {
    sweep(t, model.mask.window, v.data(), out.data(), 0, H, n);
  }
  for (long j = 0; j < n; ++j) out[j] += v[j] * (j < t.K ? t.bw[j] : t.bw_c);
}

}  // namespace

Eigen::VectorXd alibi_apply_left(const AlibiModel& model, int l, const Eigen::VectorXd& v) {
  validate_model(model);
  require(v.size() >= 1, "rollout: v must have n >= 1 entries");
  const auto w = model_head_weights(model);
  Eigen::VectorXd out;
  const LayerTables t = make_tables(model, w, l, v.size());
  apply_left(model, t, v, out);
  return out;
}

Eigen::VectorXd rollout_last_row_alibi(const AlibiModel& model, const Eigen::VectorXd& alpha, long n) {
  validate_model(model);
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  validate_alpha(alpha, static_cast<int>(alpha.size()));
  require(model.delta.rows() <= 1 || model.delta.rows() == alpha.size(), "rollout: delta has ", model.delta.rows(),
          " layers but the schedule has L = ", alpha.size());
  const auto w = model_head_weights(model);
  Eigen::VectorXd v = Eigen::VectorXd::Zero(n), u;
  v(n - 1) = 1.0;
  LayerTables t;
  int t_layer = -1;  // layers with identical deltas (e.g. no content) share one table
  for (long l = alpha.size() - 1; l >= 0; --l) {
    if (alpha(l) == 0.0) continue;
    if (t_layer < 0 || !same_deltas(model, t_layer, static_cast<int>(l))) {
      t = make_tables(model, w, static_cast<int>(l), n);
      t_layer = static_cast<int>(l);
    }
    apply_left(model, t, v, u);
    v = (1.0 - alpha(l)) * v + alpha(l) * u;
  }
  return v;
}

}  // namespace cf::rollout
