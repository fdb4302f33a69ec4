#pragma once
// Tables, JSON and the cascade plot of a ModelSpectrum (shared by `spectral` and
// `spectral-surgery`; keeps the apps thin).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/spectral/model.hpp"

namespace cf::spectral {

/// Which effective-rank form the profile/plot headline uses (SPEC §7 option 8).
enum class ErankForm { Entropy, Participation };
ErankForm parse_erank_form(const std::string& name);  ///< "entropy" | "participation"

/// Per-head table: layer, head, attn, rho, erank(R), erank(F), PR(R), rank(R), ||M||_F, max Re lambda.
output::Table head_table(const ModelSpectrum& m);
/// Per-layer profile table (the cascade): layer, attn, mean erank(R) (headline form), erank(F),
/// mean/median rho, routing heads, mean/max max Re lambda.
output::Table layer_table(const ModelSpectrum& m, ErankForm form);
/// JSON {"level", "heads": [...], "layers": [...], "summary": {...}}; sigma_R/sigma_F included
/// per head when with_sigma.
nlohmann::json to_json(const ModelSpectrum& m, bool with_sigma = true);
/// Cascade series: x = layer, y = mean effective routing rank (headline form).
plot::Series cascade_series(const ModelSpectrum& m, ErankForm form, const std::string& label);

}  // namespace cf::spectral
