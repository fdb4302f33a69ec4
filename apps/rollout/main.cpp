// rollout — residual-aware attention rollout and position-bias theory of Position bias (Herasimchyk et al.), plus the
// infinite-depth dichotomy (Theorem 5.4), monotonicity checks, context sweeps and the Jacobian
// bound of Runway (Lee & Clark). Thin app: the options (options.hpp, declared in options.cpp), a set-up
// (cf::rollout::make_source) and one run function per subcommand that hands lib/rollout's results to
// its reports (cf/rollout/rollout_report.hpp; docs/conventions.md, docs/rollout.md). The set-up
// and the checks shared by the modes are in setup.cpp.
#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/rollout_backend.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/flow_report.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout_report.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/sweep.hpp"
#include "cf/rollout/theory_report.hpp"
#include "cf/rollout/variants.hpp"
#include "options.hpp"
#include "setup.hpp"

using namespace cf;
using namespace cf::rollout;
using namespace cf::rollout_app;
using output::fmt;

namespace {

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
  const Eigen::VectorXd influence = influence_profile(o, s.n);
  const auto device = gpu::make_rollout_backend(o.backend);  // null: the CPU paths
  const std::vector<VariantProfile> vs = rollout_variants(s, s.n, o.path == "dense", device.get());
  output::Report rep = rollout_report(s, vs, influence, app::resolve_format(o.common) == output::Format::Csv);
  rep.meta = output::metadata("rollout", rollout_params(s, o.path == "dense"));
  if (!o.matrix.empty())
    rep.notes.push_back(write_rollout_matrix(s, o.matrix, gpu::make_product_backend(o.backend).get()));
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
  check_flow_limits(o, s);
  require(o.influence.empty() || o.target < 0 || o.target == s.n - 1,
          "--target: --influence compares the flow to the last position");
  const Eigen::VectorXd influence = influence_profile(o, s.n);
  const std::vector<RowMatrix> R = residual_mixed_kernels(source_kernels(s, false, 2048), s.alpha);
  FlowOptions fo;
  fo.target = o.target;
  fo.algorithm = alg;
  const FlowResult fr = attention_flow(R, fo);
  const std::vector<VariantProfile> vs = rollout_variants(s, s.n);
  output::Report rep = flow_report(s, vs, fr, alg, influence, app::resolve_format(o.common) == output::Format::Csv);
  rep.meta = output::metadata("rollout flow", flow_params(s, fr, alg));
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
  rep.meta = output::metadata("rollout sweep", sweep_params(s, ns));
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(sweep_plot(rows, s.name), o.common.plot);
}

void run_monotonicity(const Options& o) {
  refuse_plot(o, "monotonicity");
  Setup st;
  setup(st, o, 64);
  const RolloutSource& s = st.s;
  output::Report rep = monotonicity_report(s, gpu::make_product_backend(o.backend).get());
  rep.meta = output::metadata("rollout monotonicity", s.params);
  app::emit(rep, o.common);
}

void run_verify(const Options& o) {
  refuse_plot(o, "verify");
  Setup st;
  setup(st, o, 48);
  const RolloutSource& s = st.s;
  VerifyOutcome v =
      verify_report(s, o.seeds, gpu::make_product_backend(o.backend).get(), gpu::make_rollout_backend(o.backend).get());
  v.report.meta = output::metadata("rollout verify", s.params);
  app::emit(v.report, o.common);
  if (!v.all_ok) throw Error("verify: a proposition was violated beyond 1e-12 (see the table)");
}

void run_dichotomy(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  require(o.depth >= 1 && o.depth <= 1000000, "--depth must lie in [1, 1000000], got ", o.depth);
  const std::vector<AlphaSpec> specs = dichotomy_schedules(o);
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
  JacobianOutcome jac = jacobian_report(s, o.C, d, gpu::make_product_backend(o.backend).get());
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
    o.backend = gpu::resolve_device(o.device, "rollout", rollout_app::device_path_missing(name));  // docs/gpu.md
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
