// The spectral cascade over training, see cf/spectral/series.hpp.
#include "cf/spectral/series.hpp"

#include "cf/spectral/checkpoint.hpp"

namespace cf::spectral {

std::vector<SeriesPoint> spectral_series(const std::vector<std::pair<std::string, std::int64_t>>& checkpoints,
                                         const std::string& layer_spec, const AnalysisOptions& opt, ErankForm form,
                                         const SymEigenSolver* eig) {
  std::vector<SeriesPoint> out;
  for (const auto& [path, step] : checkpoints) {
    const AttentionWeights w = read_attention_weights(path);
    const std::vector<int> layers = parse_layer_spec(layer_spec, w.n_layer);
    const ModelSpectrum m = eig ? analyse_weights(w, layers, opt, *eig) : analyse_weights(w, layers, opt);
    SeriesPoint p;
    p.path = path;
    p.step = step;
    p.summary = m.summary;
    const plot::Series c = cascade_series(m, form, "");
    for (std::size_t i = 0; i < c.x.size(); ++i) {
      p.layers.push_back(static_cast<int>(c.x[i]));
      p.layer_erank_R.push_back(c.y[i]);
    }
    out.push_back(p);
  }
  return out;
}

output::Table series_table(const std::vector<SeriesPoint>& s) {
  output::Table t;
  t.title = "Spectral cascade over training (Routing/filtering (Jamil & Kapadia) App. D): weight level";
  t.header = {"step", "checkpoint", "mean erank(R)", "median rho", "routing heads", "heads", "erank(R) per layer"};
  for (const auto& p : s) {
    // a list in one text cell, bracketed so it never reads as a number (a CSV column is numbers or text)
    std::string per = "[";
    for (std::size_t i = 0; i < p.layer_erank_R.size(); ++i)
      per += (i ? ", " : "") + output::fmt(p.layer_erank_R[i], 4);
    per += "]";
    t.add_row({output::fmt_int(p.step), p.path, output::fmt(p.summary.erank_R_mean, 4),
               output::fmt(p.summary.rho_median, 4), output::fmt_int(p.summary.routing_heads),
               output::fmt_int(p.summary.heads), per});
  }
  return t;
}

plot::LinePlot series_plot(const std::vector<SeriesPoint>& s, ErankForm form) {
  plot::LinePlot lp;
  lp.title = "Spectral cascade over training: mean effective routing rank per layer";
  lp.xlabel = "training step";
  lp.ylabel = std::string("mean erank(R) (") + (form == ErankForm::Entropy ? "entropy" : "participation") + ")";
  if (s.empty()) return lp;
  for (std::size_t i = 0; i < s.front().layers.size(); ++i) {
    plot::Series se{"layer " + std::to_string(s.front().layers[i]), {}, {}};
    for (const auto& p : s)
      if (i < p.layer_erank_R.size()) se.x.push_back(static_cast<double>(p.step)), se.y.push_back(p.layer_erank_R[i]);
    lp.series.push_back(se);
  }
  return lp;
}

output::Report series_report(const std::vector<SeriesPoint>& s) {
  output::Report rep;
  rep.tables.push_back(series_table(s));
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& p : s)
    rows.push_back({{"step", p.step},
                    {"checkpoint", p.path},
                    {"erank_R_mean", p.summary.erank_R_mean},
                    {"rho_median", p.summary.rho_median},
                    {"routing_heads", p.summary.routing_heads},
                    {"layers", p.layers},
                    {"layer_erank_R", p.layer_erank_R}});
  rep.body = {{"series", rows}};
  return rep;
}

}  // namespace cf::spectral
