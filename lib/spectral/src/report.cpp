#include "cf/spectral/report.hpp"

#include <cmath>

#include "cf/core/error.hpp"

namespace cf::spectral {

using output::fmt;

ErankForm parse_erank_form(const std::string& name) {
  if (const auto f = kErankForms.find(name)) return *f;
  throw InvalidArgument(str("erank form must be entropy or participation (got '", name, "')"));
}

namespace {
nlohmann::json num(double v) {
  // JSON has no inf/NaN: encode them as null.
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}
std::vector<double> vec(const Eigen::VectorXd& v) { return {v.data(), v.data() + v.size()}; }
// rho = 0/0 (M = 0) reads "undefined" in the tables, not "nan"
std::string rho_text(double rho) { return std::isnan(rho) ? std::string("undefined") : fmt(rho, 4); }
// the note under a level's tables when some heads have M = 0
void note_undefined(output::Report& r, const ModelSpectrum& m) {
  if (m.summary.undefined_rho_heads == 0) return;
  std::string which;
  for (const auto& h : m.heads)
    if (std::isnan(h.rho)) which += str(which.empty() ? "" : ", ", "L", h.layer, "H", h.head);
  r.notes.push_back(str(m.level, " level: ", m.summary.undefined_rho_heads,
                        " head(s) with M = 0 (all-zero W_Q or W_K: ", which,
                        "): rho = 0/0 is undefined (\"undefined\" in the tables, null in JSON) and left out of ",
                        "the rho mean and median"));
}
}  // namespace

output::Table head_table(const ModelSpectrum& m) {
  output::Table t;
  t.name = m.level + "_per_head";  // CSV `table` key: the title's slug stops at '(' and drops the level
  t.title = "Per-head routing/filtering metrics (" + m.level + " level" +
            (m.level == "sequence" ? ", mean over texts" : "") + ")";
  t.header = {"layer", "head", "attn", "rho", "erank_R", "erank_F", "pr_R", "rank_R", "norm_M", "max_re_lambda"};
  for (const auto& h : m.heads)
    t.add_row({output::fmt_int(h.layer), output::fmt_int(h.head), h.attn, rho_text(h.rho), fmt(h.erank_R, 4),
               fmt(h.erank_F, 4), fmt(h.pr_R, 4), std::to_string(h.rank_R), fmt(h.norm_M, 4), fmt(h.max_re_lambda, 4)});
  return t;
}

output::Table layer_table(const ModelSpectrum& m, ErankForm form) {
  output::Table t;
  t.name = m.level + "_per_layer";
  t.title = "Per-layer profile (" + m.level + " level): spectral cascade = effective routing rank by layer (" +
            (form == ErankForm::Entropy ? "entropy" : "participation-ratio") + " form)";
  t.header = {"layer",      "attn",          "erank_R",     "erank_F",   "rho_mean",
              "rho_median", "routing_heads", "max_re_mean", "max_re_max"};
  for (const auto& p : m.layers)
    t.add_row({output::fmt_int(p.layer), p.attn, fmt(form == ErankForm::Entropy ? p.erank_R : p.pr_R, 4),
               fmt(p.erank_F, 4), rho_text(p.rho), rho_text(p.rho_median), std::to_string(p.routing_heads),
               fmt(p.max_re_lambda, 4), fmt(p.max_re_lambda_max, 4)});
  return t;
}

nlohmann::json to_json(const ModelSpectrum& m, bool with_sigma) {
  nlohmann::json heads = nlohmann::json::array(), layers = nlohmann::json::array();
  for (const auto& h : m.heads) {
    nlohmann::json j = {{"layer", h.layer},
                        {"head", h.head},
                        {"attn", h.attn},
                        {"rho", num(h.rho)},
                        {"erank_R", h.erank_R},
                        {"erank_F", h.erank_F},
                        {"pr_R", h.pr_R},
                        {"pr_F", h.pr_F},
                        {"erank_M", h.erank_M},
                        {"rank_R", h.rank_R},
                        {"rank_F", h.rank_F},
                        {"norm_M", h.norm_M},
                        {"norm_F", h.norm_F},
                        {"norm_R", h.norm_R},
                        {"max_re_lambda", num(h.max_re_lambda)},
                        {"max_re_lambda_tol", h.lambda_tol}};
    if (with_sigma) {
      j["sigma_R"] = vec(h.sigma_R);
      j["sigma_F"] = vec(h.sigma_F);
    }
    heads.push_back(j);
  }
  for (const auto& p : m.layers)
    layers.push_back({{"layer", p.layer},
                      {"attn", p.attn},
                      {"erank_R", p.erank_R},
                      {"pr_R", p.pr_R},
                      {"erank_F", p.erank_F},
                      {"rho_mean", num(p.rho)},
                      {"rho_median", num(p.rho_median)},
                      {"routing_heads", p.routing_heads},
                      {"unstable_heads", p.unstable_heads},
                      {"undefined_rho_heads", p.undefined_rho_heads},
                      {"max_re_lambda_mean", num(p.max_re_lambda)},
                      {"max_re_lambda_max", num(p.max_re_lambda_max)}});
  const auto& s = m.summary;
  return {{"level", m.level},
          {"heads", heads},
          {"layers", layers},
          {"summary",
           {{"heads", s.heads},
            {"routing_heads", s.routing_heads},
            {"unstable_heads", s.unstable_heads},
            {"undefined_rho_heads", s.undefined_rho_heads},
            {"rho_median", num(s.rho_median)},
            {"erank_R_mean", s.erank_R_mean},
            {"erank_F_mean", s.erank_F_mean},
            {"max_re_lambda_mean", num(s.max_re_lambda_mean)}}}};
}

plot::Series cascade_series(const ModelSpectrum& m, ErankForm form, const std::string& label) {
  plot::Series s;
  s.label = label;
  for (const auto& p : m.layers) {
    s.x.push_back(p.layer);
    s.y.push_back(form == ErankForm::Entropy ? p.erank_R : p.pr_R);
  }
  return s;
}

CascadeReport begin_cascade_report(ErankForm form, bool summary_only) {
  CascadeReport r;
  r.form = form;
  r.summary_only = summary_only;
  r.plot.title = "Spectral cascade: effective routing rank by layer";
  r.plot.xlabel = "layer";
  r.plot.ylabel =
      std::string("mean effective rank of R (") + (form == ErankForm::Entropy ? "entropy" : "participation") + ")";
  return r;
}

void add_weight_level(CascadeReport& r, const ModelSpectrum& m) {
  if (!r.summary_only) r.report.tables.push_back(head_table(m));
  r.report.tables.push_back(layer_table(m, r.form));
  r.report.body["weight"] = to_json(m);
  r.plot.series.push_back(cascade_series(m, r.form, "weight level (W_Q W_K^T)"));
  r.report.notes.push_back(str("weight level: ", m.summary.heads, " heads, ", m.summary.routing_heads,
                               " with rho > 1, ", m.summary.unstable_heads, " with max Re lambda > 0; median rho ",
                               fmt(m.summary.rho_median, 4), ", mean erank(R) ", fmt(m.summary.erank_R_mean, 4)));
  note_undefined(r.report, m);
}

void add_sequence_level(CascadeReport& r, const ModelSpectrum& m, const std::vector<int>& token_counts,
                        const std::string& tokenizer) {
  if (!r.summary_only) r.report.tables.push_back(head_table(m));
  r.report.tables.push_back(layer_table(m, r.form));
  r.report.body["sequence"] = to_json(m);
  r.report.body["sequence"]["texts"] = token_counts;
  r.plot.series.push_back(cascade_series(m, r.form, "sequence level (Q K^T / sqrt(d_k), texts)"));
  r.report.notes.push_back(str("sequence level: ", token_counts.size(), " texts (", tokenizer,
                               " tokens), unmasked scores from the forward pass; median rho ",
                               fmt(m.summary.rho_median, 4), ", mean erank(R) ", fmt(m.summary.erank_R_mean, 4)));
  note_undefined(r.report, m);
}

}  // namespace cf::spectral
