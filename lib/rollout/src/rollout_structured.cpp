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
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "cf/core/error.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

namespace {

double geometric_sum(double m, long k) {  // sum_{d<k} exp(-m d)
  if (m == 0.0) return static_cast<double>(k);
  return std::expm1(-m * static_cast<double>(k)) / std::expm1(-m);
}

/// Per-layer tables, head-minor so the inner loop over heads is contiguous.
struct LayerTables {
  int H = 0;
  long K = 0;                  // rows 0..K-1 tabulated, rows >= K use the constants
  std::vector<double> a, bw;   // a[i*H + h] for i < K; bw[i] = sum_h w_h b_{h,i}
  std::vector<double> a_c;     // a at saturation, per head
  double bw_c = 0;             // sum_h w_h b_h at saturation
};

long saturation_rows(const AlibiModel& model, long n) {
  long K = 1;
  for (double m : model.slopes) {
    long k = n;
    if (m > 0) k = std::min<long>(n, static_cast<long>(std::ceil(40.0 / m)) + 1);
    if (model.mask.window > 0) k = std::min<long>(k, model.mask.window);
    K = std::max(K, k);
  }
  return std::min(K, n);
}

LayerTables make_tables(const AlibiModel& model, const std::vector<double>& w, int l, long n, long K) {
  LayerTables t;
  t.H = static_cast<int>(model.slopes.size());
  t.K = K;
  t.a.assign(static_cast<std::size_t>(K) * t.H, 0.0);
  t.bw.assign(K, 0.0);
  t.a_c.assign(t.H, 0.0);
  for (int h = 0; h < t.H; ++h) {
    const double m = model.slopes[h];
    const double delta = model_delta(model, l, h);
    const double r = std::exp(-m);
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
    auto coeffs = [&](long i, double& a, double& b) {
      const long k = model.mask.row_size(i);
      coeffs_from(k, geometric_sum(m, k - 1), a, b);
    };
    double a, b;
    double g = 0;  // G(k-1) for the current row
    long kprev = 1;
    // Rows beyond this head's own saturation point K_h reuse the saturated coefficients.
    long Kh = K;
    if (m > 0) Kh = std::min<long>(K, static_cast<long>(std::ceil(40.0 / m)) + 1);
    double a_sat = 0, b_sat = 0;
    coeffs(n - 1, a_sat, b_sat);
    for (long i = Kh; i < K; ++i) {
      t.a[static_cast<std::size_t>(i) * t.H + h] = a_sat;
      t.bw[i] += w[h] * b_sat;
    }
    for (long i = 0; i < Kh; ++i) {
      const long k = model.mask.row_size(i);
      if (k != kprev) {
        g = 1 + r * g;
        kprev = k;
      }
      coeffs_from(k, g, a, b);
      t.a[static_cast<std::size_t>(i) * t.H + h] = a;
      t.bw[i] += w[h] * b;
    }
    // Saturated row: row n-1 (k = min(n, w)); identical to rows >= K to double precision.
    coeffs(n - 1, a, b);
    t.a_c[h] = a;
    t.bw_c += w[h] * b;
  }
  return t;
}

// Subnormal doubles (masses below 2.2e-308 far from the last position at large n) slow x86
// arithmetic by ~100x; flush them to zero for the duration of a sweep (per thread, restored).
struct FlushDenormals {
#if defined(__SSE2__)
  unsigned int saved = _mm_getcsr();
  FlushDenormals() { _mm_setcsr(saved | 0x8040u); }  // FTZ | DAZ
  ~FlushDenormals() { _mm_setcsr(saved); }
#endif
};

// out_j = sum_h w_h S_{h,j} for heads [h0, h1), j descending.
void sweep(const LayerTables& t, const std::vector<double>& r, const std::vector<double>& rw,
           const std::vector<double>& w, long window, const double* v, double* out, int h0, int h1, long n) {
  const FlushDenormals ftz;
  const int H = t.H;
  std::vector<double> S(H, 0.0);
  double* __restrict Sp = S.data();
  const double* __restrict rp = r.data();
  const double* __restrict rwp = rw.data();
  const double* __restrict wp = w.data();
  const double* __restrict ac = t.a_c.data();
  for (long j = n - 1; j >= 0; --j) {
    const double vj = v[j];
    const double* __restrict a = j < t.K ? t.a.data() + static_cast<std::size_t>(j) * H : ac;
    double acc = 0;
    if (window > 0 && j + window < n) {
      const double vjw = v[j + window];  // row j+w >= w-1 is saturated: its a is the constant
#pragma omp simd reduction(+ : acc)
      for (int h = h0; h < h1; ++h) {
        Sp[h] = vj * a[h] + rp[h] * Sp[h] - rwp[h] * vjw * ac[h];
        acc += wp[h] * Sp[h];
      }
    } else {
#pragma omp simd reduction(+ : acc)
      for (int h = h0; h < h1; ++h) {
        Sp[h] = vj * a[h] + rp[h] * Sp[h];
        acc += wp[h] * Sp[h];
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

void apply_left(const AlibiModel& model, const std::vector<double>& w, const LayerTables& t, const Eigen::VectorXd& v,
                Eigen::VectorXd& out) {
  const long n = v.size();
  const long K = t.K;
  const int H = t.H;
  std::vector<double> r(H), rw(H, 0.0);
  for (int h = 0; h < H; ++h) {
    r[h] = std::exp(-model.slopes[h]);
    if (model.mask.window > 0) rw[h] = std::exp(-model.slopes[h] * static_cast<double>(model.mask.window));
  }
  out.resize(n);
  // Two head groups on two threads only for large work: on a loaded 2-core machine a fork per
  // layer costs more than it saves below ~1e7 head-steps.
  const bool par = static_cast<double>(n) * H > 1e7 && H >= 2;
  if (par) {
    Eigen::VectorXd part(n);
    const int mid = H / 2;
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
      sweep(t, r, rw, w, model.mask.window, v.data(), out.data(), 0, mid, n);
#pragma omp section
      sweep(t, r, rw, w, model.mask.window, v.data(), part.data(), mid, H, n);
    }
    out += part;
  } else {
    sweep(t, r, rw, w, model.mask.window, v.data(), out.data(), 0, H, n);
  }
  for (long j = 0; j < n; ++j) out[j] += v[j] * (j < K ? t.bw[j] : t.bw_c);
}

}  // namespace

Eigen::VectorXd alibi_apply_left(const AlibiModel& model, int l, const Eigen::VectorXd& v) {
  validate_model(model);
  require(v.size() >= 1, "rollout: v must have n >= 1 entries");
  const auto w = model_head_weights(model);
  Eigen::VectorXd out;
  const LayerTables t = make_tables(model, w, l, v.size(), saturation_rows(model, v.size()));
  apply_left(model, w, t, v, out);
  return out;
}

Eigen::VectorXd rollout_last_row_alibi(const AlibiModel& model, const Eigen::VectorXd& alpha, long n) {
  validate_model(model);
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  validate_alpha(alpha, static_cast<int>(alpha.size()));
  require(model.delta.rows() <= 1 || model.delta.rows() == alpha.size(), "rollout: delta has ", model.delta.rows(),
          " layers but the schedule has L = ", alpha.size());
  const auto w = model_head_weights(model);
  const long K = saturation_rows(model, n);
  Eigen::VectorXd v = Eigen::VectorXd::Zero(n), u;
  v(n - 1) = 1.0;
  LayerTables t;
  int t_layer = -1;  // layers with identical deltas (e.g. no content) share one table
  for (long l = alpha.size() - 1; l >= 0; --l) {
    if (alpha(l) == 0.0) continue;
    if (t_layer < 0 || !same_deltas(model, t_layer, static_cast<int>(l))) {
      t = make_tables(model, w, static_cast<int>(l), n, K);
      t_layer = static_cast<int>(l);
    }
    apply_left(model, w, t, v, u);
    v = (1.0 - alpha(l)) * v + alpha(l) * u;
  }
  return v;
}

}  // namespace cf::rollout
