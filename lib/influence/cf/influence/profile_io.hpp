#pragma once
// Influence profile files (docs/influence.md): what `influence --out` writes and what
// `rollout --influence FILE` reads back.
#include <Eigen/Dense>
#include <string>

#include "cf/influence/influence.hpp"

namespace cf::influence {

/// Read an influence profile: JSON written by `influence --out X.json` (its "profile" array), CSV
/// written by `influence --out X.csv` (the "influence" column of the table whose header starts with
/// "position"), or a plain number file (cf::rollout::read_influence_file: n numbers or
/// "position,value" lines). Normalised to sum 1. Throws cf::InvalidArgument naming the file and
/// the problem (no profile, negative values, zero sum, fewer than 2 positions).
Eigen::VectorXd read_profile(const std::string& path);

/// Write the per-window matrix and the profile as HDF5 (atomic): /profile [n], /mean_g [n],
/// /per_window [W, n], /starts [W], /yhat [W], /p_yhat [W]; root attributes target, n,
/// windows, checkpoint, source.
void write_profile_h5(const std::string& path, const InfluenceResult& r, const std::vector<std::int64_t>& starts,
                      const std::string& checkpoint, const std::string& source);

}  // namespace cf::influence
