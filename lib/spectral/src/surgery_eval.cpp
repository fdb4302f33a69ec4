#include "cf/spectral/surgery_eval.hpp"

#include <algorithm>
#include <exception>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"

namespace cf::spectral {

nn::ForwardHooks make_hooks(const Intervention& iv, const nn::ModelConfig& c) {
  const int n_layer = c.n_layer;
  nn::ForwardHooks hooks;
  std::vector<bool> touch(static_cast<std::size_t>(n_layer), false);
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
  // Per layer, the rank from which truncation is the identity in exact arithmetic:
  // rank R <= 2 d_head always; rank F <= 2 d_head for Q K^T scores, but F = -D is full rank in S–D.
  std::vector<Index> id_R(static_cast<std::size_t>(n_layer)), id_F(static_cast<std::size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    id_R[l] = 2 * Index(nn::head_dim(c, l));
    id_F[l] = c.layers[l].attn == nn::AttnKind::Sd ? std::numeric_limits<Index>::max() : id_R[l];
  }
  const Intervention cfg = iv;
  hooks.on_scores = [cfg, touch, id_R, id_F](int l, int, Eigen::Ref<Eigen::MatrixXf> M) {
    if (!touch[l]) return;
    if (!cfg.linearize) {
      // Identity surgery (full rank) must leave the floats untouched: return before any round
      // trip, so the perplexity equals the baseline bit for bit.
      const Index k = cfg.spec.rank, T = M.rows();
      const bool cut_R = cfg.spec.component != Component::Filtering, cut_F = cfg.spec.component != Component::Routing;
      if (k < 0 || k >= T || ((!cut_R || k >= id_R[l]) && (!cut_F || k >= id_F[l]))) return;
    }
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
  const nn::ForwardHooks hooks = make_hooks(iv, model.config);
  if (ps.evaluate) return ps.evaluate(tokens, context, stride, &hooks);
  return nn::evaluate_perplexity(model, tokens, context, stride, &hooks);
}

void validate_rank(const nn::ModelConfig& c, const std::vector<int>& layers, Component component, int rank,
                   int context) {
  require(rank >= 0, "--rank must be >= 0 (got ", rank, ")");
  for (int l : layers) {
    require(l >= 0 && l < c.n_layer, "layer ", l, " is out of range (0 <= layer < n_layer = ", c.n_layer, ")");
    const int dh = nn::head_dim(c, l);
    // S–D filtering is the full-rank diagonal D: any k <= context is possible there.
    const bool sd_filter_only = c.layers[l].attn == nn::AttnKind::Sd && component == Component::Filtering;
    const int bound = sd_filter_only ? context : int(max_component_rank(context, dh));
    require(rank <= bound, "rank k = ", rank, " is larger than possible for layer ", l, ": rank <= ",
            sd_filter_only ? str("context = ", context)
                           : str("min(context, 2 d_head) = min(", context, ", ", 2 * dh, ") = ", bound));
  }
  // Singular values of the skew routing part come in equal pairs: an odd k keeps half a plane.
  require(component == Component::Filtering || rank % 2 == 0 || rank >= context, "--rank ", rank,
          " is odd: routing ranks must be even (the singular values of R come in pairs, one per rotation plane); "
          "use --rank ",
          rank - 1, " or ", rank + 1);
}

namespace {

// Every intervention's perplexity: on ps.evaluate one at a time when it is set, else on the CPU
// model `model` (not null then), concurrently over the interventions.
std::vector<nn::PerplexityResult> evaluate_all(const nn::ModelConfig& c, const nn::Model<float>* model,
                                               const std::vector<std::int32_t>& tokens,
                                               const std::vector<Intervention>& ivs, const PerplexitySettings& ps) {
  require(ps.evaluate || model != nullptr,
          "evaluate_interventions without a host model needs PerplexitySettings::evaluate");
  // Hooks are built up front (this validates every intervention before any work starts); the
  // score hooks are pure functions of their captures, so concurrent calls are safe.
  std::vector<nn::PerplexityResult> out(ivs.size());
  std::vector<std::exception_ptr> errors(ivs.size());
  const int context = ps.context > 0 ? ps.context : c.block_size;
  const int stride = ps.stride > 0 ? ps.stride : std::max(1, context / 2);
  std::vector<nn::ForwardHooks> hooks;
  hooks.reserve(ivs.size());
  for (const Intervention& iv : ivs) hooks.push_back(make_hooks(iv, c));
  Progress progress("perplexities", long(ivs.size()));  // stderr, terminals only (cf/core/progress.hpp)
  // omp-exceptions: every iteration catches (...) into errors[i], rethrown in order after the region
  // (an evaluator elsewhere, a device model, takes one intervention at a time)
#pragma omp parallel for schedule(dynamic, 1) if (!ps.evaluate)
  for (long i = 0; i < long(ivs.size()); ++i) {
    try {
      const nn::ForwardHooks* h = &hooks[std::size_t(i)];
      out[std::size_t(i)] = ps.evaluate ? ps.evaluate(tokens, context, stride, h)
                                        : nn::evaluate_perplexity(*model, tokens, context, stride, h);
      progress.advance();
    } catch (...) {
      errors[std::size_t(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace

std::vector<nn::PerplexityResult> evaluate_interventions(const nn::Model<float>& model,
                                                         const std::vector<std::int32_t>& tokens,
                                                         const std::vector<Intervention>& ivs,
                                                         const PerplexitySettings& ps) {
  return evaluate_all(model.config, &model, tokens, ivs, ps);
}

std::vector<nn::PerplexityResult> evaluate_interventions(const nn::ModelConfig& c,
                                                         const std::vector<std::int32_t>& tokens,
                                                         const std::vector<Intervention>& ivs,
                                                         const PerplexitySettings& ps) {
  return evaluate_all(c, nullptr, tokens, ivs, ps);
}

std::vector<Intervention> sweep_interventions(const std::vector<int>& layers, bool linear_attention, bool cumulative) {
  std::vector<Intervention> ivs;
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
    ivs.push_back(iv);
  }
  return ivs;
}

std::vector<SweepRow> sweep_rows(const std::vector<int>& layers, const std::vector<nn::PerplexityResult>& results,
                                 double baseline_ppl) {
  require(layers.size() == results.size(), "sweep_rows needs one result per layer (", layers.size(), " layers, ",
          results.size(), " results)");
  std::vector<SweepRow> rows;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    SweepRow r;
    r.layer = layers[i];
    r.ppl = results[i].ppl;
    r.cost_pct = (r.ppl - baseline_ppl) / baseline_ppl * 100.0;
    rows.push_back(r);
  }
  return rows;
}

std::vector<SweepRow> sweep_per_layer(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                      const std::vector<int>& layers, bool linear_attention, double baseline_ppl,
                                      const PerplexitySettings& ps) {
  return sweep_rows(layers,
                    evaluate_interventions(model, tokens, sweep_interventions(layers, linear_attention, false), ps),
                    baseline_ppl);
}

std::vector<SweepRow> sweep_cumulative(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens,
                                       const std::vector<int>& layers, bool linear_attention, double baseline_ppl,
                                       const PerplexitySettings& ps) {
  return sweep_rows(layers,
                    evaluate_interventions(model, tokens, sweep_interventions(layers, linear_attention, true), ps),
                    baseline_ppl);
}

}  // namespace cf::spectral
