// rollout — residual-aware attention rollout and position-bias theory of Position bias (Herasimchyk et al.), plus the
// infinite-depth dichotomy (Theorem 5.4), monotonicity checks, context sweeps and the Jacobian
// bound of Runway (Lee & Clark). Thin app: one options struct, a set-up (cf::rollout::make_source) and one run
// function per subcommand that reports lib/rollout results (docs/conventions.md, docs/rollout.md).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/rollout_backend.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/influence/agreement_table.hpp"
#include "cf/influence/profile_io.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/flow_report.hpp"
#include "cf/rollout/jacobian_bound.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/sweep.hpp"
#include "cf/rollout/theory_report.hpp"
#include "cf/rollout/variants.hpp"
#include "options.hpp"

using namespace cf;
using namespace cf::rollout;
using output::fmt;
using rollout_app::Options;

namespace {

/// A checkpoint given as --model is captured in-process (cf/nn/capture.hpp, as the `capture` tool
/// does) into a temporary file that lives as long as this object; the rollout then reads it as a
/// capture: measured alpha and measured kernels of the trained model.
struct TemporaryCapture {
  TempFile file{"cf_rollout_capture"};  // registered: removed on exit, error and SIGINT/SIGTERM
  std::string path = file.path();
  TemporaryCapture(const std::string& checkpoint, const std::string& text, long n, int n_seq) {
    const nn::Model<float> model = cf::model::load_model(checkpoint);
    const int T = n > 0 ? static_cast<int>(std::min<long>(n, 1L << 30)) : std::min(256, model.config.block_size);
    require(n <= model.config.block_size, "--n = ", n,
            " exceeds the checkpoint's block_size = ", model.config.block_size,
            " (a checkpoint is captured with T = n)");
    const auto windows = nn::capture_windows(
        hf::tokenize_text_for_checkpoint(checkpoint, model.config.vocab_size, text, "", nullptr), T, n_seq);
    nn::CaptureOptions co;
    co.store_qk = false;
    co.source = text;
    nn::capture_model(model, windows, path, co);
  }
};

/// Set-up shared by every subcommand: option checks that need no model, the in-process capture of
/// a checkpoint, then cf::rollout::make_source.
struct Setup {
  std::optional<TemporaryCapture> capture;
  RolloutSource s;
};

void setup(Setup& st, const Options& o, long default_n) {
  require(std::isfinite(o.C) && o.C > 0, "--C must be a finite number > 0, got ", o.C);
  require(std::isfinite(o.eps) && o.eps >= 0 && o.eps <= 1,
          "--eps must lie in [0, 1] (0 = smallest kernel weight), got ", o.eps);
  require(o.target >= -1, "--target must be a position >= 0, got ", o.target);
  SourceOptions so = o.src;
  if (o.src.model_config.empty() && is_model_file(o.src.model) && is_checkpoint_file(o.src.model)) {
    // measured kernels fix n = T (the capture length); ALiBi kernels only need the measured alpha
    st.capture.emplace(o.src.model, o.capture_text, o.src.kernels == "alibi" ? 0 : o.src.n, o.capture_seqs);
    so.capture_path = st.capture->path;
    so.capture_note = {{"text", o.capture_text}, {"sequences", o.capture_seqs}};
  }
  st.s = make_source(so, default_n);
}

void refuse_plot(const Options& o, const std::string& mode) {
  require(o.common.plot.empty(), "--plot: `rollout ", mode, "` reports a table of statistics and draws no plot");
}

/// A square matrix as a headerless CSV in full precision (docs/conventions.md "CSV"), atomically.
void write_matrix_csv(const std::string& path, const RowMatrix& M) {
  std::ostringstream os;
  os.precision(17);
  for (long i = 0; i < M.rows(); ++i)
    for (long j = 0; j < M.cols(); ++j) os << M(i, j) << (j + 1 < M.cols() ? "," : "\n");
  write_file_atomic(path, os.str());
}

/// Summary table of variant profiles (the layout other tools extend with more columns).
output::Table variant_table(const std::vector<VariantProfile>& vs, const Eigen::VectorXd& influence,
                            const std::string& title, nlohmann::json& summary) {
  output::Table t;
  t.title = title;
  t.header = {"variant", "p_0", "p_n-1", "argmin", "min", "primacy", "recency", "seconds"};
  if (influence.size()) {
    t.header.push_back("spearman");
    t.header.push_back("W1/(n-1)");
  }
  for (const auto& v : vs) {
    auto [row, js] = variant_summary_row(v.label, v.p, v.seconds, influence);
    t.add_row(row);
    summary[v.key] = js;
  }
  return t;
}

/// `--model CHECKPOINT --influence auto|FILE`: the Position bias (Herasimchyk et al.) Tables 2-5 comparison on the
/// model's own windows (cf/influence/agreement_table.hpp; docs/influence.md).
void run_influence_agreement(const Options& o, bool with_flow = false) {
  const nn::Model<float> model = cf::model::load_model(o.src.model);
  const int n =
      o.src.n > 0 ? static_cast<int>(std::min<long>(o.src.n, 1L << 30)) : std::min(256, model.config.block_size);
  require(n <= model.config.block_size, "--n = ", n,
          " exceeds the checkpoint's block_size = ", model.config.block_size);
  const auto w = influence::influence_windows(
      hf::tokenize_text_for_checkpoint(o.src.model, model.config.vocab_size, o.capture_text, "", nullptr), n,
      o.influence_windows);
  const bool alibi_ok = model.config.pos == nn::PosKind::Alibi;
  const auto src =
      influence::parse_kernel_source(o.kernel_source == "auto" ? (alibi_ok ? "alibi" : "measured") : o.kernel_source);
  influence::require_kernel_source(model.config, src);  // before the long work
  Eigen::VectorXd infl;
  std::string isrc;
  if (o.influence != "auto") {
    infl = influence::read_profile(o.influence);
    require(infl.size() == n, "--influence has ", infl.size(), " positions but n = ", n);
    isrc = "file " + o.influence;
  }
  const influence::ModelMeasurements m = influence::measure_model(model, w.tokens);
  if (o.influence == "auto") {
    infl = influence::measure_influence(model, w.tokens, influence::parse_target(o.influence_target)).profile;
    isrc = "measured in process (Eq. 6, target " + o.influence_target + ", " + std::to_string(o.influence_windows) +
           " windows of " + o.capture_text + ")";
  }
  const auto ag = influence::rollout_agreement(model, m, src, infl, o.src.alpha_kind == "frobenius", with_flow,
                                               parse_flow_algorithm(o.flow_algorithm));
  output::Report rep = influence::agreement_report(ag, infl, o.src.model, isrc);
  rep.meta =
      output::metadata(with_flow ? "rollout flow" : "rollout", {{"model", o.src.model},
                                                                {"n", n},
                                                                {"influence", o.influence},
                                                                {"kernel_source", influence::kernel_source_name(src)},
                                                                {"windows", o.influence_windows},
                                                                {"text", o.capture_text},
                                                                {"alpha_kind", o.src.alpha_kind},
                                                                {"window_starts", w.starts}});
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(influence::agreement_plot(ag, infl, o.src.model), o.common.plot);
}

void run_rollout(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.matrix, "--matrix");
  if (!o.influence.empty() && o.src.model_config.empty() && is_model_file(o.src.model) &&
      std::filesystem::exists(o.src.model) && is_checkpoint_file(o.src.model)) {
    require(o.src.alpha == "measured",
            "--influence with a checkpoint compares against the measured alpha: use --alpha measured");
    return run_influence_agreement(o);
  }
  require(o.influence != "auto", "--influence auto measures the influence of a checkpoint: give --model CHECKPOINT.h5");
  require(o.kernel_source == "auto", "--kernel-source applies to --model CHECKPOINT with --influence");
  Setup st;
  setup(st, o, 256);
  const RolloutSource& s = st.s;
  require(s.structured || o.path == "auto",
          "--path dense applies to ALiBi models; kernels from a file or capture "
          "always take the dense path");
  Eigen::VectorXd influence;
  if (!o.influence.empty()) {
    influence = cf::influence::read_profile(o.influence);  // number list, or influence --out CSV/JSON
    require(influence.size() == s.n, "--influence has ", influence.size(), " positions but n = ", s.n);
  }
  const auto device = gpu::make_rollout_backend(o.backend);  // null: the CPU paths
  const std::vector<VariantProfile> vs = rollout_variants(s, s.n, o.path == "dense", device.get());
  output::Report rep;
  nlohmann::json params = s.params;
  params["path"] =
      s.structured ? (o.path == "dense" ? "dense" : "structured O(L H n)") : "dense (" + s.kernel_source + ")";
  rep.meta = output::metadata("rollout", params);
  nlohmann::json summary = nlohmann::json::object(), variants = nlohmann::json::object();
  rep.tables.push_back(variant_table(vs, influence,
                                     "Last-row rollout p_j = P(L)[n-1, j], " + s.name + ", n = " + std::to_string(s.n) +
                                         ", L = " + std::to_string(s.L) +
                                         " (Position bias (Herasimchyk et al.), Eq. 3)",
                                     summary));
  for (const auto& v : vs) variants[v.key] = std::vector<double>(v.p.data(), v.p.data() + v.p.size());
  rep.body = {{"summary", summary}, {"variants", variants}};
  rep.notes.push_back("primacy / recency = mass of the first / last ceil(n/10) positions");
  if (vs.size() < 3)
    rep.notes.push_back(
        "variant (c) omitted: no content model (--content none, a config without "
        "content, kernel file or capture)");
  if (app::resolve_format(o.common) == output::Format::Csv) {
    output::Table d;
    d.title = "distributions";
    d.header = {"position"};
    for (const auto& v : vs) d.header.push_back(v.key);
    for (long j = 0; j < s.n; ++j) {
      std::vector<std::string> row = {output::fmt_int(j)};
      for (const auto& v : vs) row.push_back(fmt(v.p(j), 10));
      d.add_row(row);
    }
    rep.tables.push_back(d);
  }
  if (!o.matrix.empty()) {
    require(s.n <= 2048, "--matrix writes the full n x n rollout; n <= 2048 required, got ", s.n);
    const auto ks = source_kernels(s, false, 2048);
    write_matrix_csv(o.matrix, rollout_matrix_dense([&](int l) { return ks[l]; }, s.alpha, s.n));
    rep.notes.push_back("full rollout matrix P(L) of variant (b) written to " + o.matrix);
  }
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) {
    plot::LinePlot lp;
    lp.title = "Rollout of the last position, " + s.name + " (n = " + std::to_string(s.n) + ")";
    lp.xlabel = "input position j";
    lp.log_y = o.plot_scale == "log";
    // linear: the profiles rise at both ends; log: (a) falls from the top left, the rest stay on top
    lp.key = lp.log_y ? "bottom left" : "top center";
    lp.ylabel = lp.log_y ? "p_j (influence on the next-token position, log scale)"
                         : "p_j (influence on the next-token position)";
    if (!lp.log_y && vs.size() > 1) {
      // Linear, as the published figures: (a) collapses onto token 0 (p_0 near 1) and would flatten
      // (b), (c) to the axis, so the range follows the residual variants and (a) is clipped.
      double top = 0;
      for (std::size_t k = 1; k < vs.size(); ++k) top = std::max(top, vs[k].p.maxCoeff());
      if (influence.size()) top = std::max(top, influence.maxCoeff());
      lp.y_min = 0;
      lp.y_max = 1.1 * top;  // the plot names the curves it clips (cf::plot::clipped_series)
    }
    for (const auto& v : vs) {
      plot::Series se{v.label, {}, {}};
      for (long j = 0; j < s.n; ++j) se.x.push_back(j), se.y.push_back(v.p(j));
      lp.series.push_back(se);
    }
    if (influence.size()) {
      plot::Series se{"measured influence", {}, {}};
      for (long j = 0; j < s.n; ++j) se.x.push_back(j), se.y.push_back(influence(j));
      lp.series.push_back(se);
    }
    plot::save(lp, o.common.plot);
  }
}

/// `rollout flow`: attention flow (max-flow on the layered graph of variant (b)'s residual-mixed
/// kernels, cf/rollout/flow.hpp) beside the rollout variants; report built by cf/rollout/flow_report.hpp.
void run_flow(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.flow_matrix, "--flow-matrix");
  require(o.matrix.empty(),
          "--matrix writes the rollout matrix of the default mode; `rollout flow` writes the flow "
          "matrix with --flow-matrix FILE");
  require(o.path == "auto", "--path: `rollout flow` builds dense kernels (no structured path to choose)");
  const FlowAlgorithm alg = parse_flow_algorithm(o.flow_algorithm);
  if (!o.influence.empty() && o.src.model_config.empty() && is_model_file(o.src.model) &&
      std::filesystem::exists(o.src.model) && is_checkpoint_file(o.src.model)) {
    require(o.src.alpha == "measured",
            "--influence with a checkpoint compares against the measured alpha: use --alpha measured");
    require(o.target < 0, "--target: --influence compares the flow to the last position (drop --target)");
    require(o.flow_matrix.empty(), "--flow-matrix: not available with --model CHECKPOINT --influence");
    return run_influence_agreement(o, true);
  }
  require(o.influence != "auto", "--influence auto measures the influence of a checkpoint: give --model CHECKPOINT.h5");
  require(o.kernel_source == "auto", "--kernel-source applies to --model CHECKPOINT with --influence");
  Setup st;
  setup(st, o, 64);
  const RolloutSource& s = st.s;
  require(s.n <= 2048,
          "`rollout flow` builds n x n kernels per layer and one max-flow per source: --n <= 2048 "
          "required, got ",
          s.n);
  // one max-flow per source on positions j..n-1: about L n^3 / 6 edges in all (docs/rollout.md)
  const double work = s.L * std::pow(static_cast<double>(s.n), 3) / 6;
  require(work <= 2e10, "`rollout flow`: L = ", s.L, " layers at n = ", s.n, " make about ", fmt(work, 3),
          " edges over all sources (L n^3 / 6; limit 2e10, e.g. n = 2048 at L = 12, hours of work): lower --n");
  require(o.target < s.n, "--target must be < n = ", s.n, ", got ", o.target);
  require(o.flow_matrix.empty() || s.n <= 512, "--flow-matrix solves n (n + 1) / 2 max-flows: n <= 512 required, got ",
          s.n);
  Eigen::VectorXd influence;
  if (!o.influence.empty()) {
    require(o.target < 0 || o.target == s.n - 1, "--target: --influence compares the flow to the last position");
    influence = cf::influence::read_profile(o.influence);
    require(influence.size() == s.n, "--influence has ", influence.size(), " positions but n = ", s.n);
  }
  const std::vector<RowMatrix> R = residual_mixed_kernels(source_kernels(s, false, 2048), s.alpha);
  FlowOptions fo;
  fo.target = o.target;
  fo.algorithm = alg;
  const FlowResult fr = attention_flow(R, fo);
  const std::vector<VariantProfile> vs = rollout_variants(s, s.n);
  output::Report rep = flow_report(s, vs, fr, alg, influence, app::resolve_format(o.common) == output::Format::Csv);
  nlohmann::json params = s.params;
  params["flow_algorithm"] = flow_algorithm_name(alg);
  params["flow_target"] = fr.target;
  params["flow_kernels"] = "residual-mixed kernels of variant (b): (1 - alpha_l) I + alpha_l Abar(l), " +
                           (s.structured ? std::string("ALiBi without content") : s.kernel_source);
  rep.meta = output::metadata("rollout flow", params);
  if (!o.flow_matrix.empty()) {
    write_matrix_csv(o.flow_matrix, attention_flow_matrix(R, alg));
    rep.notes.push_back("flow matrix F[t, j] (max-flow from (0, j) to (L, t)) written to " + o.flow_matrix);
  }
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(flow_plot(s, vs, fr, influence, o.plot_scale == "log"), o.common.plot);
  if (!(fr.max_cut_gap <= 1e-9))
    throw Error("flow: a min-cut certificate differs from its flow by " + fmt(fr.max_cut_gap, 3) +
                " relative (> 1e-9): a solver failure");
}

void run_sweep(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  require(o.src.n == 0,
          "sweep: give the lengths with the sweep's own --n LIST (e.g. rollout sweep --n 64,128,...,4096)");
  const std::vector<long> ns = parse_n_list(o.sweep_n, "--n");
  Options os = o;  // a capture or checkpoint model: its content-free ALiBi kernels (any n)
  if (os.src.model_config.empty() && is_model_file(os.src.model) && os.src.kernels == "auto" &&
      os.src.kernel_file.empty())
    os.src.kernels = "alibi";
  Setup st;
  setup(st, os, ns.front());
  const RolloutSource& s = st.s;
  const auto device = gpu::make_rollout_backend(o.backend);  // null: the CPU paths
  const auto rows = sweep_context(s, ns, device.get());
  output::Report rep;
  nlohmann::json params = s.params;
  params.erase("n");
  params["n_list"] = ns;
  params["path"] = "structured O(L H n)";
  rep.meta = output::metadata("rollout sweep", params);
  output::Table t;
  t.title =
      "Context-length sweep of the last-row rollout, " + s.name + ", L = " + std::to_string(s.L) +
      " (Position bias (Herasimchyk et al.), Eq. 3; primacy / recency = mass of the first / last ceil(n/10) positions)";
  t.header = {"variant", "n", "p_0", "p_n-1", "primacy", "recency", "argmin", "min", "seconds"};
  nlohmann::json js = nlohmann::json::array();
  for (const auto& r : rows) {
    const auto& m = r.summary;
    // the rollout table's styles: masses 4 significant digits, integers with separators
    t.add_row({r.label, output::fmt_int(r.n), fmt(m.first, 4), fmt(m.last, 4), fmt(m.primacy, 4), fmt(m.recency, 4),
               output::fmt_int(m.argmin), fmt(m.min, 4), fmt(r.seconds, 3)});
    js.push_back({{"variant", r.key},
                  {"n", r.n},
                  {"p_first", m.first},
                  {"p_last", m.last},
                  {"primacy_mass", m.primacy},
                  {"recency_mass", m.recency},
                  {"argmin", m.argmin},
                  {"min", m.min},
                  {"seconds", r.seconds}});
  }
  rep.tables.push_back(t);
  rep.body = {{"rows", js}};
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) {
    plot::save(sweep_plot(rows, s.name), o.common.plot);
  }
}

void run_monotonicity(const Options& o) {
  refuse_plot(o, "monotonicity");
  Setup st;
  setup(st, o, 64);
  const RolloutSource& s = st.s;
  output::Report rep;
  rep.meta = output::metadata("rollout monotonicity", s.params);
  output::Table t;
  t.title =
      "Stochastic monotonicity of Abar(l) (Position bias (Herasimchyk et al.), Assumption 4.1 / Definition A.1), n = " +
      std::to_string(s.n) + ", tolerance 1e-10";
  t.header = {"kernel", "layer", "triples", "violation rate", "mean gap", "expected shortfall", "max gap"};
  nlohmann::json rows = nlohmann::json::array();
  auto add = [&](const std::string& what, const std::vector<RowMatrix>& ks, bool per_layer) {
    for (int l = 0; l < (per_layer ? s.L : 1); ++l) {
      const auto st = monotonicity_stats(ks[l]);
      t.add_row({what,
                 per_layer                                            ? std::to_string(l + 1)
                 : output::number_style() == output::NumberStyle::Raw ? "0"
                                                                      : "all",
                 output::fmt_int(st.triples), fmt(st.violation_rate, 4), fmt(st.mean_gap, 4),
                 fmt(st.expected_shortfall, 4), fmt(st.max_gap, 4)});
      rows.push_back({{"kernel", what},
                      {"layer", per_layer ? l + 1 : 0},
                      {"triples", st.triples},
                      {"violation_rate", st.violation_rate},
                      {"mean_gap", st.mean_gap},
                      {"expected_shortfall", st.expected_shortfall},
                      {"max_gap", st.max_gap}});
    }
  };
  const auto plain = source_kernels(s, false);
  const bool per_layer_plain = !s.structured || !s.base.layer_slopes.empty() || !s.base.layer_head_weights.empty();
  add(s.structured ? "ALiBi, no content" : s.kernel_source, plain, per_layer_plain);
  if (s.structured && s.delta.size() > 0)
    add("ALiBi + content", source_kernels(s, true), s.delta.rows() > 1 || per_layer_plain);
  rep.tables.push_back(t);
  rep.body = {{"kernels", rows}};
  app::emit(rep, o.common);
}

void run_verify(const Options& o) {
  refuse_plot(o, "verify");
  Setup st;
  setup(st, o, 48);
  const RolloutSource& s = st.s;
  VerifyOutcome v = verify_report(s, o.seeds);
  v.report.meta = output::metadata("rollout verify", s.params);
  app::emit(v.report, o.common);
  if (!v.all_ok) throw Error("verify: a proposition was violated beyond 1e-12 (see the table)");
}

void run_dichotomy(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  require(o.depth >= 1 && o.depth <= 1000000, "--depth must lie in [1, 1000000], got ", o.depth);
  std::vector<AlphaSpec> specs;
  for (const std::string& text : {o.deep_alpha, o.deep_alpha2}) {
    const AlphaSpec sp = parse_alpha_spec(text);
    require(sp.kind == AlphaSpec::Kind::Constant || sp.kind == AlphaSpec::Kind::Power,
            "dichotomy schedules (--schedule, --schedule2) must be const:X or power[0|1]:A0,BETA, got '", text, "'");
    specs.push_back(sp);
  }
  Setup st;
  setup(st, o, 8);
  const RolloutSource& s = st.s;
  require(s.n <= 64, "dichotomy follows one row in 50-digit arithmetic: --n <= 64 required, got ", s.n);
  DichotomyOutcome dc = dichotomy_report(source_kernels(s, false)[0], specs, s.name, o.depth, o.eps);
  dc.report.meta = output::metadata("rollout dichotomy", s.params);
  app::emit(dc.report, o.common);
  if (!o.common.plot.empty()) plot::save(dc.plot, o.common.plot);
  if (!dc.all_hold) throw Error("dichotomy: a bound of Theorem 5.4 failed (see the table)");
}

void run_jacobian(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  Setup st;
  setup(st, o, 16);
  const RolloutSource& s = st.s;
  const auto ks = source_kernels(s, true);
  const auto b = jacobian_bound(ks, o.C);
  const long d = o.target >= 0 ? o.target : s.n - 1;
  require(d < s.n, "--target must be < n = ", s.n, ", got ", d);
  output::Report rep;
  nlohmann::json params = s.params;
  params["C"] = o.C;
  params["target"] = d;
  rep.meta = output::metadata("rollout jacobian", params);
  output::Table t;
  t.title = "Jacobian bound (Runway (Lee & Clark), Theorem 3.3): C^r [(I + A(r)) ... (I + A(1))]_{d,s}, d = " +
            std::to_string(d) + ", r = " + std::to_string(ks.size()) + " layers, C = " + fmt(o.C);
  t.header = {"s", "bound", "self term", "gate x runway", "gate share"};
  nlohmann::json rows = nlohmann::json::array();
  plot::LinePlot lp;
  lp.title = "Jacobian bound (Runway (Lee & Clark) Theorem 3.3) of target d = " + std::to_string(d) + ", " + s.name;
  lp.xlabel = "source position s";
  lp.ylabel = "bound entry [(I + A(r)) ... (I + A(1))]_{d,s} (C^r included)";
  lp.log_y = true;  // entries span many decades (they grow like 2^r at s = 0); zeros are not drawn
  plot::Series sb{"bound", {}, {}}, ss{"self term", {}, {}}, sg{"gate x runway", {}, {}};
  for (long src = 0; src <= d; ++src) {
    const double tot = b.bound(d, src), self = b.self_term(d, src), gate = b.gate_term(d, src);
    t.add_row({output::fmt_int(src), fmt(tot, 6), fmt(self, 6), fmt(gate, 6), fmt(tot > 0 ? gate / tot : 0, 4)});
    rows.push_back({{"s", src}, {"bound", tot}, {"self_term", self}, {"gate_term", gate}});
    for (auto [se, y] : {std::pair{&sb, tot}, {&ss, self}, {&sg, gate}}) se->x.push_back(src), se->y.push_back(y);
  }
  lp.series = {sb, ss, sg};
  rep.tables.push_back(t);
  rep.body = {{"rows", rows}};
  rep.notes.push_back("kernels: the model's Abar(l) (content included) or --kernel-file; entries can grow like 2^r");
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(lp, o.common.plot);
}

void add_model_options(CLI::App& app, Options& o) {
  SourceOptions& s = o.src;
  app.add_option("--model", s.model,
                 "Preset (bloom-176b|bloom|bloom-7b1|mpt-7b|mpt-30b|falcon-rw-7b), a capture .h5 file, or a checkpoint "
                 ".h5 or Hugging Face directory (captured in-process on --capture-text)")
      ->capture_default_str();
  app.add_option("--model-config", s.model_config,
                 "Model config (YAML or JSON, the Position bias (Herasimchyk et al.) reference schema): layers, heads, "
                 "slopes, head weights, "
                 "alpha schedule, per-head content, mask; replaces --model");
  app.add_option("--dataset", s.dataset,
                 "Presets: measured alpha schedule and content prior of fineweb-edu (default) | dclm | wikipedia")
      ->check(CLI::IsMember({"fineweb-edu", "dclm", "wikipedia"}));
  app.add_option("--head-weights", s.head_weights,
                 "File with H non-negative head weights (default: uniform mean over heads)");
  app.add_option("--n", s.n,
                 "Sequence length n [default: 256 or the config's sequence_length; verify/monotonicity "
                 "48/64; dichotomy 8; jacobian 16; flow 64]")
      ->check(CLI::Range(1L, 1L << 26));
  app.add_option(
         "--alpha", s.alpha,
         "Residual schedule: measured | const:X | power:A0,BETA (= power0: alpha_l = A0/l^BETA, first layer A0, "
         "as the reference) | power1:A0,BETA (A0/(l+1)^BETA, first layer A0/2^BETA) | file:PATH")
      ->capture_default_str();
  app.add_option(
         "--plot-scale", o.plot_scale,
         "Plot y axis: linear (as the published figures; range of (b), (c), with (a) clipped) | log (every curve)")
      ->check(CLI::IsMember({"linear", "log"}))
      ->capture_default_str();
  app.add_option("--alpha-kind", s.alpha_kind,
                 "Measured alpha of a capture file: token-mean (published) | frobenius (Eq. 1)")
      ->check(CLI::IsMember({"token-mean", "frobenius"}))
      ->capture_default_str();
  app.add_option("--mask", s.mask, "Mask: causal | swa:W (W keys, self included)")->capture_default_str();
  app.add_option("--slopes", s.slopes,
                 "ALiBi slopes: preset (as shipped / as the config) | simple (2^(-8h/H)) | hf (BLOOM recipe)")
      ->check(CLI::IsMember({"preset", "simple", "hf"}))
      ->capture_default_str();
  app.add_flag("--falcon-scale", s.falcon_scale, "Divide ALiBi slopes by sqrt(d_head) (Falcon; presets)");
  app.add_option("--content", s.content,
                 "Content for variant (c): measured (per layer and head; the config's) | mean | none | c,delta")
      ->capture_default_str();
  app.add_option("--content-scale", s.content_scale,
                 "Content scores: raw q.k (as published) | sqrt (divided by sqrt(d_head))")
      ->check(CLI::IsMember({"raw", "sqrt"}))
      ->capture_default_str();
  app.add_option("--kernel-file", s.kernel_file,
                 "Measured kernels: n rows of n numbers (one layer) or L*n rows; dense path");
  app.add_option("--capture-text", o.capture_text,
                 "Checkpoint models: text captured in-process for the measured alpha and kernels (file, brown or kjv; "
                 "bytes, GPT-2 BPE, or a Hugging Face directory's tokenizer.json)")
      ->capture_default_str();
  app.add_option("--capture-seqs", o.capture_seqs, "Checkpoint models: number of captured sequences of n tokens")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--kernels", s.kernels,
                 "Kernels of a capture model: auto (--kernel-file if given, else measured) | measured (uniform head "
                 "mean of the capture's attention probabilities, averaged over its sequences; n = T) | file | alibi "
                 "(ALiBi checkpoints: the content-free ALiBi kernels of the model's slopes, any n; sweep's default)")
      ->check(CLI::IsMember({"auto", "measured", "file", "alibi"}))
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "rollout: residual-aware attention rollout of Position bias (Herasimchyk et al.) (position bias: U-shaped "
      "priors, primacy and "
      "recency forces, infinite-depth collapse) and the Jacobian bound of Runway (Lee & Clark). Modes: default "
      "rollout, "
      "'sweep', 'monotonicity', 'verify', 'dichotomy', 'jacobian', 'flow'.",
      "rollout"};
  app.fallthrough();
  add_model_options(app, o);
  app.add_option("--path", o.path, "Computation: auto (structured O(L H n) when possible) | dense")
      ->check(CLI::IsMember({"auto", "dense"}))
      ->capture_default_str();
  app.add_option("--influence", o.influence,
                 "Measured influence: a profile file (n numbers, or influence --out CSV/JSON), or auto (--model "
                 "CHECKPOINT: measured in process); Spearman and W1/(n-1) per variant");
  app.add_option(
         "--kernel-source", o.kernel_source,
         "With --model CHECKPOINT --influence: alibi (content-free ALiBi kernels; (c) adds the content measured "
         "from the model) | measured (head-mean attention; (c) not defined) | auto (alibi for ALiBi checkpoints)")
      ->check(CLI::IsMember({"auto", "alibi", "measured"}))
      ->capture_default_str();
  app.add_option("--influence-windows", o.influence_windows,
                 "Windows of --capture-text for --influence auto and the measured kernels")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--influence-target", o.influence_target, "--influence auto: probability | log-probability | logit")
      ->check(CLI::IsMember({"probability", "log-probability", "logit"}))
      ->capture_default_str();
  app.add_option("--matrix", o.matrix, "Also write the full rollout matrix P(L) of variant (b) as CSV (n <= 2048)");
  gpu::add_analysis_device_option(app, o.device);
  app::add_common_options(app, o.common);
  auto* sweep =
      app.add_subcommand("sweep", "Variants (a), (b), (c) against context length n (structured O(L H n) path)");
  sweep
      ->add_option("--n", o.sweep_n,
                   "Sequence lengths: a list n1,n2,... or a,b,...,c (geometric when b/a is an integer)")
      ->capture_default_str();
  auto* mono = app.add_subcommand("monotonicity", "Stochastic-monotonicity statistics of the model's kernels");
  auto* verify = app.add_subcommand("verify", "Demonstrate Props. 4.2-4.5 on the model and random monotone kernels");
  verify->add_option("--seeds", o.seeds, "Number of random monotone kernel families")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  auto* dich = app.add_subcommand("dichotomy", "Theorem 5.4 at depths 10..--depth in 50-digit arithmetic");
  dich->add_option("--depth", o.depth, "Largest depth (layers)")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1000000L));
  dich->add_option("--schedule", o.deep_alpha, "Non-summable schedule (const:X or power:A0,BETA with BETA <= 1)")
      ->capture_default_str();
  dich->add_option("--schedule2", o.deep_alpha2, "Summable schedule (power:A0,BETA with BETA > 1)")
      ->capture_default_str();
  dich->add_option("--eps", o.eps, "Lemma 5.3 epsilon in [0, 1] [default 0: smallest kernel weight]");
  auto* flow = app.add_subcommand(
      "flow", "Attention flow (max-flow from each input position to the last) beside the rollout variants");
  flow->add_option("--algorithm", o.flow_algorithm,
                   "Max-flow solver (Boost.Graph): push-relabel | bk (Boykov-Kolmogorov)")
      ->check(CLI::IsMember({"bk", "push-relabel"}))
      ->capture_default_str();
  flow->add_option("--target", o.target, "Sink position t in [0, n) [default: n-1]");
  flow->add_option("--flow-matrix", o.flow_matrix,
                   "Also write the flow matrix F[t, j] for every target t as CSV (n <= 512)");
  auto* jac = app.add_subcommand("jacobian", "Runway (Lee & Clark) Theorem 3.3 bound for one target over all sources");
  jac->add_option("--C", o.C, "Per-layer constant C > 0")->capture_default_str();
  jac->add_option("--target", o.target, "Target position d in [0, n) [default: n-1]");
  for (auto* sub : {sweep, mono, verify, dich, jac, flow}) sub->fallthrough();
  app.require_subcommand(0, 1);
  app.footer(
      "Examples:\n"
      "  rollout --model bloom --alpha measured --plot bloom.svg\n"
      "  rollout --model bloom-7b1 --dataset dclm                       # DCLM schedule and content prior\n"
      "  rollout --model-config data/position-bias/config/rollout/alibi/no_content/bloom.yaml\n"
      "  rollout --model bloom --n 1048576 --content none --format json --out p.json\n"
      "  rollout --model mpt-7b --alpha power1:0.5,1.2 --mask swa:64 --format csv\n"
      "  rollout --model bloom --influence influence.txt\n"
      "  rollout sweep --model bloom --n 64,128,...,65536 --plot sweep.svg\n"
      "  rollout --model run/best.h5 --alpha measured --influence auto --n 128   # Position bias (Herasimchyk et al.) "
      "Tables 2-5 layout\n"
      "  rollout --model run/capture.h5 --alpha measured               # measured alpha and kernels\n"
      "  rollout --model run/best.h5 --alpha measured --n 128          # a checkpoint: captured on KJV text first\n"
      "  rollout --model run/capture.h5 --kernel-file kernels.txt --alpha measured\n"
      "  rollout verify --model bloom --n 48\n"
      "  rollout monotonicity --model mpt-30b --n 64\n"
      "  rollout dichotomy --model bloom --n 8 --depth 1000000 --plot dich.svg\n"
      "  rollout jacobian --model bloom-7b1 --n 16 --C 1 --plot jac.svg\n"
      "  rollout flow --model bloom-7b1 --n 64 --plot flow.svg          # attention flow beside (a), (b), (c)\n"
      "  rollout flow --model run/capture.h5 --alpha measured --influence infl.csv --format json\n"
      "  rollout flow --model run/best.h5 --alpha measured --influence auto --n 64   # Tables 2-5 layout with flow\n"
      "  rollout flow --model-config cfg.yaml --n 32 --flow-matrix F.csv --algorithm push-relabel");
  return app::run(app, argc, argv, [&] {
    const std::string sub = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    o.backend = gpu::resolve_device(o.device, "rollout", rollout_app::device_path_missing(o, sub));  // docs/gpu.md
    rollout_app::refuse_ignored(app, o, sub);
    if (*sweep) return run_sweep(o);
    if (*mono) return run_monotonicity(o);
    if (*verify) return run_verify(o);
    if (*dich) return run_dichotomy(o);
    if (*jac) return run_jacobian(o);
    if (*flow) return run_flow(o);
    run_rollout(o);
  });
}
