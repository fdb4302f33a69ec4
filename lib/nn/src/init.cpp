// Model initialisation, inference helpers (logits, strided perplexity).
#include <cmath>
#include <random>

#include "cf/core/error.hpp"
#include "cf/nn/detail/activations.hpp"
#include "cf/nn/model.hpp"

namespace cf::nn {

template <class T>
Model<T> init_model(const ModelConfig& config, std::uint64_t seed) {
  Model<T> m;
  m.config = config;
  m.layout = make_layout(config);
  m.params.assign(static_cast<std::size_t>(m.layout.total), T(0));
  std::mt19937_64 rng(seed);
  // Box-Muller on the raw engine: std::normal_distribution's algorithm is implementation-defined,
  // this keeps initial weights identical across standard libraries.
  auto normal = [&]() {
    const double u1 = (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  };
  const double resid_std = 0.02 / std::sqrt(2.0 * config.n_layer);
  for (const auto& t : m.layout.tensors) {
    T* p = m.params.data() + t.offset;
    const bool is_ln_w = (t.name.find("ln_") != std::string::npos || t.name.find("emb_ln") != std::string::npos) &&
                         t.name.find(".weight") != std::string::npos && t.shape.size() == 1;
    const bool is_bias = t.shape.size() == 1 && !is_ln_w;
    if (is_ln_w) {
      for (std::int64_t i = 0; i < t.size; ++i) p[i] = T(1);
    } else if (is_bias) {
      for (std::int64_t i = 0; i < t.size; ++i) p[i] = T(0);
    } else {
      const bool proj = t.name.find("c_proj.weight") != std::string::npos;
      const double sd = proj ? resid_std : 0.02;
      for (std::int64_t i = 0; i < t.size; ++i) p[i] = static_cast<T>(sd * normal());
    }
  }
  return m;
}

template Model<float> init_model<float>(const ModelConfig&, std::uint64_t);
template Model<double> init_model<double>(const ModelConfig&, std::uint64_t);

Eigen::MatrixXf forward_logits(const Model<float>& model, const std::vector<std::int32_t>& tokens,
                               const ForwardHooks* hooks) {
  const int Tn = static_cast<int>(tokens.size());
  require(Tn >= 1, "forward_logits needs at least one token");
  // the inference API of the analysers runs the dense attention path, so a call with a score hook
  // (which needs the T x T scores) and one without compare bit for bit
  Workspace<float> ws;
  ws.set_attention_path(AttentionPath::Dense);
  std::vector<std::int32_t> targets(tokens.size(), -1);
  forward_backward<float>(model, tokens.data(), targets.data(), 1, Tn, nullptr, ws, hooks);
  auto& a = ws.get();
  const auto& f = model.config.norm != NormKind::None ? a.lnf : a.resid[model.config.n_layer];
  const std::int64_t head = model.layout.lm_head >= 0 ? model.layout.lm_head : model.layout.wte;
  CMapR<float> wte(model.params.data() + head, model.config.vocab_size, model.config.d_model);
  return f * wte.transpose();
}

PerplexityResult evaluate_perplexity(const Model<float>& model, const std::vector<std::int32_t>& tokens, int context,
                                     int stride, const ForwardHooks* hooks) {
  Workspace<float> ws;
  ws.set_attention_path(AttentionPath::Dense);  // as forward_logits: hooked and plain runs compare exactly
  const WindowForward forward = [&](const std::int32_t* in, const std::int32_t* tg, int Tn, std::vector<float>& lp) {
    forward_backward<float>(model, in, tg, 1, Tn, nullptr, ws, hooks, &lp);
  };
  return evaluate_perplexity(model.config.block_size, forward, tokens, context, stride);
}

PerplexityResult evaluate_perplexity(int block_size, const WindowForward& forward,
                                     const std::vector<std::int32_t>& tokens, int context, int stride) {
  require(context >= 1 && context <= block_size, "context must be in [1, block_size = ", block_size, "] (got ", context,
          ")");
  require(stride >= 1 && stride <= context, "stride must be in [1, context = ", context, "] (got ", stride, ")");
  require(tokens.size() >= 2, "evaluate_perplexity needs at least 2 tokens (got ", tokens.size(), ")");
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
  double nll = 0;
  std::int64_t count = 0;
  std::int64_t scored_until = 0;  // targets at positions < scored_until (target index) are done
  for (std::int64_t begin = 0; begin < n - 1; begin += stride) {
    const std::int64_t end = std::min(begin + context, n - 1);  // inputs [begin, end), targets +1
    const int Tn = static_cast<int>(end - begin);
    std::vector<std::int32_t> in(tokens.begin() + begin, tokens.begin() + end), tg(static_cast<std::size_t>(Tn));
    for (int t = 0; t < Tn; ++t) {
      const std::int64_t target_pos = begin + t + 1;
      tg[t] = target_pos > scored_until ? tokens[target_pos] : -1;
    }
    std::vector<float> lp;
    forward(in.data(), tg.data(), Tn, lp);
    for (int t = 0; t < Tn; ++t)
      if (tg[t] >= 0) {
        nll -= lp[t];
        ++count;
      }
    scored_until = end;
    if (end == n - 1) break;
  }
  PerplexityResult r;
  r.n_tokens = count;
  r.nll = nll / static_cast<double>(count);
  // finite weights can still overflow float32 in the forward pass (1e38-sized projections): a
  // NaN or infinite NLL is no perplexity, and printing it as one (or as a zero change) misleads
  if (!std::isfinite(r.nll))
    throw Error(str("the mean negative log-likelihood over ", count, " tokens is not finite (", r.nll,
                    "): the forward pass overflowed float32; check the checkpoint's weights"));
  r.ppl = std::exp(r.nll);
  return r;
}

}  // namespace cf::nn
