#pragma once
// Tables, JSON and the cascade plot of a ModelSpectrum (shared by `spectral` and
// `spectral-surgery`; keeps the apps thin), and the report of the `spectral` tool assembled level
// by level (weight, sequence).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/spectral/model.hpp"

namespace cf::spectral {

/// Which effective-rank form the profile/plot headline uses (docs/spec.md §7 option 8).
enum class ErankForm { Entropy, Participation };
/// The forms' names (spectral --erank).
inline constexpr EnumTable kErankForms{std::array{
    EnumEntry<ErankForm>{ErankForm::Entropy, "entropy"},
    EnumEntry<ErankForm>{ErankForm::Participation, "participation"},
}};
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

/// The report of the `spectral` tool (Routing/filtering (Jamil & Kapadia) §3, §5.2; docs/spectral.md) being assembled:
/// the report (tables, JSON body, notes; the tool sets meta) and the cascade plot, one series per level.
struct CascadeReport {
  output::Report report;
  plot::LinePlot plot;
  ErankForm form = ErankForm::Entropy;  ///< headline effective-rank form of tables and plot
  bool summary_only = false;            ///< per-layer profile only (no per-head table)
};

/// An empty report with the cascade plot's title and axis labels set.
CascadeReport begin_cascade_report(ErankForm form, bool summary_only);

/// Add the weight level (W_Q W_K^T): per-head table (unless summary_only), per-layer profile,
/// body["weight"] = to_json(m), the cascade series and a one-line summary note.
void add_weight_level(CascadeReport& r, const ModelSpectrum& m);

/// Add the sequence level (Q K^T / sqrt(d_k) on texts): per-head table (unless summary_only),
/// per-layer profile, body["sequence"] = to_json(m) plus "texts" (tokens per text), the cascade
/// series and a one-line note naming the number of texts and the tokenizer.
void add_sequence_level(CascadeReport& r, const ModelSpectrum& m, const std::vector<int>& token_counts,
                        const std::string& tokenizer);

}  // namespace cf::spectral
