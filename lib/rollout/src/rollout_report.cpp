#include "cf/rollout/rollout_report.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/rollout/jacobian_bound.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {
namespace {

using output::fmt;

// Summary table of variant profiles (the layout other tools extend with more columns).
output::Table variant_table(const std::vector<VariantProfile>& vs, const Eigen::VectorXd& influence,
                            const std::string& title, nlohmann::json& summary) {
  output::Table t;
  t.title = title;
  t.header = {"variant", "p_0", "p_n-1", "argmin", "min", "primacy", "recency", "seconds"};
  if (influence.size()) {
    t.header.push_back("spearman");
    t.header.push_back("W1/(n-1)");
  }
  for (const auto& v : vs) {
    auto [row, js] = variant_summary_row(v.label, v.p, v.seconds, influence);
    t.add_row(row);
    summary[v.key] = js;
  }
  return t;
}

// The per-position table of the CSV format: position, then one column per variant.
output::Table distributions_table(const RolloutSource& s, const std::vector<VariantProfile>& vs) {
  output::Table d;
  d.title = "distributions";
  d.header = {"position"};
  for (const auto& v : vs) d.header.push_back(v.key);
  for (long j = 0; j < s.n; ++j) {
    std::vector<std::string> row = {output::fmt_int(j)};
    for (const auto& v : vs) row.push_back(fmt(v.p(j), 10));
    d.add_row(row);
  }
  return d;
}

}  // namespace

output::Report rollout_report(const RolloutSource& s, const std::vector<VariantProfile>& vs,
                              const Eigen::VectorXd& influence, bool csv) {
  output::Report rep;
  nlohmann::json summary = nlohmann::json::object(), variants = nlohmann::json::object();
  rep.tables.push_back(variant_table(vs, influence,
                                     "Last-row rollout p_j = P(L)[n-1, j], " + s.name + ", n = " + std::to_string(s.n) +
                                         ", L = " + std::to_string(s.L) +
                                         " (Position bias (Herasimchyk et al.), Eq. 3)",
                                     summary));
  for (const auto& v : vs) variants[v.key] = std::vector<double>(v.p.data(), v.p.data() + v.p.size());
  rep.body = {{"summary", summary}, {"variants", variants}};
  rep.notes.push_back("primacy / recency = mass of the first / last ceil(n/10) positions");
  if (vs.size() < 3)
    rep.notes.push_back(
        "variant (c) omitted: no content model (--content none, a config without "
        "content, kernel file or capture)");
  if (csv) rep.tables.push_back(distributions_table(s, vs));
  return rep;
}

plot::LinePlot rollout_plot(const RolloutSource& s, const std::vector<VariantProfile>& vs,
                            const Eigen::VectorXd& influence, bool log_y) {
  plot::LinePlot lp;
  lp.title = "Rollout of the last position, " + s.name + " (n = " + std::to_string(s.n) + ")";
  lp.xlabel = "input position j";
  lp.log_y = log_y;
  // linear: the profiles rise at both ends; log: (a) falls from the top left, the rest stay on top
  lp.key = lp.log_y ? "bottom left" : "top center";
  lp.ylabel =
      lp.log_y ? "p_j (influence on the next-token position, log scale)" : "p_j (influence on the next-token position)";
  if (!lp.log_y && vs.size() > 1) {
    // Linear, as the published figures: (a) collapses onto token 0 (p_0 near 1) and would flatten
    // (b), (c) to the axis, so the range follows the residual variants and (a) is clipped.
    double top = 0;
    for (std::size_t k = 1; k < vs.size(); ++k) top = std::max(top, vs[k].p.maxCoeff());
    if (influence.size()) top = std::max(top, influence.maxCoeff());
    lp.y_min = 0;
    lp.y_max = 1.1 * top;  // the plot names the curves it clips (cf::plot::clipped_series)
  }
  for (const auto& v : vs) {
    plot::Series se{v.label, {}, {}};
    for (long j = 0; j < s.n; ++j) se.x.push_back(j), se.y.push_back(v.p(j));
    lp.series.push_back(se);
  }
  if (influence.size()) {
    plot::Series se{"measured influence", {}, {}};
    for (long j = 0; j < s.n; ++j) se.x.push_back(j), se.y.push_back(influence(j));
    lp.series.push_back(se);
  }
  return lp;
}

nlohmann::json rollout_params(const RolloutSource& s, bool dense_path) {
  nlohmann::json params = s.params;
  params["path"] = s.structured ? (dense_path ? "dense" : "structured O(L H n)") : "dense (" + s.kernel_source + ")";
  return params;
}

void write_matrix_csv(const std::string& path, const RowMatrix& M) {
  std::ostringstream os;
  os.precision(17);
  for (long i = 0; i < M.rows(); ++i)
    for (long j = 0; j < M.cols(); ++j) os << M(i, j) << (j + 1 < M.cols() ? "," : "\n");
  write_file_atomic(path, os.str());
}

std::string write_rollout_matrix(const RolloutSource& s, const std::string& path, const ProductBackend* backend) {
  require(s.n <= 2048, "--matrix writes the full n x n rollout; n <= 2048 required, got ", s.n);
  const auto ks = source_kernels(s, false, 2048);
  write_matrix_csv(path, rollout_matrix_dense([&](int l) { return ks[l]; }, s.alpha, s.n, backend));
  return "full rollout matrix P(L) of variant (b) written to " + path;
}

nlohmann::json sweep_params(const RolloutSource& s, const std::vector<long>& ns) {
  nlohmann::json params = s.params;
  params.erase("n");
  params["n_list"] = ns;
  params["path"] = "structured O(L H n)";
  return params;
}

output::Report sweep_report(const RolloutSource& s, const std::vector<SweepRow>& rows) {
  output::Report rep;
  output::Table t;
  t.title =
      "Context-length sweep of the last-row rollout, " + s.name + ", L = " + std::to_string(s.L) +
      " (Position bias (Herasimchyk et al.), Eq. 3; primacy / recency = mass of the first / last ceil(n/10) positions)";
  t.header = {"variant", "n", "p_0", "p_n-1", "primacy", "recency", "argmin", "min", "seconds"};
  nlohmann::json js = nlohmann::json::array();
  for (const auto& r : rows) {
    const auto& m = r.summary;
    // the rollout table's styles: masses 4 significant digits, integers with separators
    t.add_row({r.label, output::fmt_int(r.n), fmt(m.first, 4), fmt(m.last, 4), fmt(m.primacy, 4), fmt(m.recency, 4),
               output::fmt_int(m.argmin), fmt(m.min, 4), fmt(r.seconds, 3)});
    js.push_back({{"variant", r.key},
                  {"n", r.n},
                  {"p_first", m.first},
                  {"p_last", m.last},
                  {"primacy_mass", m.primacy},
                  {"recency_mass", m.recency},
                  {"argmin", m.argmin},
                  {"min", m.min},
                  {"seconds", r.seconds}});
  }
  rep.tables.push_back(t);
  rep.body = {{"rows", js}};
  return rep;
}

output::Report monotonicity_report(const RolloutSource& s, const ProductBackend* backend) {
  output::Report rep;
  output::Table t;
  t.title =
      "Stochastic monotonicity of Abar(l) (Position bias (Herasimchyk et al.), Assumption 4.1 / Definition A.1), n = " +
      std::to_string(s.n) + ", tolerance 1e-10";
  t.header = {"kernel", "layer", "triples", "violation rate", "mean gap", "expected shortfall", "max gap"};
  nlohmann::json rows = nlohmann::json::array();
  auto add = [&](const std::string& what, const std::vector<RowMatrix>& ks, bool per_layer) {
    for (int l = 0; l < (per_layer ? s.L : 1); ++l) {
      const auto st = monotonicity_stats(ks[l], 1e-10, backend);
      t.add_row({what,
                 per_layer                                            ? std::to_string(l + 1)
                 : output::number_style() == output::NumberStyle::Raw ? "0"
                                                                      : "all",
                 output::fmt_int(st.triples), fmt(st.violation_rate, 4), fmt(st.mean_gap, 4),
                 fmt(st.expected_shortfall, 4), fmt(st.max_gap, 4)});
      rows.push_back({{"kernel", what},
                      {"layer", per_layer ? l + 1 : 0},
                      {"triples", st.triples},
                      {"violation_rate", st.violation_rate},
                      {"mean_gap", st.mean_gap},
                      {"expected_shortfall", st.expected_shortfall},
                      {"max_gap", st.max_gap}});
    }
  };
  const auto plain = source_kernels(s, false);
  const bool per_layer_plain = !s.structured || !s.base.layer_slopes.empty() || !s.base.layer_head_weights.empty();
  add(s.structured ? "ALiBi, no content" : s.kernel_source, plain, per_layer_plain);
  if (s.structured && s.delta.size() > 0)
    add("ALiBi + content", source_kernels(s, true), s.delta.rows() > 1 || per_layer_plain);
  rep.tables.push_back(t);
  rep.body = {{"kernels", rows}};
  return rep;
}

JacobianOutcome jacobian_report(const RolloutSource& s, double C, long d, const ProductBackend* backend) {
  const auto ks = source_kernels(s, true);
  const auto b = jacobian_bound(ks, C, backend);
  JacobianOutcome out;
  output::Table t;
  t.title = "Jacobian bound (Runway (Lee & Clark), Theorem 3.3): C^r [(I + A(r)) ... (I + A(1))]_{d,s}, d = " +
            std::to_string(d) + ", r = " + std::to_string(ks.size()) + " layers, C = " + fmt(C);
  t.header = {"s", "bound", "self term", "gate x runway", "gate share"};
  nlohmann::json rows = nlohmann::json::array();
  plot::LinePlot& lp = out.plot;
  lp.title = "Jacobian bound (Runway (Lee & Clark) Theorem 3.3) of target d = " + std::to_string(d) + ", " + s.name;
  lp.xlabel = "source position s";
  lp.ylabel = "bound entry [(I + A(r)) ... (I + A(1))]_{d,s} (C^r included)";
  lp.log_y = true;  // entries span many decades (they grow like 2^r at s = 0); zeros are not drawn
  plot::Series sb{"bound", {}, {}}, ss{"self term", {}, {}}, sg{"gate x runway", {}, {}};
  for (long src = 0; src <= d; ++src) {
    const double tot = b.bound(d, src), self = b.self_term(d, src), gate = b.gate_term(d, src);
    t.add_row({output::fmt_int(src), fmt(tot, 6), fmt(self, 6), fmt(gate, 6), fmt(tot > 0 ? gate / tot : 0, 4)});
    rows.push_back({{"s", src}, {"bound", tot}, {"self_term", self}, {"gate_term", gate}});
    for (auto [se, y] : {std::pair{&sb, tot}, {&ss, self}, {&sg, gate}}) se->x.push_back(src), se->y.push_back(y);
  }
  lp.series = {sb, ss, sg};
  out.report.tables.push_back(t);
  out.report.body = {{"rows", rows}};
  out.report.notes.push_back(
      "kernels: the model's Abar(l) (content included) or --kernel-file; entries can grow like 2^r");
  return out;
}

}  // namespace cf::rollout
