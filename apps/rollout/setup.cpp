// rollout's set-up (setup.hpp).
#include "setup.hpp"

#include <cmath>
#include <filesystem>

#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/gpu/rollout_backend.hpp"
#include "cf/gpu/seeded_pass.hpp"
#include "cf/influence/checkpoint_agreement.hpp"
#include "cf/influence/profile_io.hpp"

namespace cf::rollout_app {

using namespace cf::rollout;

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

bool checkpoint_with_influence(const Options& o) {
  return !o.influence.empty() && o.src.model_config.empty() && is_model_file(o.src.model) &&
         std::filesystem::exists(o.src.model) && is_checkpoint_file(o.src.model);
}

void refuse_checkpoint_options(const Options& o) {
  require(o.influence != "auto", "--influence auto measures the influence of a checkpoint: give --model CHECKPOINT.h5");
  require(o.kernel_source == "auto", "--kernel-source applies to --model CHECKPOINT with --influence");
}

void run_influence_agreement(const Options& o, bool with_flow) {
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
  // --device: the variants' rollouts and influence auto's seeded passes (the device trainer; a
  // model it does not run is refused for --device cuda, kept on the CPU for --device auto)
  const auto rollouts = gpu::make_rollout_backend(o.backend);
  co.rollouts = rollouts.get();
  co.device = gpu::backend_name(o.backend);
  if (o.backend != gpu::Placement::Cpu)
    co.seeded_pass = [&o](const nn::Model<float>& model, int max_B, int max_T) {
      const gpu::Placement where = gpu::placement_for_seeded(o.backend, o.device, "rollout", model.config);
      return where == gpu::Placement::Cpu ? nn::SeededPass<float>{}
                                          : gpu::device_seeded_pass(where, model, max_B, max_T);
    };
  const influence::CheckpointAgreement ag = influence::checkpoint_agreement(co);
  app::emit(ag.report, o.common);
  if (!o.common.plot.empty()) plot::save(ag.plot, o.common.plot);
}

Eigen::VectorXd influence_profile(const Options& o, long n) {
  if (o.influence.empty()) return {};
  const Eigen::VectorXd influence = influence::read_profile(o.influence);
  require(influence.size() == n, "--influence has ", influence.size(), " positions but n = ", n);
  return influence;
}

void check_flow_limits(const Options& o, const RolloutSource& s) {
  require(s.n <= 2048,
          "`rollout flow` builds n x n kernels per layer and one max-flow per source: --n <= 2048 "
          "required, got ",
          s.n);
  // one max-flow per source on positions j..n-1: about L n^3 / 6 edges in all (docs/rollout.md)
  const double work = s.L * std::pow(static_cast<double>(s.n), 3) / 6;
  require(work <= 2e10, "`rollout flow`: L = ", s.L, " layers at n = ", s.n, " make about ", output::fmt(work, 3),
          " edges over all sources (L n^3 / 6; limit 2e10: n = 2048 at L = 12 is 1.7e10, about 45 s of CPU with the "
          "layered solver, hours with push-relabel): lower --n");
  require(o.target < s.n, "--target must be < n = ", s.n, ", got ", o.target);
  require(o.flow_matrix.empty() || s.n <= 512, "--flow-matrix solves n (n + 1) / 2 max-flows: n <= 512 required, got ",
          s.n);
}

std::vector<AlphaSpec> dichotomy_schedules(const Options& o) {
  std::vector<AlphaSpec> specs;
  for (const std::string& text : {o.deep_alpha, o.deep_alpha2}) {
    const AlphaSpec sp = parse_alpha_spec(text);
    require(sp.kind == AlphaSpec::Kind::Constant || sp.kind == AlphaSpec::Kind::Power,
            "dichotomy schedules (--schedule, --schedule2) must be const:X or power[0|1]:A0,BETA, got '", text, "'");
    specs.push_back(sp);
  }
  return specs;
}

}  // namespace cf::rollout_app
