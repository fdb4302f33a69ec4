#include "cf/spectral/surgery_eval.hpp"

#include <algorithm>

#include "cf/core/error.hpp"

namespace cf::spectral {

nn::ForwardHooks make_hooks(const Intervention& iv, int n_layer) {
  nn::ForwardHooks hooks;
  std::vector<bool> touch(std::size_t(n_layer), false);
  for (int l : iv.layers) {
    require(l >= 0 && l < n_layer, "layer ", l, " is out of range (0 <= layer < n_layer = ", n_layer, ")");
    touch[l] = true;
  }
  hooks.linearize.assign(std::size_t(n_layer), false);
  for (int l : iv.linear_attention) {
    require(l >= 0 && l < n_layer, "linear-attention layer ", l, " is out of range (0 <= layer < n_layer = ", n_layer,
            ")");
    hooks.linearize[l] = true;
  }
  const bool any = iv.linearize || iv.spec.rank >= 0;
  if (!any || iv.layers.empty()) return hooks;
  const Intervention cfg = iv;
  hooks.on_scores = [cfg, touch](int l, int, Eigen::Ref<Eigen::MatrixXf> M) {
    if (!touch[l]) return;
    // Identity surgery (full rank) must leave the floats untouched: return before any round trip.
    if (!cfg.linearize && (cfg.spec.rank < 0 || cfg.spec.rank >= M.rows())) return;
    const Eigen::MatrixXd Md = M.cast<double>();
    const Eigen::MatrixXd out = cfg.linearize ? linearize_standard(Md, cfg.scalar) : apply_surgery(Md, cfg.spec);
    M = out.cast<float>();
  };
  return hooks;
}

nn::PerplexityResult evaluate_intervention(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                           const Intervention& iv, const PerplexitySettings& ps) {
  const int context = ps.context > 0 ? ps.context : model.config.block_size;
  const int stride = ps.stride > 0 ? ps.stride : std::max(1, context / 2);
  const nn::ForwardHooks hooks = make_hooks(iv, model.config.n_layer);
  return nn::evaluate_perplexity(model, tokens, context, stride, &hooks);
}

void validate_rank(const nn::ModelConfig& c, const std::vector<int>& layers, int rank, int context) {
  require(rank >= 0, "--rank must be >= 0 (got ", rank, ")");
  for (int l : layers) {
    require(l >= 0 && l < c.n_layer, "layer ", l, " is out of range (0 <= layer < n_layer = ", c.n_layer, ")");
    const int bound = int(max_component_rank(context, nn::head_dim(c, l)));
    require(rank <= bound, "rank k = ", rank, " is larger than possible for layer ", l,
            ": rank(F), rank(R) <= min(context, 2 d_head) = min(", context, ", ", 2 * nn::head_dim(c, l), ") = ",
            bound);
  }
}

namespace {
std::vector<SweepRow> sweep(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                            const std::vector<int>& layers, bool linear_attention, double baseline,
                            const PerplexitySettings& ps, bool cumulative) {
  std::vector<SweepRow> rows;
  std::vector<int> acc;
  for (int l : layers) {
    if (cumulative)
      acc.push_back(l);
    else
      acc = {l};
    Intervention iv;
    if (linear_attention) {
      iv.linear_attention = acc;
    } else {
      iv.layers = acc;
      iv.linearize = true;
    }
    SweepRow r;
    r.layer = l;
    r.ppl = evaluate_intervention(model, tokens, iv, ps).ppl;
    r.cost_pct = (r.ppl - baseline) / baseline * 100.0;
    rows.push_back(r);
  }
  return rows;
}
}  // namespace

std::vector<SweepRow> sweep_per_layer(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                      const std::vector<int>& layers, bool linear_attention, double baseline_ppl,
                                      const PerplexitySettings& ps) {
  return sweep(model, tokens, layers, linear_attention, baseline_ppl, ps, false);
}

std::vector<SweepRow> sweep_cumulative(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                       const std::vector<int>& layers, bool linear_attention, double baseline_ppl,
                                       const PerplexitySettings& ps) {
  return sweep(model, tokens, layers, linear_attention, baseline_ppl, ps, true);
}

}  // namespace cf::spectral
