// The spectral-surgery report (cf/spectral/surgery_report.hpp).
#include "cf/spectral/surgery_report.hpp"

#include "cf/core/error.hpp"
#include "cf/data/token_file.hpp"
#include "cf/spectral/sequence.hpp"

namespace cf::spectral {

using output::fmt;

std::vector<std::int32_t> load_validation_tokens(const std::string& data_prefix, const std::string& text_path,
                                                 const std::string& tokenizer, int vocab_size, long max_tokens,
                                                 std::string* source, const std::string& checkpoint) {
  std::vector<std::int32_t> t;
  if (!data_prefix.empty()) {
    const data::TokenMeta meta = data::read_token_meta(data_prefix);
    require(meta.vocab_size <= vocab_size, "token data vocab_size ", meta.vocab_size,
            " exceeds the checkpoint's vocab_size ", vocab_size);
    const auto val = data::read_token_bin(data_prefix + ".val.bin", meta.vocab_size);
    t.assign(val.begin(), val.end());
    *source = data_prefix + ".val.bin";
  } else {
    const auto texts = tokenize_texts(text_path, tokenizer, "", vocab_size, 1 << 30, nullptr, checkpoint);
    for (const auto& x : texts) t.insert(t.end(), x.begin(), x.end());
    *source = text_path;
  }
  if (long(t.size()) > max_tokens) t.resize(std::size_t(max_tokens));
  require(t.size() >= 2, "need at least 2 validation tokens (got ", t.size(), ")");
  return t;
}

namespace {

// Every perplexity of the run (baseline, the surgery, the sweep rows), in that order, for one batch.
std::vector<Intervention> request_interventions(const SurgeryRequest& req) {
  std::vector<Intervention> ivs = {Intervention{}};
  if (req.has_surgery) ivs.push_back(req.surgery);
  if (req.per_layer)
    for (const Intervention& x : sweep_interventions(req.layers, req.sweep_linear_attention, false)) ivs.push_back(x);
  if (req.cumulative)
    for (const Intervention& x : sweep_interventions(req.layers, req.sweep_linear_attention, true)) ivs.push_back(x);
  return ivs;
}

// The report from the perplexities of request_interventions(req).
SurgeryOutcome build_report(const SurgeryRequest& req, const std::vector<nn::PerplexityResult>& res) {
  const Intervention& iv = req.surgery;
  const std::vector<int>& layers = req.layers;
  const std::size_t per_at = req.has_surgery ? 2 : 1;
  const std::size_t cum_at = per_at + (req.per_layer ? layers.size() : 0);
  auto slice = [&](std::size_t at) {
    return std::vector<nn::PerplexityResult>(res.begin() + long(at), res.begin() + long(at + layers.size()));
  };

  SurgeryOutcome out;
  output::Report& rep = out.report;
  const nn::PerplexityResult& base = res[0];
  output::Table main;
  main.title = "Validation perplexity (overlapping stride: context " + std::to_string(req.ps.context) + ", stride " +
               std::to_string(req.ps.stride) + ", " + std::to_string(base.n_tokens) + " tokens)";
  main.header = {"run", "nll", "ppl", "delta_pct"};
  main.add_row({"baseline", fmt(base.nll, 6), fmt(base.ppl, 6), "0"});
  nlohmann::json body = {{"baseline", {{"nll", base.nll}, {"ppl", base.ppl}, {"n_tokens", base.n_tokens}}}};
  if (req.has_surgery) {
    const nn::PerplexityResult& r = res[1];
    const bool truncates = iv.spec.rank >= 0;
    std::string what =
        iv.linearize ? "linearize"
                     : (truncates ? component_name(iv.spec.component) + " rank " + std::to_string(iv.spec.rank) : "");
    if (!iv.linear_attention.empty()) what += std::string(what.empty() ? "" : " + ") + "ELU+1 linear attention";
    const double d = (r.ppl - base.ppl) / base.ppl * 100;
    std::string where = iv.linearize || truncates ? "layers " + req.layers_label : "";
    if (!iv.linear_attention.empty())
      where += std::string(where.empty() ? "" : "; ") + "linear attention " + req.linear_attention_label;
    main.add_row({what + " (" + where + ")", fmt(r.nll, 6), fmt(r.ppl, 6), fmt(d, 4)});
    body["surgery"] = {
        {"description", what}, {"nll", r.nll}, {"ppl", r.ppl}, {"delta_pct", d}, {"exact_baseline", r.nll == base.nll}};
  }
  rep.tables.push_back(main);

  plot::LinePlot& lp = out.sweep_plot;
  lp.title = "Linearisation cost by layer";
  lp.xlabel = "layer";
  lp.ylabel = "perplexity increase over baseline (%)";
  auto add_sweep = [&](const std::vector<SweepRow>& rows, const std::string& key, const std::string& title) {
    output::Table t;
    t.title = title;
    t.header = {"layer", "ppl", "cost_pct"};
    nlohmann::json arr = nlohmann::json::array();
    plot::Series s;
    s.label = key;
    for (const auto& r : rows) {
      t.add_row({output::fmt_int(r.layer), fmt(r.ppl, 6), fmt(r.cost_pct, 4)});
      arr.push_back({{"layer", r.layer}, {"ppl", r.ppl}, {"cost_pct", r.cost_pct}});
      s.x.push_back(r.layer);
      s.y.push_back(r.cost_pct);
    }
    rep.tables.push_back(t);
    body[key] = arr;
    lp.series.push_back(s);
  };
  const std::string how =
      req.sweep_linear_attention ? "ELU+1 linear attention" : "linearize (top routing pair + scalar filtering)";
  if (req.per_layer)
    add_sweep(sweep_rows(layers, slice(per_at), base.ppl), "per_layer", "Per-layer cost: one layer at a time, " + how);
  if (req.cumulative)
    add_sweep(sweep_rows(layers, slice(cum_at), base.ppl), "cumulative",
              "Cumulative front-to-back cost: layers up to L together, " + how);
  rep.body = body;
  return out;
}

}  // namespace

SurgeryOutcome surgery_report(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                              const SurgeryRequest& req) {
  return build_report(req, evaluate_interventions(model, tokens, request_interventions(req), req.ps));
}

SurgeryOutcome surgery_report(const nn::ModelConfig& config, const std::vector<std::int32_t>& tokens,
                              const SurgeryRequest& req) {
  return build_report(req, evaluate_interventions(config, tokens, request_interventions(req), req.ps));
}

}  // namespace cf::spectral
