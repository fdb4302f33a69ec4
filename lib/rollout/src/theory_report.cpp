// Reports of `rollout verify` and `rollout dichotomy` (cf/rollout/theory_report.hpp).
#include "cf/rollout/theory_report.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/variants.hpp"

namespace cf::rollout {

using output::fmt;

std::vector<RowMatrix> random_monotone_kernels(std::mt19937_64& rng, int L, long n) {
  // Mixtures of geometric (ALiBi) heads are stochastically monotone: each head is, and prefix
  // masses average. Random slopes and weights per layer.
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<RowMatrix> ks;
  for (int l = 0; l < L; ++l) {
    AlibiModel m;
    for (int h = 0; h < 3; ++h)
      m.slopes.push_back(std::pow(10.0, -2 + 2.3 * U(rng))), m.head_weights.push_back(U(rng) + 0.05);
    ks.push_back(alibi_kernel_dense(m, 0, n));
  }
  return ks;
}

VerifyOutcome verify_report(const RolloutSource& s, int seeds, const ProductBackend* products,
                            const LastRowBackend* last_rows) {
  require(s.structured, "verify needs an ALiBi model (a preset or --model-config)");
  VerifyOutcome out;
  output::Report& rep = out.report;
  output::Table t;
  t.title =
      "Finite-depth forces (Position bias (Herasimchyk et al.), Props. 4.2-4.5): max violation of the claimed "
      "inequality, n = " +
      std::to_string(s.n) + " (ok when <= 1e-12)";
  t.header = {"check", "kernels", "hypotheses", "max violation", "ok"};
  nlohmann::json rows = nlohmann::json::array();
  bool& all_ok = out.all_ok;
  auto add = [&](const std::string& what, const std::string& kern, const PropositionCheck& c) {
    const bool ok = !c.hypotheses_hold || c.max_violation <= kVerifyTolerance;
    all_ok = all_ok && ok;
    t.add_row({what, kern, c.hypotheses_hold ? "hold" : "fail (not claimed)", fmt(c.max_violation, 4),
               ok ? "ok" : "VIOLATED"});
    rows.push_back({{"check", what},
                    {"kernels", kern},
                    {"hypotheses_hold", c.hypotheses_hold},
                    {"max_violation", c.max_violation},
                    {"ok", ok}});
  };
  const auto plain = source_kernels(s, false);
  const Eigen::VectorXd a = s.alpha;
  add("Prop. 4.2 primacy drift", s.name, check_primacy_drift(plain, a, products));
  add("Prop. 4.3 residual => recency", s.name, check_residual_recency(plain, 0.5 * a, a, products));
  {
    std::vector<RowMatrix> nob;
    for (int l = 0; l < s.L; ++l) {
      AlibiModel flat = s.base;
      flat.slopes.assign(flat.slopes.size(), 0.0);
      flat.layer_slopes.clear();
      if (!s.base.layer_head_weights.empty())
        flat.head_weights = s.base.layer_head_weights[l], flat.layer_head_weights.clear();
      nob.push_back(alibi_kernel_dense(flat, 0, s.n));
    }
    add("Prop. 4.4 ALiBi bias => recency", s.name, check_bias_recency(plain, nob, a, products));
  }
  for (int sign : {+1, -1}) {
    RolloutSource sc = s;
    sc.delta = Eigen::MatrixXd::Constant(1, 1, 2.0 * sign);
    add(sign > 0 ? "Prop. 4.5 delta = +2 => recency" : "Prop. 4.5 delta = -2 => primacy", s.name,
        check_diagonal_content(source_kernels(sc, true), plain, a, sign, products));
  }
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> U(0, 1);
  for (int seed = 0; seed < seeds; ++seed) {
    const int L = 6;
    const auto ks = random_monotone_kernels(rng, L, s.n);
    Eigen::VectorXd al(L), al2(L);
    for (int l = 0; l < L; ++l) al(l) = U(rng), al2(l) = al(l) + (1 - al(l)) * U(rng);
    const std::string kern = "random monotone #" + std::to_string(seed + 1);
    add("Prop. 4.2 primacy drift", kern, check_primacy_drift(ks, al, products));
    add("Prop. 4.3 residual => recency", kern, check_residual_recency(ks, al, al2, products));
  }
  {  // structured vs dense agreement on the model, entry by entry (relative)
    const Eigen::VectorXd f = rollout_profile(s, a, true, s.n, false, last_rows),
                          d = rollout_profile(s, a, true, s.n, true, last_rows);
    PropositionCheck c;
    for (long j = 0; j < s.n; ++j)
      if (d(j) > 0)
        c.max_violation = std::max(c.max_violation, std::abs(f(j) - d(j)) / d(j));
      else if (f(j) != 0)
        c.max_violation = std::max(c.max_violation, 1.0);
    add("structured vs dense path (entrywise relative)", s.name + (s.delta.size() ? " + content" : ""), c);
  }
  rep.tables.push_back(t);
  rep.body = {{"checks", rows}, {"all_ok", all_ok}};
  return out;
}

DichotomyOutcome dichotomy_report(const RowMatrix& K, const std::vector<AlphaSpec>& specs, const std::string& name,
                                  long depth, double eps) {
  require(depth >= 1, "dichotomy_report: depth must be >= 1 (got ", depth, ")");
  const long n = K.rows();
  DichotomyOutcome out;
  output::Report& rep = out.report;
  output::Table t;
  t.title =
      "Infinite-depth dichotomy (Position bias (Herasimchyk et al.), Theorem 5.4), last row i = n-1, layer-1 kernel "
      "of " +
      name + ", n = " + std::to_string(n) + ", 50-digit arithmetic";
  t.header = {"schedule", "depth", "sum alpha", "P[i,i]", ">= bound (i)", "1 - P[i,0]", "<= bound (ii)", "holds"};
  nlohmann::json rows = nlohmann::json::array();
  bool& all = out.all_hold;
  plot::Panels& fig = out.plot;
  fig.title = "Theorem 5.4 at depth, " + name + " (n = " + std::to_string(n) +
              "): y = -log10(mass), the decades below 1 (higher = smaller mass), log scale; one panel per schedule";
  for (const AlphaSpec& sp : specs) {
    auto alpha = [&](long l) { return alpha_at(sp, l); };
    plot::LinePlot lp;
    lp.title = "schedule " + sp.text;
    lp.xlabel = "log10 depth";
    lp.ylabel = "-log10 mass (log scale)";
    lp.log_y = true;
    lp.key = "below";
    plot::Series self{"P[i,i]", {}, {}}, b1{"bound (i): P[i,i] >= it", {}, {}}, off{"1 - P[i,0]", {}, {}},
        b2{"bound (ii): 1 - P[i,0] <= it", {}, {}};
    b1.dashed = b2.dashed = true;
    bool exact_one = false;  // mass 1 (-log10 = 0) has no place on a log axis: said in the title
    for (long d = 10;; d = std::min(d * 10, depth)) {
      const auto r = dichotomy(K, alpha, d, n - 1, eps);
      const bool holds = r.holds_i && r.holds_ii;
      all = all && holds;
      t.add_row({sp.text, output::fmt_int(d), fmt(r.sum_alpha, 6), r.self_mass, r.bound_i, r.off_zero_mass, r.bound_ii,
                 holds ? "yes" : "NO"});
      rows.push_back({{"schedule", sp.text},
                      {"depth", d},
                      {"eps", r.eps},
                      {"sum_alpha", r.sum_alpha},
                      {"self_mass", r.self_mass},
                      {"bound_i", r.bound_i},
                      {"off_zero_mass", r.off_zero_mass},
                      {"bound_ii", r.bound_ii},
                      {"log10_off_zero_mass", r.log10_off_zero},
                      {"holds", holds}});
      const double x = std::log10(static_cast<double>(d));
      for (auto [se, y] : {std::pair{&self, r.log10_self_mass},
                           {&b1, r.log10_bound_i},
                           {&off, r.log10_off_zero},
                           {&b2, r.log10_bound_ii}})
        if (std::isfinite(y) && -y > 0)
          se->x.push_back(x), se->y.push_back(-y);
        else if (y == 0)
          exact_one = true;
      if (d >= depth) break;
    }
    for (auto* se : {&self, &b1, &off, &b2})
      if (!se->x.empty()) lp.series.push_back(*se);
    if (exact_one) lp.title += " (points of mass exactly 1 are off the axis)";
    fig.panels.push_back(lp);
  }
  rep.tables.push_back(t);
  rep.body = {{"rows", rows}};
  rep.notes.push_back(
      "eps = smallest admissible kernel weight (Lemma 5.3) unless --eps is given; (i) P[i,i] >= "
      "prod(1-(1-eps)alpha_l) matters when sum alpha < inf, (ii) 1-P[i,0] <= exp(-eps sum alpha) "
      "-> 0 when sum alpha = inf (values far below 1e-308 are exact here)");
  return out;
}

}  // namespace cf::rollout
