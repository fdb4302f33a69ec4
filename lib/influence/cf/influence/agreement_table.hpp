#pragma once
// Rollout against measured influence on the model's own windows (Position bias (Herasimchyk et al.), section 6, Tables
// 2-5; docs/spec.md §2 and §7): Spearman and W1/(n-1) of the rollout variants (a) attention-only, (b) residual-aware,
// (c) residual-aware + constant-plus-diagonal content against the measured influence profile (Eq. 6), with the kernels
// taken from one of two sources:
//  - alibi: the model's content-free ALiBi kernels (its slopes 2^(-8h/H), its causal or sliding
//    window mask); (c) adds the content prior delta(l, h) measured from the model's own scores.
//    Needs an ALiBi checkpoint whose layers all use full or the same sliding-window attention.
//  - measured: the head-mean attention of the model on the windows (any position scheme); (a) and
//    (b) are defined, (c) is not (the measured kernels already contain the content).
#include <Eigen/Dense>
#include <string>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"
#include "cf/nn/model.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/last_row_backend.hpp"

namespace cf::influence {

enum class KernelSource { Alibi, Measured };

/// The kernel sources' names (rollout --kernel-source, the report).
inline constexpr EnumTable kKernelSources{std::array{
    EnumEntry<KernelSource>{KernelSource::Alibi, "alibi"},
    EnumEntry<KernelSource>{KernelSource::Measured, "measured"},
}};

/// "alibi" | "measured"; throws cf::InvalidArgument naming the value.
KernelSource parse_kernel_source(const std::string& name);
std::string kernel_source_name(KernelSource s);

/// Throws cf::InvalidArgument unless `source` fits the model: alibi needs ALiBi positions and full
/// or one sliding-window mask in every layer (call before long work).
void require_kernel_source(const nn::ModelConfig& cfg, KernelSource source);

/// What one forward pass per window measures (means over the windows, all of length n):
///  - alpha_token_mean / alpha_frobenius [L]: docs/spec.md §2 alpha_l in both forms (Position bias (Herasimchyk et al.)
///  Eq. 1);
///  - kernels [L] of n x n: head-mean attention, each head's rows normalised (branch fusion), mean
///    over windows (as cf::rollout::read_capture_kernels);
///  - content_delta [L, H]: the constant-plus-diagonal content of Prop. 4.5 from the content logits
///    s_ij = q_i . k_j / sqrt(d_head) (the model's own logits before its positional bias), averaged
///    over windows: delta = mean of the diagonal minus mean of the causal off-diagonal entries.
struct ModelMeasurements {
  Eigen::VectorXd alpha_token_mean, alpha_frobenius;
  std::vector<rollout::RowMatrix> kernels;
  Eigen::MatrixXd content_delta;
  int n = 0;
};
ModelMeasurements measure_model(const nn::Model<float>& model, const std::vector<std::vector<std::int32_t>>& windows);

/// One variant's row: its last-row rollout p and agreement with the influence (NaN when undefined).
struct AgreementVariant {
  std::string key, label;
  bool defined = true;
  std::string note;  ///< why undefined
  Eigen::VectorXd p;
  double spearman = 0, w1 = 0;
};

/// The three variants against `influence` (n entries, sums to 1). frobenius_alpha: Eq. 1 alpha
/// instead of the token-mean form. with_flow: a fourth column "(f) attention flow", the normalised
/// max-flow profile to the last position on the residual-mixed kernels of (b) (the same kernels
/// and alpha; cf/rollout/flow.hpp), solved by `flow_algorithm`. Throws cf::InvalidArgument when
/// the kernel source does not fit the model (alibi on a checkpoint without ALiBi positions, or
/// with block / bridge / other masks). `backend` computes the rollouts' last rows on a device
/// (issue 30; null = the CPU paths of lib/rollout); the flow stays on the CPU.
struct Agreement {
  KernelSource source = KernelSource::Measured;
  std::string source_description;
  std::vector<AgreementVariant> variants;
  Eigen::VectorXd alpha;
};
Agreement rollout_agreement(const nn::Model<float>& model, const ModelMeasurements& m, KernelSource source,
                            const Eigen::VectorXd& influence, bool frobenius_alpha = false, bool with_flow = false,
                            rollout::FlowAlgorithm flow_algorithm = rollout::FlowAlgorithm::Layered,
                            const rollout::LastRowBackend* backend = nullptr);

/// The Position bias (Herasimchyk et al.) Tables 2-5 layout: one table of Spearman and one of W1/(n-1), a row for the
/// model
/// (`model_name`) and a column per variant ("not defined" where undefined), plus the variants'
/// summaries, the kernel source and alpha in the notes / JSON body (keys: kernel_source, alpha,
/// influence, variants{key: {defined, spearman, w1_normalised, p}}).
output::Report agreement_report(const Agreement& ag, const Eigen::VectorXd& influence, const std::string& model_name,
                                const std::string& influence_source);

/// The four curves on one figure: (a), (b), (c) (where defined) and the measured influence.
plot::LinePlot agreement_plot(const Agreement& ag, const Eigen::VectorXd& influence, const std::string& model_name);

}  // namespace cf::influence
