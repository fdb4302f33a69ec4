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
    auto coeffs = [&](long i, double& a, double& b) {
      const long k = model.mask.row_size(i);
      if (k == 1) {  // a single admitted key (row 0 or w = 1): all weight on the diagonal
        a = 0;
        b = 1;
        return;
      }
      const double s = std::max(delta, -m);  // the largest logit of the row
      const double off = std::exp(-s), diag = std::exp(delta - s);
      // Off-diagonal mass off * sum_{1<=d<k} r^d = off * r * G(k-1): never 1 + x - 1.
      const double z = off * r * geometric_sum(m, k - 1) + diag;
      a = off / z;
      b = (diag - off) / z;
    };
    double a, b;
    for (long i = 0; i < K; ++i) {
      coeffs(i, a, b);
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

// out_j = sum_h w_h S_{h,j} for heads [h0, h1), j descending.
void sweep(const LayerTables& t, const std::vector<double>& r, const std::vector<double>& rw,
           const std::vector<double>& w, long window, const double* v, double* out, int h0, int h1, long n) {
  const int H = t.H;
  std::vector<double> S(H, 0.0);
  double* Sp = S.data();
  const double* rp = r.data();
  const double* rwp = rw.data();
  const double* wp = w.data();
  const double* ac = t.a_c.data();
  for (long j = n - 1; j >= 0; --j) {
    const double vj = v[j];
    const double* a = j < t.K ? t.a.data() + static_cast<std::size_t>(j) * H : ac;
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

void apply_left(const AlibiModel& model, const std::vector<double>& w, int l, const Eigen::VectorXd& v,
                Eigen::VectorXd& out, long K) {
  const long n = v.size();
  const LayerTables t = make_tables(model, w, l, n, K);
  const int H = t.H;
  std::vector<double> r(H), rw(H, 0.0);
  for (int h = 0; h < H; ++h) {
    r[h] = std::exp(-model.slopes[h]);
    if (model.mask.window > 0) rw[h] = std::exp(-model.slopes[h] * static_cast<double>(model.mask.window));
  }
  out.resize(n);
  // Two head groups on two threads when the work is large enough to pay for the fork.
  const bool par = static_cast<double>(n) * H > 2e5 && H >= 2;
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
  apply_left(model, w, l, v, out, saturation_rows(model, v.size()));
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
  for (long l = alpha.size() - 1; l >= 0; --l) {
    if (alpha(l) == 0.0) continue;
    apply_left(model, w, static_cast<int>(l), v, u, K);
    v = (1.0 - alpha(l)) * v + alpha(l) * u;
  }
  return v;
}

}  // namespace cf::rollout
