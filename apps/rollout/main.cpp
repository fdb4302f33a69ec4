// rollout — residual-aware attention rollout and position-bias theory of Position bias (Herasimchyk et al.), plus the
// infinite-depth dichotomy (Theorem 5.4), monotonicity checks, context sweeps and the Jacobian
// bound of Runway (Lee & Clark). Thin app: the options (options.hpp, declared in options.cpp), a set-up
// (cf::rollout::make_source) and one run function per subcommand that hands lib/rollout's results to
// its reports (cf/rollout/rollout_report.hpp; docs/conventions.md, docs/rollout.md).
#include <cmath>
#include <filesystem>
#include <optional>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/rollout_backend.hpp"
#include "cf/influence/checkpoint_agreement.hpp"
#include "cf/influence/profile_io.hpp"
#include "cf/model/temporary_capture.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/flow_report.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"
#include "cf/rollout/rollout_report.hpp"
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

/// Set-up shared by every subcommand: option checks that need no model, the in-process capture of
/// a checkpoint, then cf::rollout::make_source.
struct Setup {
  std::optional<cf::model::TemporaryCapture> capture;  // a checkpoint, captured in process
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
    so.capture_path = st.capture->path();
    so.capture_note = {{"text", o.capture_text}, {"sequences", o.capture_seqs}};
  }
  st.s = make_source(so, default_n);
}

void refuse_plot(const Options& o, const std::string& mode) {
  require(o.common.plot.empty(), "--plot: `rollout ", mode, "` reports a table of statistics and draws no plot");
}

/// --model CHECKPOINT with --influence: the comparison on the model's own windows (issue 10).
bool checkpoint_with_influence(const Options& o) {
  return !o.influence.empty() && o.src.model_config.empty() && is_model_file(o.src.model) &&
         std::filesystem::exists(o.src.model) && is_checkpoint_file(o.src.model);
}

/// The options of that comparison, given without it.
void refuse_checkpoint_options(const Options& o) {
  require(o.influence != "auto", "--influence auto measures the influence of a checkpoint: give --model CHECKPOINT.h5");
  require(o.kernel_source == "auto", "--kernel-source applies to --model CHECKPOINT with --influence");
}

/// `--model CHECKPOINT --influence auto|FILE`: the Tables 2-5 comparison on the model's own
/// windows (cf/influence/checkpoint_agreement.hpp; docs/influence.md).
void run_influence_agreement(const Options& o, bool with_flow = false) {
  influence::CheckpointAgreementOptions co;
  co.checkpoint = o.src.model;
  co.n = o.src.n;
  co.text = o.capture_text;
  co.windows = o.influence_windows;
  co.influence = o.influence;
  co.target = o.influence_target;
  co.kernel_source = o.kernel_source;
  co.alpha_kind = o.src.alpha_kind;
  co.with_flow = with_flow;
  co.flow_algorithm = o.flow_algorithm;
  const influence::CheckpointAgreement ag = influence::checkpoint_agreement(co);
  app::emit(ag.report, o.common);
  if (!o.common.plot.empty()) plot::save(ag.plot, o.common.plot);
}

void run_rollout(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.matrix, "--matrix");
  if (checkpoint_with_influence(o)) {
    require(o.src.alpha == "measured",
            "--influence with a checkpoint compares against the measured alpha: use --alpha measured");
    return run_influence_agreement(o);
  }
  refuse_checkpoint_options(o);
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
  output::Report rep = rollout_report(s, vs, influence, app::resolve_format(o.common) == output::Format::Csv);
  nlohmann::json params = s.params;
  params["path"] =
      s.structured ? (o.path == "dense" ? "dense" : "structured O(L H n)") : "dense (" + s.kernel_source + ")";
  rep.meta = output::metadata("rollout", params);
  if (!o.matrix.empty()) {
    require(s.n <= 2048, "--matrix writes the full n x n rollout; n <= 2048 required, got ", s.n);
    const auto ks = source_kernels(s, false, 2048);
    write_matrix_csv(o.matrix, rollout_matrix_dense([&](int l) { return ks[l]; }, s.alpha, s.n));
    rep.notes.push_back("full rollout matrix P(L) of variant (b) written to " + o.matrix);
  }
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(rollout_plot(s, vs, influence, o.plot_scale == "log"), o.common.plot);
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
  if (checkpoint_with_influence(o)) {
    require(o.src.alpha == "measured",
            "--influence with a checkpoint compares against the measured alpha: use --alpha measured");
    require(o.target < 0, "--target: --influence compares the flow to the last position (drop --target)");
    require(o.flow_matrix.empty(), "--flow-matrix: not available with --model CHECKPOINT --influence");
    return run_influence_agreement(o, true);
  }
  refuse_checkpoint_options(o);
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
          " edges over all sources (L n^3 / 6; limit 2e10: n = 2048 at L = 12 is 1.7e10, about 45 s of CPU with the "
          "layered solver, hours with push-relabel): lower --n");
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
  output::Report rep = sweep_report(s, rows);
  nlohmann::json params = s.params;
  params.erase("n");
  params["n_list"] = ns;
  params["path"] = "structured O(L H n)";
  rep.meta = output::metadata("rollout sweep", params);
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(sweep_plot(rows, s.name), o.common.plot);
}

void run_monotonicity(const Options& o) {
  refuse_plot(o, "monotonicity");
  Setup st;
  setup(st, o, 64);
  const RolloutSource& s = st.s;
  output::Report rep = monotonicity_report(s);
  rep.meta = output::metadata("rollout monotonicity", s.params);
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
  const long d = o.target >= 0 ? o.target : s.n - 1;
  require(d < s.n, "--target must be < n = ", s.n, ", got ", d);
  JacobianOutcome jac = jacobian_report(s, o.C, d);
  nlohmann::json params = s.params;
  params["C"] = o.C;
  params["target"] = d;
  jac.report.meta = output::metadata("rollout jacobian", params);
  app::emit(jac.report, o.common);
  if (!o.common.plot.empty()) plot::save(jac.plot, o.common.plot);
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
  rollout_app::add_options(app, o);
  gpu::add_analysis_device_option(app, o.device);
  app::add_common_options(app, o.common);
  const rollout_app::Subcommands sub = rollout_app::add_subcommands(app, o);
  return app::run(app, argc, argv, [&] {
    const std::string name = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    o.backend = gpu::resolve_device(o.device, "rollout", rollout_app::device_path_missing(o, name));  // docs/gpu.md
    rollout_app::refuse_ignored(app, o, name);
    if (*sub.sweep) return run_sweep(o);
    if (*sub.mono) return run_monotonicity(o);
    if (*sub.verify) return run_verify(o);
    if (*sub.dich) return run_dichotomy(o);
    if (*sub.jac) return run_jacobian(o);
    if (*sub.flow) return run_flow(o);
    run_rollout(o);
  });
}
