// Report and plot of `rollout flow` (cf/rollout/flow_report.hpp).
#include "cf/rollout/flow_report.hpp"

#include <algorithm>
#include <cmath>

#include "cf/rollout/agreement.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

using output::fmt;

namespace {
std::vector<double> vec(const Eigen::VectorXd& v) { return std::vector<double>(v.data(), v.data() + v.size()); }
}  // namespace

VariantProfile flow_variant(const FlowResult& fr) { return {"flow", "(f) attention flow", fr.profile, fr.seconds}; }

output::Report flow_report(const RolloutSource& s, const std::vector<VariantProfile>& vs_in, const FlowResult& fr,
                           FlowAlgorithm algorithm, const Eigen::VectorXd& influence, bool csv) {
  const long n = fr.flow.size(), t = fr.target;
  const bool last = t == n - 1;  // the rollout variants describe row n - 1 only
  std::vector<VariantProfile> vs = last ? vs_in : std::vector<VariantProfile>{};
  vs.push_back(flow_variant(fr));
  output::Report rep;
  // ---- summary: one row per variant (the rollout tool's layout), flow last ----
  output::Table sum;
  sum.name = "summary";
  sum.title = "Rollout variants and attention flow to position " + std::to_string(t) + ", " + s.name +
              ", n = " + std::to_string(n) + ", L = " + std::to_string(s.L) +
              " (flow: max-flow on the residual-mixed kernels of (b), normalised to sum 1)";
  sum.header = {"variant", "p_0", "p_t", "argmin", "min", "primacy", "recency", "seconds"};
  if (influence.size()) sum.header.insert(sum.header.end(), {"spearman", "W1/(n-1)"});
  nlohmann::json summary = nlohmann::json::object(), variants = nlohmann::json::object();
  for (const auto& v : vs) {
    // flow to a target t < n - 1 lives on positions 0..t: summarise that prefix
    const Eigen::VectorXd p = v.key == "flow" ? Eigen::VectorXd(v.p.head(t + 1)) : v.p;
    // with --influence the target is n - 1, so p is the whole profile
    auto [row, js] = variant_summary_row(v.label, p, v.seconds, influence);
    sum.add_row(row);
    summary[v.key] = js;
    variants[v.key] = vec(v.p);
  }
  rep.tables.push_back(sum);
  // ---- the raw flow values ----
  output::Table ft;
  ft.name = "flow";
  ft.title = "Attention flow (raw max-flow values, " + flow_algorithm_name(algorithm) + ") from (0, j) to (L, " +
             std::to_string(t) + ")";
  ft.header = {"quantity", "value"};
  long jmax = 0;
  fr.flow.maxCoeff(&jmax);
  const double total = fr.flow.sum();
  ft.add_row({"sum over sources", fmt(total, 6)});
  ft.add_row({"flow of position 0", fmt(fr.flow(0), 6)});
  ft.add_row({"flow of the target", fmt(fr.flow(t), 6)});
  ft.add_row({"max flow", fmt(fr.flow(jmax), 6)});
  ft.add_row({"argmax", std::to_string(jmax)});
  ft.add_row({"max |cut - flow| / flow", fmt(fr.max_cut_gap, 3)});
  ft.add_row({"largest graph: nodes", std::to_string(fr.max_nodes)});
  ft.add_row({"largest graph: edges", std::to_string(fr.max_edges)});
  if (algorithm == FlowAlgorithm::Layered) {
    ft.add_row({"Dinic phases (most of one source)", std::to_string(fr.max_phases)});
    ft.add_row({"arc inspections (all sources)", std::to_string(fr.arcs_scanned)});
  }
  ft.add_row({"seconds", fmt(fr.seconds, 3)});
  rep.tables.push_back(ft);
  // ---- the Tables 2-5 layout of Position bias (Herasimchyk et al.): one row, a column per variant ----
  if (influence.size()) {
    output::Table sp, w1;
    sp.name = "spearman";
    w1.name = "w1";
    sp.title = "Spearman rank correlation with the measured influence (Tables 2/4 layout), n = " + std::to_string(n);
    w1.title = "W1 / (n-1) to the measured influence (Tables 3/5 layout), n = " + std::to_string(n);
    sp.header = w1.header = {"model"};
    std::vector<std::string> rs = {s.name}, rw = {s.name};
    for (const auto& v : vs) {
      sp.header.push_back(v.label);
      w1.header.push_back(v.label);
      rs.push_back(fmt(summary[v.key]["spearman"].get<double>(), 4));
      rw.push_back(fmt(summary[v.key]["w1_normalised"].get<double>(), 4));
    }
    sp.add_row(rs);
    w1.add_row(rw);
    rep.tables.push_back(sp);
    rep.tables.push_back(w1);
  }
  if (csv) {
    output::Table d;
    d.name = "distributions";
    d.title = "distributions";
    d.header = {"position"};
    for (const auto& v : vs)
      if (v.key != "flow") d.header.push_back(v.key);
    d.header.insert(d.header.end(), {"flow", "flow_profile", "cut"});
    for (long j = 0; j < n; ++j) {
      std::vector<std::string> row = {std::to_string(j)};
      for (const auto& v : vs)
        if (v.key != "flow") row.push_back(fmt(v.p(j), 10));
      row.push_back(fmt(fr.flow(j), 17));
      row.push_back(fmt(fr.profile(j), 17));
      row.push_back(std::isfinite(fr.cut(j)) ? fmt(fr.cut(j), 17) : "");
      d.add_row(row);
    }
    rep.tables.push_back(d);
  }
  nlohmann::json cut = nlohmann::json::array();
  for (long j = 0; j < n; ++j) cut.push_back(std::isfinite(fr.cut(j)) ? nlohmann::json(fr.cut(j)) : nlohmann::json());
  rep.body = {{"summary", summary},
              {"variants", variants},
              {"flow",
               {{"raw", vec(fr.flow)},
                {"profile", vec(fr.profile)},
                {"cut", cut},
                {"target", t},
                {"algorithm", flow_algorithm_name(algorithm)},
                {"max_cut_gap", fr.max_cut_gap},
                {"max_nodes", fr.max_nodes},
                {"max_edges", fr.max_edges},
                {"max_phases", fr.max_phases},
                {"arcs_scanned", fr.arcs_scanned},
                {"seconds", fr.seconds}}}};
  if (influence.size()) rep.body["influence"] = vec(influence);
  rep.notes.push_back(
      "graph: nodes (l, i), l = 0..L; edge (l-1, j) -> (l, i) for j <= i with capacity R_l[i, j], R_l = (1 - alpha_l) "
      "I "
      "+ alpha_l Abar(l) (the kernels of variant (b)); flow of j = max-flow from (0, j) to (L, " +
      std::to_string(t) + ")");
  rep.notes.push_back("cut: capacity of the min cut read off the final residual graph (certificate: equals the flow)");
  if (!last)
    rep.notes.push_back("rollout variants omitted: they describe position n - 1 and the flow target is " +
                        std::to_string(t));
  rep.notes.push_back("primacy / recency = mass of the first / last ceil(m/10) of the m positions shown");
  return rep;
}

plot::LinePlot flow_plot(const RolloutSource& s, const std::vector<VariantProfile>& vs, const FlowResult& fr,
                         const Eigen::VectorXd& influence, bool log_y) {
  const long n = fr.flow.size(), t = fr.target;
  plot::LinePlot lp;
  lp.title = "Attention flow and rollout to position " + std::to_string(t) + ", " + s.name +
             " (n = " + std::to_string(n) + ")";
  lp.xlabel = "input position j";
  lp.log_y = log_y;
  lp.ylabel = log_y ? "share of the target's influence (log scale)" : "share of the target's influence";
  double top = fr.profile.maxCoeff();
  auto add = [&](const std::string& label, const Eigen::VectorXd& p, long m) {
    plot::Series se{label, {}, {}};
    for (long j = 0; j < m; ++j) {
      if (log_y && !(p(j) > 0)) continue;  // log axis
      se.x.push_back(static_cast<double>(j));
      se.y.push_back(p(j));
    }
    lp.series.push_back(se);
  };
  if (t == n - 1)
    for (const auto& v : vs) {
      add(v.label, v.p, n);
      if (v.key != "attention_only") top = std::max(top, v.p.maxCoeff());
    }
  add("(f) attention flow (normalised)", fr.profile, t + 1);
  if (influence.size()) {
    add("measured influence", influence, n);
    top = std::max(top, influence.maxCoeff());
  }
  if (!log_y && vs.size() > 1 && t == n - 1) {
    lp.y_min = 0;
    lp.y_max = 1.1 * top;  // (a) collapses onto token 0 and is clipped, as in rollout's plot
  }
  return lp;
}

nlohmann::json flow_params(const RolloutSource& s, const FlowResult& fr, FlowAlgorithm algorithm) {
  nlohmann::json params = s.params;
  params["flow_algorithm"] = flow_algorithm_name(algorithm);
  params["flow_target"] = fr.target;
  params["flow_kernels"] = "residual-mixed kernels of variant (b): (1 - alpha_l) I + alpha_l Abar(l), " +
                           (s.structured ? std::string("ALiBi without content") : s.kernel_source);
  return params;
}

}  // namespace cf::rollout
