// Every cf::gpu operation executed on the CPU (kernels under the emulation header, Thrust on
// OpenMP) against its CPU oracle in lib/nn, on seeded input with ragged sizes, under both
// intra-block schedules (a missing barrier would show as a difference; test_emulation.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "cf/gpu/emulation.hpp"
#include "cf/gpu/ops.hpp"
#include "cf/nn/gradient_seed.hpp"
#include "cf/nn/ops.hpp"
#include "cf/nn/optim.hpp"
#include "cf/nn/params.hpp"
#include "cf/nn/variant_ops.hpp"

namespace {

std::vector<float> randn(std::size_t n, std::uint32_t seed, float sd = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Max |a - b| / (1 + |b|): float32 kernels against float32 oracles that sum in another order.
double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]) / (1.0 + std::abs(b[i])));
  return m;
}

const auto kSchedules = {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse};

}  // namespace

TEST_CASE("gpu layernorm forward/backward = cf::nn::layernorm (ragged N, C)", "[gpu][emu]") {
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    for (auto [N, C] : {std::pair{1, 1}, {7, 37}, {13, 130}, {5, 300}}) {
      const auto x = randn(size_t(N) * C, 1), w = randn(C, 2), b = randn(C, 3), dy = randn(size_t(N) * C, 4);
      std::vector<float> y0(x.size()), m0(N), r0(N), y1(x.size()), m1(N), r1(N);
      cf::nn::layernorm_forward(y0.data(), m0.data(), r0.data(), x.data(), w.data(), b.data(), N, C);
      cf::gpu::emu::layernorm_forward(y1.data(), m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C);
      // 1e-5: float32 sums of <= 300 terms in a tree instead of a line
      CHECK(max_rel(y1, y0) < 1e-5);
      CHECK(max_rel(m1, m0) < 1e-5);
      CHECK(max_rel(r1, r0) < 1e-5);
      std::vector<float> dx0(x.size(), 0.5f), dw0(C, 0.25f), db0(C, -1.0f), dx1 = dx0, dw1 = dw0, db1 = db0;
      cf::nn::layernorm_backward(dx0.data(), dw0.data(), db0.data(), dy.data(), x.data(), w.data(), m0.data(),
                                 r0.data(), N, C);
      cf::gpu::emu::layernorm_backward(dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), m0.data(),
                                       r0.data(), N, C);
      CHECK(max_rel(dx1, dx0) < 1e-5);
      CHECK(max_rel(dw1, dw0) < 1e-5);
      CHECK(max_rel(db1, db0) < 1e-5);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

TEST_CASE("gpu cross-entropy forward/backward = cf::nn::crossentropy (ignored targets, ragged V)", "[gpu][emu]") {
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    for (auto [N, V] : {std::pair{3, 2}, {9, 257}, {4, 1000}}) {
      auto z0 = randn(size_t(N) * V, 5, 3.0f);
      auto z1 = z0;
      std::vector<std::int32_t> tg(N);
      for (int n = 0; n < N; ++n) tg[n] = n % 3 == 1 ? -1 : (n * 7919) % V;
      std::vector<float> l0(N), l1(N);
      const auto c0 = cf::nn::crossentropy_forward(z0.data(), l0.data(), tg.data(), N, V);
      const auto c1 = cf::gpu::emu::crossentropy_forward(z1.data(), l1.data(), tg.data(), N, V);
      CHECK(c0 == c1);
      CHECK(max_rel(z1, z0) < 1e-5);
      CHECK(max_rel(l1, l0) < 1e-5);
      cf::nn::crossentropy_backward(z0.data(), tg.data(), N, V, 0.125f);
      cf::gpu::emu::crossentropy_backward(z1.data(), tg.data(), N, V, 0.125f);
      CHECK(max_rel(z1, z0) < 1e-5);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

namespace {

// The straightforward softmax cross-entropy in double of one row z[0, V) with target t (< 0: not
// counted): the probabilities, the loss -log p(t) and d (dloss * loss) / dz = dloss (p - onehot).
struct CeRow {
  std::vector<double> p, grad;
  double loss = 0;
};
CeRow ce_row_double(const float* z, int V, int t, double dloss) {
  CeRow r;
  double mx = z[0], sum = 0;
  for (int v = 0; v < V; ++v) mx = std::max(mx, double(z[v]));
  for (int v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
  for (int v = 0; v < V; ++v) {
    r.p.push_back(std::exp(double(z[v]) - mx) / sum);
    r.grad.push_back(t < 0 ? 0.0 : dloss * (r.p.back() - (v == t ? 1.0 : 0.0)));
  }
  if (t >= 0) r.loss = std::log(sum) - (double(z[t]) - mx);
  return r;
}

}  // namespace

TEST_CASE("gpu fused classifier = double softmax cross-entropy and its gradient (masked targets, padded rows)",
          "[gpu][emu]") {
  using cf::gpu::kernels::ClassifierOut;
  const float nan = std::nanf("");
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    // V < 64, V not a multiple of 64 (padded to ld), V a multiple (no padding), one class, V > the block
    for (auto [N, V, ld] : {std::tuple{5, 29, 64}, {7, 257, 320}, {4, 128, 128}, {3, 1, 64}, {3, 1000, 1024}}) {
      INFO("N " << N << " V " << V << " ld " << ld);
      std::vector<float> z = randn(size_t(N) * ld, 21, 3.0f);
      for (int n = 0; n < N; ++n) {
        for (int v = V; v < ld; ++v) z[size_t(n) * ld + v] = nan;  // a padded logit read would show
        if (n == 1)  // a rising row: the running maximum grows at every logit (the rescaled sum)
          for (int v = 0; v < V; ++v) z[size_t(n) * ld + v] = 0.05f * v;
      }
      std::vector<std::int32_t> tg(N);
      for (int n = 0; n < N; ++n) tg[n] = n % 3 == 2 ? -1 : (n * 7919 + 3) % V;
      const float dloss = 0.25f;
      for (ClassifierOut out : {ClassifierOut::Loss, ClassifierOut::Probabilities, ClassifierOut::Gradient}) {
        INFO("out " << int(out));
        std::vector<float> zo = z, loss(N, -7.0f);
        cf::gpu::emu::classifier(zo.data(), loss.data(), tg.data(), N, V, ld, dloss, out);
        for (int n = 0; n < N; ++n) {
          const float* row = z.data() + size_t(n) * ld;
          const float* got = zo.data() + size_t(n) * ld;
          const CeRow want = ce_row_double(row, V, tg[n], dloss);
          CHECK(std::abs(loss[n] - want.loss) <= 1e-6 * (1 + want.loss));  // 0 for a row not counted
          // Loss leaves the row bit for bit; a probability p is right to a few float ulps of p, a
          // gradient entry dloss (p - onehot) to those of |entry| + dloss p (the target's p - 1)
          double worst = 0;
          for (int v = 0; v < V; ++v) {
            const double p = want.p[size_t(v)], g = want.grad[size_t(v)];
            if (out == ClassifierOut::Loss)
              worst = std::max(worst, std::abs(double(got[v]) - row[v]));
            else if (out == ClassifierOut::Probabilities)
              worst = std::max(worst, std::abs(got[v] - p) / p);
            else if (tg[n] < 0)
              worst = std::max(worst, std::abs(double(got[v])));
            else
              worst = std::max(worst, std::abs(got[v] - g) / (std::abs(g) + dloss * p));
          }
          CHECK(worst <= (out == ClassifierOut::Loss || (out == ClassifierOut::Gradient && tg[n] < 0) ? 0.0 : 1e-5));
          for (int v = V; v < ld; ++v) {  // the padding: untouched by Loss, else written 0
            if (out == ClassifierOut::Loss)
              CHECK(std::isnan(got[v]));
            else
              CHECK(got[v] == 0.0f);
          }
        }
      }
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

namespace {

// The rows of apply_top_seed's rule, as influence's seed meets them: B sequences of T rows of ld
// floats (the first V the probabilities). The kernel's picks against cf::nn::apply_top_seed (the
// CPU path) on the same rows packed to V columns: the token and the probability's bits equal.
void check_top_prediction(const std::vector<float>& rows, int B, int T, int V, int ld) {
  std::vector<cf::gpu::kernels::TopPrediction> got(std::size_t(B), {-7, -7.0f});
  cf::gpu::emu::top_prediction(rows.data(), got.data(), B, T, V, ld);
  std::vector<float> packed(std::size_t(B) * T * V);
  for (std::size_t r = 0; r < std::size_t(B) * T; ++r)
    std::copy(rows.begin() + long(r * ld), rows.begin() + long(r * ld + V), packed.begin() + long(r * V));
  std::vector<std::int32_t> yhat;
  std::vector<float> p_yhat;
  cf::nn::TopSeed<float> seed;
  seed.yhat = &yhat;
  seed.p_yhat = &p_yhat;
  cf::nn::apply_top_seed(seed, packed.data(), B, T, V);
  for (int b = 0; b < B; ++b) {
    INFO("sequence " << b << " of " << B << ", V " << V << ", ld " << ld);
    CHECK(got[std::size_t(b)].token == yhat[std::size_t(b)]);
    std::uint32_t gb, wb;
    std::memcpy(&gb, &got[std::size_t(b)].prob, 4);
    std::memcpy(&wb, &p_yhat[std::size_t(b)], 4);
    CHECK(gb == wb);  // the entry itself (NaN, -inf, -0 included)
  }
}

}  // namespace

TEST_CASE("gpu top prediction (one block per sequence) = cf::nn::apply_top_seed's argmax, Qwen2 vocabulary",
          "[gpu][emu]") {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const int V = 151936, T = 2, B = 6;
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    for (int ld : {V, V + 64}) {
      std::vector<float> rows = randn(std::size_t(B) * T * ld, 33);
      auto last = [&](int b) { return rows.data() + (std::size_t(b) * T + T - 1) * ld; };
      for (std::size_t r = 0; r < std::size_t(B) * T; ++r)
        for (int v = V; v < ld; ++v) rows[r * ld + v] = inf;           // a padded column read would win
      last(0)[151935] = 9.0f;                                          // the largest at the last index
      for (int v : {151000, 77, 140000}) last(1)[v] = 8.5f;            // ties: the first index, 77
      last(2)[5] = nan, last(2)[151935] = nan, last(2)[100] = 7.0f;    // NaNs never taken
      last(3)[0] = nan, last(3)[9] = 99.0f;                            // a NaN at index 0 is kept
      for (int v = 0; v < V; ++v) last(4)[v] = v % 3 ? -inf : -1e30f;  // -inf and ties at the bottom
      std::fill(last(5), last(5) + V, -inf);                           // nothing above -inf: index 0
      check_top_prediction(rows, B, T, V, ld);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

TEST_CASE("gpu top prediction at small V = cf::nn::apply_top_seed's argmax (ties, -inf, NaN, signed zeros)",
          "[gpu][emu]") {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  // rows of V entries for every V below: written cyclically from each pattern
  const std::vector<std::vector<float>> patterns = {{1.0f, 1.0f, 1.0f},
                                                    {-inf, -inf, 2.0f, 2.0f},
                                                    {-inf},
                                                    {nan, 3.0f, 4.0f},
                                                    {0.5f, nan, 0.7f, nan},
                                                    {-0.0f, 0.0f, -0.0f},
                                                    {0.0f, -0.0f},
                                                    {nan, nan},
                                                    {-inf, nan, -inf, -1.0f},
                                                    {inf, 1.0f, inf},
                                                    {2.0f, -inf, 2.0f},
                                                    {-1.0f, -2.0f, -1.0f, -0.5f}};
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    for (int V : {1, 2, 3, 5, 127, 128, 129, 300}) {
      const int B = int(patterns.size()) + 1, T = 3, ld = (V + 63) / 64 * 64;
      std::vector<float> rows = randn(std::size_t(B) * T * ld, 5 + V);
      for (int b = 0; b < B; ++b) {
        float* row = rows.data() + (std::size_t(b) * T + T - 1) * ld;
        for (int v = V; v < ld; ++v) row[v] = inf;
        if (b == int(patterns.size())) continue;  // one random row
        const auto& pat = patterns[std::size_t(b)];
        for (int v = 0; v < V; ++v) row[v] = pat[std::size_t(v) % pat.size()];
      }
      check_top_prediction(rows, B, T, V, ld);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

TEST_CASE("gpu fused residual + LayerNorm and + RMSNorm = the sum, then a double norm of it (ragged N, C)",
          "[gpu][emu]") {
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    for (auto [N, C] : {std::pair{1, 1}, {7, 37}, {13, 130}, {5, 300}}) {
      INFO("N " << N << " C " << C);
      const auto a = randn(size_t(N) * C, 31, 0.5f), b = randn(size_t(N) * C, 32, 0.5f), w = randn(C, 33),
                 bias = randn(C, 34);
      const float eps = 1e-3f;
      std::vector<float> s(a.size()), y(a.size()), mean(N), rstd(N), s2(a.size()), y2(a.size()), r2(N);
      cf::gpu::emu::residual_layernorm_forward(s.data(), y.data(), mean.data(), rstd.data(), a.data(), b.data(),
                                               w.data(), bias.data(), N, C, eps);
      cf::gpu::emu::residual_rmsnorm_forward(s2.data(), y2.data(), r2.data(), a.data(), b.data(), w.data(), N, C, eps);
      for (int n = 0; n < N; ++n) {
        double m = 0, ms = 0, var = 0;
        for (int c = 0; c < C; ++c) {
          const size_t i = size_t(n) * C + c;
          const float sum = a[i] + b[i];  // the residual add, one float32 addition
          CHECK(s[i] == sum);
          CHECK(s2[i] == sum);
          m += sum, ms += double(sum) * sum;
        }
        m /= C, ms /= C;
        for (int c = 0; c < C; ++c) var += std::pow(double(s[size_t(n) * C + c]) - m, 2);
        var /= C;
        const double r = 1 / std::sqrt(var + eps), rr = 1 / std::sqrt(ms + eps);
        CHECK(std::abs(mean[n] - m) <= 1e-6 * (1 + std::abs(m)));
        CHECK(std::abs(rstd[n] - r) <= 1e-5 * r);
        CHECK(std::abs(r2[n] - rr) <= 1e-5 * rr);
        for (int c = 0; c < C; ++c) {
          const size_t i = size_t(n) * C + c;
          const double ln = (s[i] - m) * r * w[c] + bias[c], rms = s[i] * rr * w[c];
          CHECK(std::abs(y[i] - ln) <= 1e-5 * (1 + std::abs(ln)));
          CHECK(std::abs(y2[i] - rms) <= 1e-5 * (1 + std::abs(rms)));
        }
      }
      // the same floats as the add followed by the unfused kernels (the trainer's numbers do not move)
      std::vector<float> y0(a.size()), m0(N), r0(N), y20(a.size()), r20(N);
      cf::gpu::emu::layernorm_forward(y0.data(), m0.data(), r0.data(), s.data(), w.data(), bias.data(), N, C, eps);
      cf::gpu::emu::rmsnorm_forward(y20.data(), r20.data(), s.data(), w.data(), N, C, eps);
      CHECK(y == y0);
      CHECK(mean == m0);
      CHECK(rstd == r0);
      CHECK(y2 == y20);
      CHECK(r2 == r20);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

namespace {

// gamma_k = k u / (1 - k u), u = 2^-24: the classic bound on the relative error of a float32 sum
// of k terms (Higham, Accuracy and Stability of Numerical Algorithms, §4.2), against sum |terms|.
double gamma(double k) { return k * std::ldexp(1.0, -24) / (1 - k * std::ldexp(1.0, -24)); }

// A weight gradient of the fused norm backward (dw = the fused kernel's block sums, then
// norm_weight_grad's sum over blocks) against the same float32 terms added two other ways: in
// double (the exact sum up to 1e-16) and in float32 in row order (the unfused trainer's order).
// The fused order is a sum of kNormRows terms per block, then of the blocks: within gamma of
// (kNormRows + blocks) of the exact sum; the row order within gamma of (N + 1).
void check_weight_grad(float fused, float start, const std::vector<float>& terms) {
  double exact = start, mass = std::abs(start);
  float row_order = start;
  for (float t : terms) exact += t, mass += std::abs(t), row_order += t;
  const double k = cf::gpu::kNormRows + cf::gpu::norm_partial_rows(static_cast<int>(terms.size()));
  CHECK(std::abs(fused - exact) <= gamma(k) * mass);
  CHECK(std::abs(fused - row_order) <= (gamma(k) + gamma(double(terms.size()) + 1)) * mass);
}

}  // namespace

TEST_CASE("gpu fused residual + LayerNorm and + RMSNorm backward = the unfused kernels, then the residual adds",
          "[gpu][emu]") {
  // dx: the unfused kernel on dx = dres followed by + dpar (the same arithmetic, up to FMA
  // contraction); the weight gradients: the same terms summed per block of kNormRows rows, within
  // the bound above
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    // N 33 and 70: several blocks of rows, the last one ragged
    for (auto [N, C] : {std::pair{1, 1}, {7, 37}, {33, 130}, {70, 300}}) {
      INFO("N " << N << " C " << C);
      const std::size_t NC = std::size_t(N) * C;
      const auto x = randn(NC, 41), w = randn(C, 42), b = randn(C, 43), dy = randn(NC, 44), dres = randn(NC, 45),
                 dpar = randn(NC, 46);
      std::vector<float> y(NC), mean(N), rstd(N), rr(N);
      cf::gpu::emu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
      cf::gpu::emu::rmsnorm_forward(y.data(), rr.data(), x.data(), w.data(), N, C, 1e-5f);
      // (residual gradient, parallel branch): in place with both, none (a first gradient), out of place
      for (int variant = 0; variant < 3; ++variant) {
        INFO("variant " << variant);
        const bool with_res = variant != 1, with_par = variant == 0, in_place = variant == 0;
        for (bool rms : {false, true}) {
          INFO((rms ? "RMSNorm" : "LayerNorm"));
          // unfused: the kernel accumulating into dx = dres (or 0), then the parallel branch's add
          std::vector<float> dx0 = with_res ? dres : std::vector<float>(NC, 0.0f);
          if (rms)
            cf::gpu::emu::rmsnorm_backward(dx0.data(), nullptr, dy.data(), x.data(), w.data(), rr.data(), N, C);
          else
            cf::gpu::emu::layernorm_backward(dx0.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), mean.data(),
                                             rstd.data(), N, C);
          if (with_par)
            for (std::size_t i = 0; i < NC; ++i) dx0[i] += dpar[i];
          std::vector<float> dx1(NC, 123.0f), part(std::size_t(cf::gpu::norm_partial_rows(N)) * 2 * C, -7.0f);
          if (in_place) dx1 = dres;
          const float* res = !with_res ? nullptr : in_place ? dx1.data() : dres.data();
          const float* par = with_par ? dpar.data() : nullptr;
          if (rms)
            cf::gpu::emu::residual_rmsnorm_backward(dx1.data(), part.data(), res, par, dy.data(), x.data(), w.data(),
                                                    rr.data(), N, C);
          else
            cf::gpu::emu::residual_layernorm_backward(dx1.data(), part.data(), res, par, dy.data(), x.data(), w.data(),
                                                      mean.data(), rstd.data(), N, C);
          // the same expression in the same order; a compiler may contract a product and an add into
          // an FMA in one kernel and not in the other (g++ -march=native and nvcc choose per kernel,
          // also in the row sums): each kernel's at most 8 roundings are within u of the largest
          // intermediate |value|, M = |dres| + |dpar| + r (|w dy| + mean|w dy| + |norm| mean|w dy norm|)
          // (LayerNorm), |dres| + |dpar| + r (|w dy| + |x| r mean|w dy x r|) (RMSNorm)
          double worst = 0;  // max |fused - unfused| / (u M)
          for (int n = 0; n < N; ++n) {
            const double r = rms ? rr[n] : rstd[n];
            double A = 0, B = 0;
            for (int c = 0; c < C; ++c) {
              const std::size_t i = std::size_t(n) * C + c;
              const double norm = rms ? x[i] * r : (x[i] - mean[n]) * r;
              A += std::abs(w[c] * dy[i]) / C, B += std::abs(w[c] * dy[i] * norm) / C;
            }
            for (int c = 0; c < C; ++c) {
              const std::size_t i = std::size_t(n) * C + c;
              const double norm = rms ? x[i] * r : (x[i] - mean[n]) * r;
              const double M = (with_res ? std::abs(dres[i]) : 0.0) + (with_par ? std::abs(dpar[i]) : 0.0) +
                               r * (std::abs(w[c] * dy[i]) + (rms ? 0.0 : A) + std::abs(norm) * B);
              worst = std::max(worst, std::abs(double(dx1[i]) - dx0[i]) / (std::ldexp(1.0, -24) * M));
            }
          }
          CHECK(worst <= 16);
          std::vector<float> dw(C, 0.25f), db(C, -1.0f);
          cf::gpu::emu::norm_weight_grad(dw.data(), rms ? nullptr : db.data(), part.data(), N, C);
          for (int c = 0; c < C; ++c) {
            std::vector<float> tw(N), tb(N);
            for (int n = 0; n < N; ++n) {
              const std::size_t i = std::size_t(n) * C + c;
              const float norm = rms ? x[i] * rr[n] : (x[i] - mean[n]) * rstd[n];
              tw[n] = norm * dy[i], tb[n] = dy[i];
            }
            check_weight_grad(dw[c], 0.25f, tw);
            if (!rms) check_weight_grad(db[c], -1.0f, tb);
          }
          // and the CPU oracle's weight gradients (float32 in row order; 1e-5 as the unfused kernels' test)
          std::vector<float> dxc(NC, 0.0f), dwc(C, 0.25f), dbc(C, -1.0f);
          if (rms)
            cf::nn::rmsnorm_backward(dxc.data(), dwc.data(), dy.data(), x.data(), w.data(), rr.data(), N, C);
          else
            cf::nn::layernorm_backward(dxc.data(), dwc.data(), dbc.data(), dy.data(), x.data(), w.data(), mean.data(),
                                       rstd.data(), N, C);
          CHECK(max_rel(dw, dwc) < 1e-5);
          if (!rms) CHECK(max_rel(db, dbc) < 1e-5);
        }
      }
      // no partial sums (the analysis use: input gradients only): the same dx
      std::vector<float> dx2(NC), dx3(NC);
      cf::gpu::emu::residual_layernorm_backward(dx2.data(), nullptr, dres.data(), nullptr, dy.data(), x.data(),
                                                w.data(), mean.data(), rstd.data(), N, C);
      std::vector<float> part(std::size_t(cf::gpu::norm_partial_rows(N)) * 2 * C);
      cf::gpu::emu::residual_layernorm_backward(dx3.data(), part.data(), dres.data(), nullptr, dy.data(), x.data(),
                                                w.data(), mean.data(), rstd.data(), N, C);
      CHECK(dx2 == dx3);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

TEST_CASE("gpu GELU forward/backward (Thrust on OpenMP) = cf::nn::gelu", "[gpu][thrust]") {
  const std::int64_t n = 10007;
  const auto x = randn(n, 6, 3.0f), dy = randn(n, 7);
  std::vector<float> y0(n), y1(n), dx0(n, 0.5f), dx1(n, 0.5f);
  cf::nn::gelu_forward(y0.data(), x.data(), n);
  cf::gpu::emu::gelu_forward(y1.data(), x.data(), n);
  // 1e-6: Eigen's vectorised float tanh is a rational approximation of a few ulp, tanhf is libm's
  CHECK(max_rel(y1, y0) < 1e-6);
  cf::nn::gelu_backward(dx0.data(), x.data(), dy.data(), n);
  cf::gpu::emu::gelu_backward(dx1.data(), x.data(), dy.data(), n);
  // 1e-5: the derivative's 1 - tanh^2 amplifies the two tanh approximations' ulp differences
  CHECK(max_rel(dx1, dx0) < 1e-5);
}

TEST_CASE("gpu layernorm at another eps and RMSNorm forward/backward = cf::nn (ragged N, C)", "[gpu][emu]") {
  for (auto sched : kSchedules) {
    cf::gpu::emu::set_schedule(sched);
    for (auto [N, C] : {std::pair{1, 1}, {7, 37}, {13, 130}, {5, 300}}) {
      // small inputs (sd 0.05): mean x^2 ~ 2.5e-3, so eps 1e-3 moves every output
      const auto x = randn(size_t(N) * C, 11, 0.05f), w = randn(C, 12), b = randn(C, 13), dy = randn(size_t(N) * C, 14);
      const double eps = 1e-3;
      std::vector<float> y0(x.size()), m0(N), r0(N), y1(x.size()), m1(N), r1(N);
      cf::nn::layernorm_forward(y0.data(), m0.data(), r0.data(), x.data(), w.data(), b.data(), N, C, eps);
      cf::gpu::emu::layernorm_forward(y1.data(), m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C, float(eps));
      CHECK(max_rel(y1, y0) < 1e-5);
      CHECK(max_rel(r1, r0) < 1e-5);
      cf::nn::rmsnorm_forward(y0.data(), r0.data(), x.data(), w.data(), N, C, eps);
      cf::gpu::emu::rmsnorm_forward(y1.data(), r1.data(), x.data(), w.data(), N, C, float(eps));
      CHECK(max_rel(y1, y0) < 1e-5);
      CHECK(max_rel(r1, r0) < 1e-5);
      std::vector<float> dx0(x.size(), 0.5f), dw0(C, 0.25f), dx1 = dx0, dw1 = dw0;
      cf::nn::rmsnorm_backward(dx0.data(), dw0.data(), dy.data(), x.data(), w.data(), r0.data(), N, C);
      cf::gpu::emu::rmsnorm_backward(dx1.data(), dw1.data(), dy.data(), x.data(), w.data(), r0.data(), N, C);
      CHECK(max_rel(dx1, dx0) < 1e-5);
      CHECK(max_rel(dw1, dw0) < 1e-5);
    }
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
}

TEST_CASE("gpu erf GELU and SwiGLU forward/backward (Thrust on OpenMP) = cf::nn", "[gpu][thrust]") {
  const std::int64_t N = 37, F = 53, n = N * F;
  const auto x = randn(n, 15, 3.0f), h = randn(2 * n, 16, 3.0f), dy = randn(n, 17);
  std::vector<float> y0(n), y1(n), dx0(n, 0.5f), dx1(n, 0.5f);
  // 1e-6: std::erf and erff against each other, x / sqrt 2 rounded the same way
  cf::nn::gelu_erf_forward(y0.data(), x.data(), n);
  cf::gpu::emu::gelu_erf_forward(y1.data(), x.data(), n);
  CHECK(max_rel(y1, y0) < 1e-6);
  cf::nn::gelu_erf_backward(dx0.data(), x.data(), dy.data(), n);
  cf::gpu::emu::gelu_erf_backward(dx1.data(), x.data(), dy.data(), n);
  CHECK(max_rel(dx1, dx0) < 1e-6);
  cf::nn::swiglu_forward(y0.data(), h.data(), N, F);
  cf::gpu::emu::swiglu_forward(y1.data(), h.data(), N, F);
  CHECK(max_rel(y1, y0) < 1e-6);
  std::vector<float> dh0(2 * n, 0.5f), dh1 = dh0;
  cf::nn::swiglu_backward(dh0.data(), h.data(), dy.data(), N, F);
  cf::gpu::emu::swiglu_backward(dh1.data(), h.data(), dy.data(), N, F);
  CHECK(max_rel(dh1, dh0) < 1e-6);
}

TEST_CASE("gpu AdamW update (Thrust on OpenMP) = cf::nn::adamw_step over a model layout", "[gpu][thrust]") {
  cf::nn::ModelConfig c;
  c.vocab_size = 17, c.block_size = 8, c.n_layer = 2, c.n_head = 2, c.d_model = 8;
  c.layers.assign(2, cf::nn::LayerConfig{});
  const cf::nn::ParamLayout layout = cf::nn::make_layout(c);
  const auto n = static_cast<std::size_t>(layout.total);
  std::vector<float> p0 = randn(n, 8), g = randn(n, 9, 0.1f);
  std::vector<float> p1 = p0, m1(n, 0), v1(n, 0);
  cf::nn::AdamWState st;
  cf::nn::AdamWConfig cfg;
  for (int step = 1; step <= 3; ++step) {
    const double lr = 1e-2 / step;
    cf::nn::adamw_step(p0, g, st, layout, lr, cfg);
    for (const auto& t : layout.tensors) {
      cf::gpu::AdamWUpdate u{float(lr),
                             float(cfg.beta1),
                             float(cfg.beta2),
                             float(1 - std::pow(cfg.beta1, step)),
                             float(1 - std::pow(cfg.beta2, step)),
                             float(cfg.eps),
                             t.decay ? float(cfg.weight_decay) : 0.0f};
      cf::gpu::emu::adamw_update(p1.data() + t.offset, g.data() + t.offset, m1.data() + t.offset, v1.data() + t.offset,
                                 t.size, u);
    }
  }
  CHECK(max_rel(p1, p0) == 0.0);  // same float operations in the same order per element
  CHECK(max_rel(m1, st.m) == 0.0);
  CHECK(max_rel(v1, st.v) == 0.0);
}

TEST_CASE("gpu affine scan by key = the sequential recurrence, blocked scans agree (associativity)", "[gpu][thrust]") {
  // S_j = a_j S_{j-1} + c_j per segment: the structured rollout's suffix recurrences (lib/rollout)
  const std::int64_t n = 5000;
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> ua(0.0, 1.0), uc(-1.0, 1.0);
  std::vector<int> keys(n);
  std::vector<cf::gpu::Affine> in(n), out(n);
  for (std::int64_t i = 0; i < n; ++i) {
    keys[i] = static_cast<int>(i / 977);  // ragged segments (heads)
    in[i] = {ua(gen), uc(gen)};
  }
  cf::gpu::emu::affine_scan_by_key(keys.data(), in.data(), out.data(), n);
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (i == 0 || keys[i] != keys[i - 1]) s = 0;
    s = in[i].a * s + in[i].c;
    REQUIRE(std::abs(out[i].c - s) <= 1e-12 * (1 + std::abs(s)));
  }
  // Parallel scans regroup the operator: combine chunk-local scans with chunk prefixes for several
  // chunk sizes and compare with the sequential result (the CPU Thrust scan is sequential).
  for (int chunk : {1, 3, 64, 1000}) {
    const cf::gpu::AffineCompose op;
    std::vector<cf::gpu::Affine> local(in.begin(), in.begin() + 977);
    for (std::size_t i = 1; i < local.size(); ++i) local[i] = (i % chunk == 0) ? in[i] : op(local[i - 1], in[i]);
    cf::gpu::Affine prefix{1, 0};
    for (std::size_t i = 0; i < local.size(); ++i) {
      if (i % chunk == 0 && i > 0) prefix = op(prefix, local[i - 1]);
      const cf::gpu::Affine full = i < static_cast<std::size_t>(chunk) ? local[i] : op(prefix, local[i]);
      REQUIRE(std::abs(full.c - out[i].c) <= 1e-12 * (1 + std::abs(out[i].c)));
      REQUIRE(std::abs(full.a - out[i].a) <= 1e-12 * (1 + std::abs(out[i].a)));
    }
  }
}

TEST_CASE("gpu RoPE (Thrust on OpenMP) = cf::nn::rope_apply, forward and inverse, partial rotary", "[gpu][thrust]") {
  for (auto [S, T, dh, rot] : {std::tuple{1, 1, 2, 0}, {6, 45, 8, 0}, {3, 77, 40, 16}, {2, 5, 72, 0}}) {
    const int ld = dh + 3;  // rows padded: the row stride is honoured
    const auto x = randn(size_t(S) * T * ld, 21);
    for (bool inverse : {false, true}) {
      std::vector<float> want = x, got = x;
      for (int s = 0; s < S; ++s) cf::nn::rope_apply(want.data() + size_t(s) * T * ld, T, dh, ld, inverse, rot);
      cf::gpu::emu::rope_apply(got.data(), S, T, dh, ld, std::int64_t(T) * ld, inverse, rot);
      INFO("S = " << S << ", T = " << T << ", dh = " << dh << ", rot = " << rot << ", inverse = " << inverse);
      // same double angles, same float rotation: equal up to 1e-6 (libm differences only)
      CHECK(max_rel(got, want) < 1e-6);
    }
  }
  std::vector<float> x(8);
  REQUIRE_THROWS_WITH(cf::gpu::emu::rope_apply(x.data(), 1, 1, 8, 8, 8, false, 3), Catch::Contains("even"));
}
