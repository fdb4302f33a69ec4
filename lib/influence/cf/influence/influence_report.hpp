#pragma once
// The reports of the `influence` tool (Position bias (Herasimchyk et al.) Eq. 6; docs/influence.md): one checkpoint's
// measured profile I_j (table per position, summary notes, JSON arrays, profile plot), or a series
// of checkpoints summarised against the training step (I_0, I_n-1, argmin, primacy / recency mass,
// Spearman against the last profile, metrics plot). The app only parses options and measures.
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/influence/influence.hpp"
#include "cf/model/series.hpp"

namespace cf::influence {

/// A report (the tool sets meta) and its plot.
struct InfluenceReport {
  output::Report report;
  plot::LinePlot plot;
};

/// Report of one measured profile r (n = r.profile.size() positions) over windows starting at
/// `starts`; `target` is the differentiated quantity's name, `h5` the per-window file written
/// ("" = none, then no note about it).
InfluenceReport influence_report(const InfluenceResult& r, const std::vector<std::int64_t>& starts,
                                 const std::string& checkpoint, const std::string& target, const std::string& h5);

/// Report of a checkpoint series: profiles[i] belongs to cks[i] (same length, at least one);
/// Spearman is taken against the last profile. Throws cf::InvalidArgument on a size mismatch.
InfluenceReport influence_series_report(const std::vector<model::CheckpointEntry>& cks,
                                        const std::vector<Eigen::VectorXd>& profiles, const std::string& target);

}  // namespace cf::influence
