// ELU+1 linear attention in its prefix-sum form (issue 12; docs/spec.md §3) against the dense T x T oracle
// of cf/nn/detail/attention.hpp (HeadSpec::linear), an independent computation of the same
// definition: out_i = sum_{j<=i} phi(q_i).phi(k_j) v_j / sum_{j<=i} phi(q_i).phi(k_j). Lengths
// cross the 64-row chunks of the prefix-sum kernel (1, 63, 64, 65, 150, 200), so the carried state
// S, z and the reverse suffix sums R, r are exercised. The backward is also checked against
// central differences in double.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cf/nn/detail/activations.hpp"
#include "cf/nn/detail/attention.hpp"
#include "cf/nn/detail/attention_linear.hpp"
#include "cf/nn/model.hpp"

using namespace cf::nn;

namespace {

// q, k, v of one head interleaved in rows of width ld = 3 dh + 1 (a strided layout like qkv's);
// entries in [-2, 2] so that both branches of elu + 1 are hit.
template <class T>
std::vector<T> random_qkv(int Tn, int dh, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<T> x(static_cast<std::size_t>(Tn) * (3 * dh + 1));
  for (auto& e : x) e = T(u(g));
  return x;
}

// max |a - b| / max(scale, max |a|): gradients are compared relative to the largest entry of the
// whole q, k, v gradient (with T = 1, or d_head = 1, dQ is exactly 0 and only round-off remains)
template <class T>
double rel_err(const std::vector<T>& a, const std::vector<T>& b, double scale = 1e-30) {
  REQUIRE(a.size() == b.size());
  double err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(double(a[i])));
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));
  }
  return err / scale;
}

struct Grads {
  double y = 0, den = 0, dq = 0, dk = 0, dv = 0;
};

// Prefix-sum kernel vs the dense oracle on one head: outputs, denominators and dQ, dK, dV for a
// random upstream gradient.
template <class T>
Grads compare_head(int Tn, int dh) {
  const std::int64_t ld = 3 * dh + 1, ldy = dh + 2;
  const std::vector<T> x = random_qkv<T>(Tn, dh, 17 + Tn);
  const T *q = x.data(), *k = x.data() + dh, *v = x.data() + 2 * dh;
  std::mt19937_64 g(5 + Tn);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> dy(static_cast<std::size_t>(Tn) * ldy);
  for (auto& e : dy) e = T(u(g));
  // dense oracle
  detail::HeadSpec spec;
  spec.linear = true;
  std::vector<T> yd(dy.size(), T(0)), P(static_cast<std::size_t>(Tn) * Tn), rs(Tn);
  detail::attention_head_forward<T>(spec, Tn, dh, q, k, v, ld, yd.data(), ldy, nullptr, nullptr, P.data(), rs.data(),
                                    nullptr);
  std::vector<T> gd(x.size(), T(0));
  detail::attention_head_backward<T>(spec, Tn, dh, q, k, v, ld, gd.data(), gd.data() + dh, gd.data() + 2 * dh,
                                     dy.data(), ldy, P.data(), rs.data(), nullptr, nullptr);
  // prefix sums
  std::vector<T> yp(dy.size(), T(0)), den(Tn);
  detail::linear_head_forward<T>(Tn, dh, q, k, v, ld, yp.data(), ldy, den.data());
  std::vector<T> gp(x.size(), T(0));
  detail::linear_head_backward<T>(Tn, dh, q, k, v, ld, yp.data(), dy.data(), ldy, den.data(), gp.data(), gp.data() + dh,
                                  gp.data() + 2 * dh);
  auto cols = [&](const std::vector<T>& a, int c0) {  // one of the q / k / v column blocks
    std::vector<T> out;
    for (int t = 0; t < Tn; ++t)
      for (int e = 0; e < dh; ++e) out.push_back(a[static_cast<std::size_t>(t) * ld + c0 + e]);
    return out;
  };
  auto ycols = [&](const std::vector<T>& a) {
    std::vector<T> out;
    for (int t = 0; t < Tn; ++t)
      for (int e = 0; e < dh; ++e) out.push_back(a[static_cast<std::size_t>(t) * ldy + e]);
    return out;
  };
  Grads r;
  r.y = rel_err(ycols(yd), ycols(yp));
  r.den = rel_err(rs, den);
  double gmax = 1e-30;
  for (int t = 0; t < Tn; ++t)
    for (int c = 0; c < 3 * dh; ++c) gmax = std::max(gmax, std::abs(double(gd[static_cast<std::size_t>(t) * ld + c])));
  r.dq = rel_err(cols(gd, 0), cols(gp, 0), gmax);
  r.dk = rel_err(cols(gd, dh), cols(gp, dh), gmax);
  r.dv = rel_err(cols(gd, 2 * dh), cols(gp, 2 * dh), gmax);
  // untouched padding: the kernel writes only its dh columns
  for (int t = 0; t < Tn; ++t) CHECK(gp[static_cast<std::size_t>(t) * ld + 3 * dh] == T(0));
  return r;
}

}  // namespace

TEST_CASE(
    "ELU+1 linear attention: the prefix-sum form equals the dense oracle (outputs, denominators, dQ, dK, dV) at "
    "ragged T",
    "[nn][linear]") {
  for (int Tn : {1, 63, 64, 65, 150, 200})
    for (int dh : {1, 8, 16}) {
      INFO("T " << Tn << " dh " << dh);
      const Grads d = compare_head<double>(Tn, dh);
      CHECK(d.y < 1e-12);
      CHECK(d.den < 1e-12);
      CHECK(d.dq < 1e-12);
      CHECK(d.dk < 1e-12);
      CHECK(d.dv < 1e-12);
      const Grads f = compare_head<float>(Tn, dh);  // float32 round-off over sums of up to 200 terms
      CHECK(f.y < 1e-5);
      CHECK(f.den < 1e-5);
      CHECK(f.dq < 1e-4);
      CHECK(f.dk < 1e-4);
      CHECK(f.dv < 1e-4);
    }
}

TEST_CASE("ELU+1 linear attention: the prefix-sum backward matches finite differences in double (T = 150)",
          "[nn][linear][grad]") {
  // loss = sum_i w_i . out_i with fixed random w: d loss / d out = w
  const int Tn = 150, dh = 4;
  const std::int64_t ld = 3 * dh + 1;
  std::vector<double> x = random_qkv<double>(Tn, dh, 23);
  std::mt19937_64 g(29);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> w(static_cast<std::size_t>(Tn) * dh);
  for (auto& e : w) e = u(g);
  std::vector<double> y(w.size()), den(Tn);
  auto loss = [&]() {
    detail::linear_head_forward<double>(Tn, dh, x.data(), x.data() + dh, x.data() + 2 * dh, ld, y.data(), dh,
                                        den.data());
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
    return s;
  };
  loss();
  std::vector<double> grad(x.size(), 0.0);
  detail::linear_head_backward<double>(Tn, dh, x.data(), x.data() + dh, x.data() + 2 * dh, ld, y.data(), w.data(), dh,
                                       den.data(), grad.data(), grad.data() + dh, grad.data() + 2 * dh);
  double gmax = 1e-12, err = 0;
  for (double e : grad) gmax = std::max(gmax, std::abs(e));
  const double h = 1e-5;
  // every q, k, v entry of the first row, the chunk boundaries 63/64/65/127/128 and the last row
  for (int t : {0, 1, 62, 63, 64, 65, 127, 128, 129, 149})
    for (int c = 0; c < 3 * dh; ++c) {
      const std::size_t i = static_cast<std::size_t>(t) * ld + c;
      const double x0 = x[i];
      x[i] = x0 + h;
      const double lp = loss();
      x[i] = x0 - h;
      const double lm = loss();
      x[i] = x0;
      err = std::max(err, std::abs((lp - lm) / (2 * h) - grad[i]));
    }
  CHECK(err / gmax < 1e-7);
}

TEST_CASE("ELU+1 linear layers train without any T x T buffer (prefix-sum path), the dense path keeps it",
          "[nn][linear]") {
  ModelConfig c;
  c.vocab_size = 13;
  c.block_size = 300;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  LayerConfig proto;
  c.layers = parse_schedule("linear,linear", 2, proto);
  const Model<float> m = init_model<float>(c, 1);
  const int Tn = 300;
  std::vector<std::int32_t> tok(Tn), tgt(Tn);
  for (int i = 0; i < Tn; ++i) tok[i] = tgt[i] = (i * 5) % 13;
  std::vector<float> grad(m.params.size(), 0.f);
  for (AttentionPath path : {AttentionPath::Tiled, AttentionPath::Dense}) {
    Workspace<float> ws;
    ws.set_attention_path(path);
    forward_backward<float>(m, tok.data(), tgt.data(), 1, Tn, &grad, ws);
    std::size_t tt = 0;
    for (const auto& P : ws.get().P) tt += P.size();
    if (path == AttentionPath::Tiled)
      CHECK(tt == 0);
    else
      CHECK(tt == static_cast<std::size_t>(2) * 2 * Tn * Tn);
  }
}
