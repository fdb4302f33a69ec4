// The jacobian tool's report (cf/influence/jacobian_report.hpp).
#include "cf/influence/jacobian_report.hpp"

#include <cmath>

#include "cf/core/error.hpp"

namespace cf::influence {

using output::fmt;

namespace {

nlohmann::json check_json(const BoundCheck& b) {
  return {{"c_star", b.c_star},
          {"c1_max", b.c1_max},
          {"c_star_within_c1", b.c_star_within_c1},
          {"zero_bound_nonzero_j", b.zero_bound_nonzero_j},
          {"spearman_offdiag", b.spearman_offdiag},
          {"spearman_diag", b.spearman_diag},
          {"gate_share", b.gate_share},
          {"pairs", b.pairs},
          {"tightness",
           {{"min", b.tightness.min},
            {"p10", b.tightness.p10},
            {"median", b.tightness.median},
            {"p90", b.tightness.p90},
            {"max", b.tightness.max}}}};
}

nlohmann::json lower(const Eigen::MatrixXd& m) {
  // n x n, rectangular (numpy.array(d["bound"]) is a float matrix): row d holds s = 0..n-1, the
  // causal lower triangle s <= d as numbers and null for s > d (docs/influence.md)
  nlohmann::json rows = nlohmann::json::array();
  for (long d = 0; d < m.rows(); ++d) {
    nlohmann::json r = nlohmann::json::array();
    for (long s = 0; s < m.cols(); ++s) r.push_back(s <= d ? nlohmann::json(m(d, s)) : nlohmann::json(nullptr));
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

JacobianReport jacobian_report(const nn::ModelConfig& cfg, const JacobianAnalysis& a, long window_start) {
  const int r = a.span, n = a.n;
  require(a.layer >= 0 && a.layer + r <= cfg.n_layer, "jacobian_report: layers ", a.layer, " + ", r,
          " exceed n_layer = ", cfg.n_layer);
  JacobianReport out;
  output::Report& rep = out.report;
  output::Table lt;
  lt.title = "One-layer constants C_1(l) = max ||d h_d(l+1)/d h_w(l)|| / (I + A(l))_dw and blocks outside the mask";
  lt.header = {"layer",         "attention",       "C_1 Frobenius", "C_1 spectral", "pairs outside mask",
               "nonzero there", "A row-normalised"};
  nlohmann::json layers = nlohmann::json::array();
  bool zeros_ok = true;
  for (int k = 0; k < r; ++k) {
    const int l = a.layer + k;
    const auto& f = a.one_layer_frobenius[k];
    const auto& s = a.one_layer_spectral[k];
    zeros_ok = zeros_ok && f.outside_mask_nonzero == 0;
    const bool rn = a.attention.row_normalised[l];
    lt.add_row({output::fmt_int(l), nn::attn_name(cfg.layers[l].attn), fmt(f.c1, 6), fmt(s.c1, 6),
                std::to_string(f.outside_mask_pairs), std::to_string(f.outside_mask_nonzero), rn ? "yes" : "no"});
    layers.push_back({{"layer", l},
                      {"attn", nn::attn_name(cfg.layers[l].attn)},
                      {"c1_frobenius", f.c1},
                      {"c1_spectral", s.c1},
                      {"outside_mask_pairs", f.outside_mask_pairs},
                      {"outside_mask_nonzero", f.outside_mask_nonzero},
                      {"outside_mask_max", f.outside_mask_max},
                      {"row_normalised", rn}});
  }
  rep.tables.push_back(lt);
  output::Table st;
  st.title = "Theorem 3.3 (Runway (Lee & Clark)): J_ds <= C^r [(I + A(L+r-1)) ... (I + A(L))]_ds, L = " +
             std::to_string(a.layer) + ", r = " + std::to_string(r) + ", n = " + std::to_string(n);
  st.header = {"norm",
               "C*",
               "max C_1",
               "C* <= max C_1",
               "Spearman off-diag",
               "Spearman diag",
               "tightness median",
               "tightness p10",
               "gate > self share"};
  for (const auto* b : {&a.frobenius, &a.spectral}) {
    st.add_row({b == &a.frobenius ? "Frobenius" : "spectral", fmt(b->c_star, 6), fmt(b->c1_max, 6),
                b->c_star_within_c1 && b->zero_bound_nonzero_j == 0 ? "yes" : "NO", fmt(b->spearman_offdiag, 4),
                fmt(b->spearman_diag, 4), fmt(b->tightness.median, 4), fmt(b->tightness.p10, 4),
                fmt(b->gate_share, 4)});
  }
  rep.tables.push_back(st);
  rep.notes.push_back("exact blocks by reverse mode: " + output::fmt_int(a.vjps) + " vector-Jacobian products in " +
                      output::fmt_int(a.backward_calls) + " batched backward passes (" +
                      output::fmt_int(a.token_passes) + " token-passes on causal prefixes), " +
                      fmt(a.seconds_jacobians, 3) + " s");
  rep.notes.push_back(
      "A(l) = head mean of the attention weights on the same window; layers marked row-normalised are "
      "branch-fused bridges whose rows summed to 2 where the bridge admits a key");
  rep.notes.push_back(
      "gate > self share over pairs s < d: Runway (Lee & Clark) Eqs. 6-7 direct-path gate times runway product "
      "vs the residual self term");
  rep.body = {{"layer", a.layer},
              {"span", r},
              {"n", n},
              {"window_start", window_start},
              {"layers", layers},
              {"frobenius", check_json(a.frobenius)},
              {"spectral", check_json(a.spectral)},
              {"vjps", a.vjps},
              {"backward_calls", a.backward_calls},
              {"token_passes", a.token_passes},
              {"seconds", a.seconds_jacobians},
              {"J_frobenius", lower(a.J.frobenius)},
              {"J_spectral", lower(a.J.spectral)},
              {"bound", lower(a.bound.bound)},
              {"self_term", lower(a.bound.self_term)},
              {"gate_term", lower(a.bound.gate_term)}};
  out.consistent =
      zeros_ok && a.frobenius.c_star_within_c1 && a.spectral.c_star_within_c1 && a.frobenius.zero_bound_nonzero_j == 0;
  return out;
}

plot::Heatmap log10_lower_heatmap(const Eigen::MatrixXd& m, const std::string& title, const std::string& quantity) {
  plot::Heatmap h;
  h.title = title;
  h.xlabel = "source position s";
  h.ylabel = "target position d";
  h.value_label = "log10 " + quantity;
  h.masked_label = "grey: s > d (not causal) or a zero entry (no log)";
  h.values = Eigen::MatrixXd::Constant(m.rows(), m.cols(), std::nan(""));
  for (long d = 0; d < m.rows(); ++d)
    for (long s = 0; s <= d; ++s) h.values(d, s) = m(d, s) > 0 ? std::log10(m(d, s)) : std::nan("");
  return h;
}

}  // namespace cf::influence
