// Rollout against measured influence (Position bias (Herasimchyk et al.) Tables 2-5), see
// cf/influence/agreement_table.hpp.
#include "cf/influence/agreement_table.hpp"

#include <cmath>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/nn/ops.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::influence {

KernelSource parse_kernel_source(const std::string& name) {
  if (const auto k = kKernelSources.find(name)) return *k;
  throw InvalidArgument("--kernel-source: unknown source '" + name + "' (expected " + kKernelSources.list(" | ") + ")");
}

std::string kernel_source_name(KernelSource s) { return std::string(kKernelSources.name(s)); }

void require_kernel_source(const nn::ModelConfig& cfg, KernelSource source) {
  if (source != KernelSource::Alibi) return;
  require(cfg.pos == nn::PosKind::Alibi,
          "--kernel-source alibi needs a checkpoint with ALiBi positions; this one has "
          "pos = ",
          nn::pos_name(cfg.pos),
          " (no positional bias to build content-free kernels from): use "
          "--kernel-source measured");
  const nn::LayerConfig& l0 = cfg.layers[0];
  for (const auto& lc : cfg.layers) {
    require(lc.attn == nn::AttnKind::Full || lc.attn == nn::AttnKind::Swa,
            "--kernel-source alibi models full or sliding-window attention only; layer mask '", nn::attn_name(lc.attn),
            "' needs --kernel-source measured");
    require(lc.attn == l0.attn && (lc.attn == nn::AttnKind::Full || lc.w == l0.w),
            "--kernel-source alibi needs the same mask in every layer: use --kernel-source measured");
  }
}

ModelMeasurements measure_model(const nn::Model<float>& model, const std::vector<std::vector<std::int32_t>>& windows) {
  require(!windows.empty(), "measure_model: at least one window required");
  const auto& cfg = model.config;
  const int L = cfg.n_layer, H = cfg.n_head, n = static_cast<int>(windows[0].size());
  require(n >= 2 && n <= cfg.block_size, "window length n = ", n, " must lie in [2, block_size = ", cfg.block_size,
          "]");
  ModelMeasurements m;
  m.n = n;
  m.alpha_token_mean.setZero(L);
  m.alpha_frobenius.setZero(L);
  m.kernels.assign(L, rollout::RowMatrix::Zero(n, n));
  m.content_delta.setZero(L, H);
  nn::ForwardHooks hooks;
  hooks.on_layer = [&](const nn::LayerActivations& a) {
    const std::size_t TT = static_cast<std::size_t>(n) * n;
    double tm = 0, sx = 0, sa = 0;
    for (int t = 0; t < n; ++t) {
      const double x = a.resid_in_norm[t], y = a.attn_out_norm[t];
      tm += x + y > 0 ? y / (x + y) : 0.0;
      sx += x * x, sa += y * y;
    }
    m.alpha_token_mean(a.layer) += tm / n;
    m.alpha_frobenius(a.layer) += std::sqrt(sa) / (std::sqrt(sx) + std::sqrt(sa));
    rollout::RowMatrix& K = m.kernels[a.layer];
    const double is = 1.0 / std::sqrt(static_cast<double>(a.d_head));
    for (int h = 0; h < a.n_head; ++h) {
      const float* P = a.attn_probs + h * TT;
      for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int j = 0; j <= i; ++j) s += P[static_cast<std::size_t>(i) * n + j];
        if (s > 0)
          for (int j = 0; j <= i; ++j) K(i, j) += P[static_cast<std::size_t>(i) * n + j] / s / a.n_head;
      }
      const float* q = a.q + static_cast<std::size_t>(h) * n * a.d_head;
      const float* k = a.k + static_cast<std::size_t>(h) * n * a.d_head;
      double diag = 0, off = 0;
      long noff = 0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int e = 0; e < a.d_head; ++e) s += static_cast<double>(q[i * a.d_head + e]) * k[j * a.d_head + e];
          if (i == j)
            diag += s * is;
          else
            off += s * is, ++noff;
        }
      m.content_delta(a.layer, h) += diag / n - (noff > 0 ? off / noff : 0.0);
    }
  };
  for (const auto& w : windows) {
    require(static_cast<int>(w.size()) == n, "windows must have equal length");
    nn::forward_logits(model, w, &hooks);
  }
  const double W = static_cast<double>(windows.size());
  m.alpha_token_mean /= W;
  m.alpha_frobenius /= W;
  m.content_delta /= W;
  for (auto& K : m.kernels) {
    K /= W;
    for (int i = 0; i < n; ++i) K.row(i) /= K.row(i).sum();
  }
  return m;
}

Agreement rollout_agreement(const nn::Model<float>& model, const ModelMeasurements& m, KernelSource source,
                            const Eigen::VectorXd& influence, bool frobenius_alpha, bool with_flow,
                            rollout::FlowAlgorithm flow_algorithm, const rollout::LastRowBackend* backend) {
  const auto& cfg = model.config;
  const long n = m.n;
  require(influence.size() == n, "the influence profile has ", influence.size(), " positions but n = ", n);
  Agreement ag;
  ag.source = source;
  ag.alpha = frobenius_alpha ? m.alpha_frobenius : m.alpha_token_mean;
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(cfg.n_layer);
  auto add = [&](const std::string& key, const std::string& label, Eigen::VectorXd p) {
    AgreementVariant v;
    v.key = key, v.label = label, v.p = std::move(p);
    v.spearman = rollout::spearman(v.p, influence);
    v.w1 = rollout::wasserstein1_normalised(v.p, influence);
    ag.variants.push_back(v);
  };
  // the last rows on the device of `backend` when there is one (its checks are the CPU paths')
  const auto dense = [&](const Eigen::VectorXd& alpha) {
    if (!backend) return rollout::rollout_last_row_dense(m.kernels, alpha);
    require(static_cast<long>(m.kernels.size()) == alpha.size(), "rollout: ", m.kernels.size(),
            " kernels for L = ", alpha.size(), " layers");
    return backend->dense([&](int l) { return m.kernels[static_cast<std::size_t>(l)]; }, alpha, n);
  };
  const auto alibi = [&](const rollout::AlibiModel& am, const Eigen::VectorXd& alpha) {
    return backend ? backend->alibi(am, alpha, n) : rollout::rollout_last_row_alibi(am, alpha, n);
  };
  if (source == KernelSource::Measured) {
    ag.source_description = "measured kernels (head-mean attention of the model on the windows)";
    add("attention_only", "(a) attention-only", dense(ones));
    add("residual", "(b) residual-aware", dense(ag.alpha));
    AgreementVariant c;
    c.key = "residual_content";
    c.label = "(c) residual + content";
    c.defined = false;
    c.note = "not defined with measured kernels (they already contain the content)";
    c.spearman = c.w1 = std::numeric_limits<double>::quiet_NaN();
    ag.variants.push_back(c);
    if (with_flow)
      add("flow", "(f) attention flow",
          rollout::attention_flow(rollout::residual_mixed_kernels(m.kernels, ag.alpha), {-1, flow_algorithm}).profile);
    return ag;
  }
  require_kernel_source(cfg, source);
  rollout::AlibiModel am;
  const nn::LayerConfig& l0 = cfg.layers[0];
  if (l0.attn == nn::AttnKind::Swa) am.mask.window = l0.w;
  am.slopes = nn::alibi_slopes(cfg);  // the model's recipe (BLOOM imports: build_alibi_tensor's)
  ag.source_description = std::string("content-free ALiBi kernels of the model (slopes ") +
                          (cfg.arch.alibi == nn::AlibiSlopes::Hf ? "of BLOOM's build_alibi_tensor" : "2^(-8h/H)") +
                          ", mask " + am.mask.name() +
                          "); (c) content delta(l, h) from the model's own q.k / sqrt(d_head)";
  add("attention_only", "(a) attention-only", alibi(am, ones));
  add("residual", "(b) residual-aware", alibi(am, ag.alpha));
  am.delta = m.content_delta;
  add("residual_content", "(c) residual + content", alibi(am, ag.alpha));
  if (with_flow) {
    am.delta.resize(0, 0);  // the kernels of (b): content-free
    std::vector<rollout::RowMatrix> ks;
    for (int l = 0; l < cfg.n_layer; ++l) ks.push_back(rollout::alibi_kernel_dense(am, l, n));
    add("flow", "(f) attention flow",
        rollout::attention_flow(rollout::residual_mixed_kernels(ks, ag.alpha), {-1, flow_algorithm}).profile);
  }
  return ag;
}

output::Report agreement_report(const Agreement& ag, const Eigen::VectorXd& influence, const std::string& model_name,
                                const std::string& influence_source) {
  using output::fmt;
  output::Report rep;
  output::Table sp, w1;
  const std::string n = std::to_string(influence.size());
  sp.title =
      "Spearman rank correlation with the measured influence (Position bias (Herasimchyk et al.) Tables 2/4 layout), n "
      "= " +
      n;
  w1.title = "W1 / (n-1) to the measured influence (Position bias (Herasimchyk et al.) Tables 3/5 layout), n = " + n;
  sp.header = w1.header = {"model"};
  std::vector<std::string> rs = {model_name}, rw = {model_name};
  nlohmann::json vars = nlohmann::json::object();
  for (const auto& v : ag.variants) {
    sp.header.push_back(v.label);
    w1.header.push_back(v.label);
    rs.push_back(v.defined ? fmt(v.spearman, 4) : "not defined");
    rw.push_back(v.defined ? fmt(v.w1, 4) : "not defined");
    nlohmann::json js = {{"label", v.label}, {"defined", v.defined}};
    if (v.defined) {
      js["spearman"] = v.spearman;
      js["w1_normalised"] = v.w1;
      js["p"] = std::vector<double>(v.p.data(), v.p.data() + v.p.size());
    } else {
      js["note"] = v.note;
    }
    vars[v.key] = js;
  }
  sp.add_row(rs);
  w1.add_row(rw);
  rep.tables = {sp, w1};
  rep.notes.push_back("kernel source: " + ag.source_description);
  rep.notes.push_back("influence: " + influence_source);
  std::string al;
  for (long l = 0; l < ag.alpha.size(); ++l) al += (l ? ", " : "") + fmt(ag.alpha(l), 4);
  rep.notes.push_back("alpha_l (measured on the same windows): " + al);
  for (const auto& v : ag.variants)
    if (!v.defined) rep.notes.push_back(v.label + ": " + v.note);
  rep.body = {{"kernel_source", kernel_source_name(ag.source)},
              {"kernel_source_description", ag.source_description},
              {"influence_source", influence_source},
              {"alpha", std::vector<double>(ag.alpha.data(), ag.alpha.data() + ag.alpha.size())},
              {"influence", std::vector<double>(influence.data(), influence.data() + influence.size())},
              {"variants", vars}};
  return rep;
}

plot::LinePlot agreement_plot(const Agreement& ag, const Eigen::VectorXd& influence, const std::string& model_name) {
  plot::LinePlot lp;
  bool flow = false;
  for (const auto& v : ag.variants) flow = flow || v.key == "flow";
  lp.title = std::string(flow ? "Rollout and attention flow" : "Rollout") + " vs measured influence, " + model_name +
             " (" + kernel_source_name(ag.source) + " kernels)";
  lp.xlabel = "input position j";
  lp.ylabel = "influence on the next-token position";
  lp.key = "top center";  // the profiles rise at both ends
  double top = influence.maxCoeff();
  for (const auto& v : ag.variants) {
    if (!v.defined) continue;
    plot::Series s{v.label, {}, {}};
    for (long j = 0; j < v.p.size(); ++j) s.x.push_back(static_cast<double>(j)), s.y.push_back(v.p(j));
    if (v.key != "attention_only") top = std::max(top, v.p.maxCoeff());
    lp.series.push_back(s);
  }
  plot::Series s{"measured influence (Eq. 6)", {}, {}};
  for (long j = 0; j < influence.size(); ++j) s.x.push_back(static_cast<double>(j)), s.y.push_back(influence(j));
  lp.series.push_back(s);
  lp.y_min = 0;
  lp.y_max = 1.1 * top;  // (a) collapses onto token 0 and is clipped, as in rollout's own plot
  return lp;
}

}  // namespace cf::influence
