// jacobian — exact Jacobian block norms of a trained model against the runway bound of seed 000
// (Theorem 3.3; SPEC §2): J_ds = ||d h_d(L+r) / d h_s(L)|| (Frobenius and spectral) beside
// B = [(I + A(L+r-1)) ... (I + A(L))]_ds from the model's head-mean attention on the same window,
// split into self term and gate; the smallest C* with J <= C*^r B, the one-layer constants C_1(l),
// the check C* <= max C_1 and exact zeros outside the mask, Spearman(J, B), tightness and the gate
// share; heat maps of measured vs bound. Thin app over cf/influence/jacobian_analysis.hpp.
#include <cmath>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/data/token_file.hpp"
#include "cf/influence/capture_input.hpp"
#include "cf/influence/influence.hpp"
#include "cf/influence/jacobian_analysis.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"

using namespace cf;
using output::fmt;

namespace {

struct Options {
  std::string checkpoint, text, data, capture, split = "val", gpt2_dir;
  int n = 64, window = 0, layer = 0, span = 0, seed_batch = 0;
  app::CommonOptions common;
};

std::vector<std::int32_t> load_tokens(const Options& o, const nn::ModelConfig& cfg) {
  if (!o.data.empty()) {
    const data::TokenData d = data::read_token_files(o.data);
    require(d.meta.vocab_size == cfg.vocab_size, "vocabulary mismatch: --data ", o.data,
            " has vocab_size = ", d.meta.vocab_size, " but the checkpoint has vocab_size = ", cfg.vocab_size);
    const auto& s = o.split == "val" ? d.val : d.train;
    return std::vector<std::int32_t>(s.begin(), s.end());
  }
  return nn::tokenize_text_for(cfg, o.text, o.gpt2_dir);
}

std::string with_suffix(const std::string& path, const std::string& suffix) {
  const auto dot = path.rfind('.');
  return path.substr(0, dot) + suffix + path.substr(dot);
}

nlohmann::json check_json(const influence::BoundCheck& b) {
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
  nlohmann::json rows = nlohmann::json::array();  // row d holds s = 0..d (the causal lower triangle)
  for (long d = 0; d < m.rows(); ++d) {
    std::vector<double> r(static_cast<std::size_t>(d + 1));
    for (long s = 0; s <= d; ++s) r[static_cast<std::size_t>(s)] = m(d, s);
    rows.push_back(r);
  }
  return rows;
}

void run(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  const nn::Model<float> model = nn::load_model(o.checkpoint);
  const auto& cfg = model.config;
  require(o.layer < cfg.n_layer, "--layer = ", o.layer, " must be < n_layer = ", cfg.n_layer);
  const int r = o.span > 0 ? o.span : cfg.n_layer - o.layer;
  require(o.layer + r <= cfg.n_layer, "--layer + --span = ", o.layer + r, " exceeds n_layer = ", cfg.n_layer);
  influence::Windows w;
  if (!o.capture.empty()) {  // sequence --window of a capture of this model
    const auto cw = influence::capture_token_windows(o.capture, cfg);
    require(o.window < static_cast<int>(cw.size()), "--window = ", o.window, " but the capture holds ", cw.size(),
            " sequences");
    w.tokens = {cw[o.window]};
    w.starts = {o.window};
  } else {
    require(o.n <= cfg.block_size, "--n = ", o.n,
            " exceeds the context of the checkpoint (block_size = ", cfg.block_size, ")");
    w = influence::influence_windows(load_tokens(o, cfg), o.n, o.window + 1);
  }
  const std::vector<std::int32_t>& win = w.tokens.back();
  const int n = static_cast<int>(win.size());
  const influence::JacobianAnalysis a = influence::analyse_jacobian(model, win, o.layer, r, o.seed_batch);

  output::Report rep;
  rep.meta = output::metadata("jacobian", {{"checkpoint", o.checkpoint},
                                           {"text", o.text},
                                           {"data", o.data},
                                           {"n", n},
                                           {"capture", o.capture},
                                           {"window", o.window},
                                           {"window_start", w.starts.back()},
                                           {"layer", o.layer},
                                           {"span", r},
                                           {"seed_batch", o.seed_batch}});
  output::Table lt;
  lt.title = "One-layer constants C_1(l) = max ||d h_d(l+1)/d h_w(l)|| / (I + A(l))_dw and blocks outside the mask";
  lt.header = {"layer",         "attention",       "C_1 Frobenius", "C_1 spectral", "pairs outside mask",
               "nonzero there", "A row-normalised"};
  nlohmann::json layers = nlohmann::json::array();
  bool zeros_ok = true;
  for (int k = 0; k < r; ++k) {
    const int l = o.layer + k;
    const auto& f = a.one_layer_frobenius[k];
    const auto& s = a.one_layer_spectral[k];
    zeros_ok = zeros_ok && f.outside_mask_nonzero == 0;
    const bool rn = a.attention.row_normalised[l];
    lt.add_row({std::to_string(l), nn::attn_name(cfg.layers[l].attn), fmt(f.c1, 5), fmt(s.c1, 5),
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
  st.title = "Theorem 3.3 (seed 000): J_ds <= C^r [(I + A(L+r-1)) ... (I + A(L))]_ds, L = " + std::to_string(o.layer) +
             ", r = " + std::to_string(r) + ", n = " + std::to_string(n);
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
    st.add_row({b == &a.frobenius ? "Frobenius" : "spectral", fmt(b->c_star, 5), fmt(b->c1_max, 5),
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
      "gate > self share over pairs s < d: seed 000 Eqs. 6-7 direct-path gate times runway product "
      "vs the residual self term");
  rep.body = {{"layer", o.layer},
              {"span", r},
              {"n", n},
              {"window_start", w.starts.back()},
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
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) {
    auto heat = [&](const Eigen::MatrixXd& m, const std::string& title, const std::string& path) {
      plot::Heatmap h;
      h.title = title;
      h.xlabel = "source position s";
      h.ylabel = "target position d";
      h.value_label = "log10";
      h.values = Eigen::MatrixXd::Constant(m.rows(), m.cols(), std::nan(""));
      for (long d = 0; d < m.rows(); ++d)
        for (long s = 0; s <= d; ++s) h.values(d, s) = m(d, s) > 0 ? std::log10(m(d, s)) : std::nan("");
      plot::save(h, path);
    };
    heat(a.J.frobenius, "measured ||d h_d(L+r)/d h_s(L)||_F (log10)", o.common.plot);
    heat(a.bound.bound * std::pow(a.frobenius.c_star, r), "bound C*^r [(I+A)...(I+A)]_ds (log10)",
         with_suffix(o.common.plot, "_bound"));
  }
  if (!zeros_ok || !a.frobenius.c_star_within_c1 || !a.spectral.c_star_within_c1 ||
      a.frobenius.zero_bound_nonzero_j > 0)
    throw Error("jacobian: C* > max C_1 or a nonzero block outside the mask: a bug in the Jacobians or the bound");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "jacobian: exact Jacobian block norms ||d h_d(L+r)/d h_s(L)|| of a trained checkpoint against the runway "
      "bound of seed 000 Theorem 3.3 (C*, C_1, zeros outside the mask, Spearman, tightness, gate share).",
      "jacobian"};
  app.add_option("--checkpoint", o.checkpoint, "Checkpoint written by train (HDF5)")->required();
  auto* in = app.add_option_group("input", "token input (exactly one)");
  in->add_option("--text", o.text, "Text file (or brown|kjv), tokenised with the checkpoint's vocabulary");
  in->add_option("--data", o.data, "Prefix of prepare-data token files (vocab_size must match the checkpoint)");
  in->add_option("--capture", o.capture, "Capture file of this checkpoint: analyse its sequence --window (n = T)");
  in->require_option(1);
  app.add_option("--split", o.split, "Split of --data to read")
      ->check(CLI::IsMember({"val", "train"}))
      ->capture_default_str();
  app.add_option("--n", o.n, "Window length n (<= block size)")->check(CLI::Range(2, 1 << 16))->capture_default_str();
  app.add_option("--window", o.window, "Which window: the last of window+1 evenly spread ones (capture's rule)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--layer", o.layer, "First layer L (h(L) = residual entering block L)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--span", o.span, "Number of layers r [default: n_layer - L]")->check(CLI::Range(0, 10000));
  app.add_option("--seed-batch", o.seed_batch,
                 "Seeds (vector-Jacobian products) per batched backward pass (0 = d_model)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  app.add_option("--gpt2-dir", o.gpt2_dir, "Folder with encoder.json and vocab.bpe for GPT-2 checkpoints");
  app::add_common_options(app, o.common);
  app.get_option("--plot")->description(
      "Heat map of the measured Frobenius block norms to FILE.svg|png; the bound "
      "C*^r B goes to FILE_bound.svg|png");
  app.footer(
      "Examples:\n"
      "  jacobian --checkpoint run/best.h5 --text brown --n 64 --plot jac.svg\n"
      "  jacobian --checkpoint run/best.h5 --text brown --n 32 --layer 1 --span 2 --format json --out jac.json\n"
      "Exit codes: 0 ok, 1 runtime failure or a failed check (C* > max C_1, nonzero outside the mask),\n"
      "  2 invalid input (n > block size, bad layers, missing/foreign checkpoint).");
  return app::run(app, argc, argv, [&] { run(o); });
}
