// The influence tool's reports (cf/influence/influence_report.hpp).
#include "cf/influence/influence_report.hpp"

#include "cf/core/error.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::influence {

using output::fmt;

namespace {
nlohmann::json summary_json(const Eigen::VectorXd& p) {
  const auto s = rollout::summarize(p);
  return {{"first", s.first},          {"last", s.last},           {"argmin", s.argmin}, {"min", s.min},
          {"primacy_mass", s.primacy}, {"recency_mass", s.recency}};
}
}  // namespace

InfluenceReport influence_report(const InfluenceResult& r, const std::vector<std::int64_t>& starts,
                                 const std::string& checkpoint, const std::string& target, const std::string& h5) {
  const int n = static_cast<int>(r.profile.size());
  const int W = static_cast<int>(starts.size());
  InfluenceReport out;
  output::Report& rep = out.report;
  output::Table t;
  t.title = "Measured influence I_j (Position bias (Herasimchyk et al.) Eq. 6, target " + target + "), " + checkpoint +
            ": n = " + std::to_string(n) + ", " + std::to_string(W) + " windows, " + std::to_string(r.backward_passes) +
            " batched backward pass(es)";
  t.header = {"position", "influence", "mean_g"};
  for (int j = 0; j < n; ++j) t.add_row({output::fmt_int(j), fmt(r.profile(j), 4), fmt(r.mean_g(j), 6)});
  rep.tables.push_back(t);
  const auto s = rollout::summarize(r.profile);
  rep.notes.push_back("I_0 = " + fmt(s.first, 4) + ", I_n-1 = " + fmt(s.last, 4) + ", argmin " +
                      std::to_string(s.argmin) + " (" + fmt(s.min, 4) + "), primacy / recency mass (first / last " +
                      "ceil(n/10) positions) " + fmt(s.primacy, 4) + " / " + fmt(s.recency, 4));
  rep.notes.push_back("mean p(yhat) over windows " + fmt(r.per_window.p_yhat.mean(), 4) +
                      "; windows start at capture's evenly spread offsets (JSON: starts)");
  if (!h5.empty()) rep.notes.push_back("per-window matrix written to " + h5 + " (/per_window [W, n])");
  rep.body = {{"checkpoint", checkpoint},
              {"target", target},
              {"n", n},
              {"windows", W},
              {"backward_passes", r.backward_passes},
              {"starts", starts},
              {"yhat", r.per_window.yhat},
              {"p_yhat", std::vector<double>(r.per_window.p_yhat.data(),
                                             r.per_window.p_yhat.data() + r.per_window.p_yhat.size())},
              {"profile", std::vector<double>(r.profile.data(), r.profile.data() + r.profile.size())},
              {"mean_g", std::vector<double>(r.mean_g.data(), r.mean_g.data() + r.mean_g.size())},
              {"summary", summary_json(r.profile)}};
  plot::LinePlot& lp = out.plot;
  lp.title =
      "Measured influence (Position bias (Herasimchyk et al.) Eq. 6), " + target + " target, n = " + std::to_string(n);
  lp.xlabel = "input position j";
  lp.ylabel = "I_j (normalised mean gradient norm)";
  plot::Series se{"measured influence", {}, {}};
  for (int j = 0; j < n; ++j) se.x.push_back(j), se.y.push_back(r.profile(j));
  lp.series = {se};
  return out;
}

InfluenceReport influence_series_report(const std::vector<model::CheckpointEntry>& cks,
                                        const std::vector<Eigen::VectorXd>& profiles, const std::string& target) {
  require(!cks.empty() && cks.size() == profiles.size(), "influence_series_report: ", cks.size(), " checkpoints but ",
          profiles.size(), " profiles");
  InfluenceReport out;
  output::Report& rep = out.report;
  output::Table t;
  t.title = "Measured influence over training (Position bias (Herasimchyk et al.) Eq. 6, target " + target + ")";
  t.header = {"step", "checkpoint", "I_0", "I_n-1", "argmin", "primacy", "recency", "spearman vs last"};
  nlohmann::json rows = nlohmann::json::array();
  plot::Series s0{"I_0", {}, {}}, sl{"I_n-1", {}, {}}, sp{"primacy mass", {}, {}}, sr{"recency mass", {}, {}};
  for (std::size_t i = 0; i < cks.size(); ++i) {
    require(profiles[i].size() == profiles.back().size(), "influence_series_report: profile ", i, " has ",
            profiles[i].size(), " positions, the last ", profiles.back().size());
    const auto s = rollout::summarize(profiles[i]);
    const double rho = rollout::spearman(profiles[i], profiles.back());
    t.add_row({output::fmt_int(cks[i].step), cks[i].path, fmt(s.first, 4), fmt(s.last, 4), output::fmt_int(s.argmin),
               fmt(s.primacy, 4), fmt(s.recency, 4), fmt(rho, 4)});
    nlohmann::json js = summary_json(profiles[i]);
    js["step"] = cks[i].step;
    js["checkpoint"] = cks[i].path;
    js["spearman_vs_last"] = rho;
    js["profile"] = std::vector<double>(profiles[i].data(), profiles[i].data() + profiles[i].size());
    rows.push_back(js);
    const double x = static_cast<double>(cks[i].step);
    s0.x.push_back(x), s0.y.push_back(s.first);
    sl.x.push_back(x), sl.y.push_back(s.last);
    sp.x.push_back(x), sp.y.push_back(s.primacy);
    sr.x.push_back(x), sr.y.push_back(s.recency);
  }
  rep.tables.push_back(t);
  rep.body = {{"target", target}, {"checkpoints", rows}};
  rep.notes.push_back("primacy / recency = influence mass of the first / last ceil(n/10) positions");
  plot::LinePlot& lp = out.plot;
  lp.title = "Measured influence over training (Position bias (Herasimchyk et al.) Eq. 6)";
  lp.xlabel = "training step";
  lp.ylabel = "influence mass";
  lp.series = {s0, sl, sp, sr};
  return out;
}

}  // namespace cf::influence
