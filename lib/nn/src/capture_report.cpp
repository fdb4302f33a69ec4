// The capture tool's report (cf/nn/capture_report.hpp).
#include "cf/nn/capture_report.hpp"

#include <cmath>

#include "cf/core/error.hpp"

namespace cf::nn {

using output::fmt;

CaptureReport capture_report(const ModelConfig& cfg, const CaptureSummary& s, const CaptureReportInput& in) {
  const int T = in.seq_len;
  require(s.layers.size() == static_cast<std::size_t>(cfg.n_layer), "capture_report: ", s.layers.size(),
          " layer summaries for n_layer = ", cfg.n_layer);
  CaptureReport out;
  output::Report& rep = out.report;
  output::Table t;
  t.title = "capture: " + in.out + " (N = " + std::to_string(s.n_seq) + " sequences of T = " + std::to_string(T) +
            " tokens, " + std::to_string(cfg.n_layer) + (cfg.n_layer == 1 ? " layer, " : " layers, ") +
            std::to_string(in.heads_stored) + (in.heads_stored == 1 ? " head stored)" : " heads stored)");
  t.header = {"layer", "attention", "alpha token-mean", "alpha Frobenius", "mean entropy (nats)"};
  nlohmann::json layers = nlohmann::json::array();
  plot::LinePlot& lp = out.alpha_plot;
  lp.title = "Residual mixing alpha_l by layer (attention share of the residual update)";
  lp.xlabel = "layer l";
  lp.ylabel = "alpha_l";
  plot::Series ptm{"token-mean", {}, {}}, pfr{"Frobenius", {}, {}};
  for (int l = 0; l < cfg.n_layer; ++l) {
    const auto& L = s.layers[static_cast<std::size_t>(l)];
    const std::string kind = attn_name(cfg.layers[static_cast<std::size_t>(l)].attn);
    t.add_row({output::fmt_int(l), kind, fmt(L.alpha_token_mean, 4), fmt(L.alpha_frobenius, 4), fmt(L.entropy, 6)});
    layers.push_back({{"layer", l},
                      {"attn", kind},
                      {"alpha_token_mean", L.alpha_token_mean},
                      {"alpha_frobenius", L.alpha_frobenius},
                      {"entropy", L.entropy}});
    ptm.x.push_back(l), ptm.y.push_back(L.alpha_token_mean);
    pfr.x.push_back(l), pfr.y.push_back(L.alpha_frobenius);
  }
  lp.series = {ptm, pfr};
  rep.tables.push_back(t);
  rep.body = {{"file", in.out},
              {"n_seq", s.n_seq},
              {"seq_len", T},
              {"n_layer", cfg.n_layer},
              {"heads_stored", in.heads_stored},
              {"tokenizer", in.tokenizer},
              {"input_tokens", in.input_tokens},
              {"mean_nll", s.nll},
              {"layers", layers}};
  rep.notes.push_back("mean next-token loss on the captured windows: " + fmt(s.nll, 5) + " nats/token");
  double uniform = 0;  // mean_t log(t + 1): the entropy of a uniform causal head
  for (int i = 0; i < T; ++i) uniform += std::log(i + 1.0);
  uniform /= T;
  rep.notes.push_back(
      "entropy: mean over stored heads, sequences and query rows of -sum_j p_ij log p_ij (rows "
      "normalised; a uniform causal head gives mean_t log(t+1) = " +
      fmt(uniform, 4) + ")");
  rep.notes.push_back("next: rollout --model " + in.out + " --alpha measured");
  return out;
}

}  // namespace cf::nn
