#include "cf/influence/checkpoint_agreement.hpp"

#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/influence/agreement_table.hpp"
#include "cf/influence/influence.hpp"
#include "cf/influence/profile_io.hpp"
#include "cf/model/load.hpp"

namespace cf::influence {

CheckpointAgreement checkpoint_agreement(const CheckpointAgreementOptions& o) {
  const nn::Model<float> model = cf::model::load_model(o.checkpoint);
  const int n = o.n > 0 ? static_cast<int>(std::min<long>(o.n, 1L << 30)) : std::min(256, model.config.block_size);
  require(n <= model.config.block_size, "--n = ", n,
          " exceeds the checkpoint's block_size = ", model.config.block_size);
  const auto w = influence_windows(
      hf::tokenize_text_for_checkpoint(o.checkpoint, model.config.vocab_size, o.text, "", nullptr), n, o.windows);
  const bool alibi_ok = model.config.pos == nn::PosKind::Alibi;
  const auto src = parse_kernel_source(o.kernel_source == "auto" ? (alibi_ok ? "alibi" : "measured") : o.kernel_source);
  require_kernel_source(model.config, src);  // before the long work
  Eigen::VectorXd infl;
  std::string isrc;
  if (o.influence != "auto") {
    infl = read_profile(o.influence);
    require(infl.size() == n, "--influence has ", infl.size(), " positions but n = ", n);
    isrc = "file " + o.influence;
  }
  const ModelMeasurements m = measure_model(model, w.tokens);
  std::string influence_device = "file";
  if (o.influence == "auto") {
    nn::SeededPass<float> pass;
    if (o.seeded_pass)
      pass = o.seeded_pass(model, influence_batch(model.config, n, static_cast<int>(w.tokens.size()), 0), n);
    influence_device = pass ? o.device : "cpu";
    infl = measure_influence(model, w.tokens, parse_target(o.target), 0, pass).profile;
    isrc = "measured in process (Eq. 6, target " + o.target + ", " + std::to_string(o.windows) + " windows of " +
           o.text + ")";
  }
  const auto ag = rollout_agreement(model, m, src, infl, o.alpha_kind == "frobenius", o.with_flow,
                                    rollout::parse_flow_algorithm(o.flow_algorithm), o.rollouts);
  CheckpointAgreement out{agreement_report(ag, infl, o.checkpoint, isrc), agreement_plot(ag, infl, o.checkpoint)};
  out.report.meta =
      output::metadata(o.with_flow ? "rollout flow" : "rollout",
                       {{"model", o.checkpoint},
                        {"n", n},
                        {"influence", o.influence},
                        {"kernel_source", kernel_source_name(src)},
                        {"windows", o.windows},
                        {"text", o.text},
                        {"alpha_kind", o.alpha_kind},
                        {"window_starts", w.starts},
                        {"device", {{"rollouts", o.rollouts ? o.device : "cpu"}, {"influence", influence_device}}}});
  return out;
}

}  // namespace cf::influence
