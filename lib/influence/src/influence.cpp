// Measured influence (Position bias (Herasimchyk et al.) Eq. 6), see cf/influence/influence.hpp.
#include "cf/influence/influence.hpp"

#include <algorithm>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"
#include "cf/influence/seeded_pass.hpp"
#include "cf/nn/gradient_seed.hpp"

namespace cf::influence {

Target parse_target(const std::string& name) {
  if (const auto t = kTargets.find(name)) return *t;
  throw InvalidArgument("--target: unknown influence target '" + name + "' (expected " + kTargets.list(" | ") + ")");
}

std::string target_name(Target t) { return std::string(kTargets.name(t)); }

Windows influence_window(const std::vector<std::int32_t>& tokens, int n, int index, int count) {
  require(n >= 2, "influence needs windows of n >= 2 tokens (got n = ", n, ")");
  require(count >= 1, "--windows must be >= 1 (got ", count, ")");
  require(index >= 0 && index < count, "--window = ", index, " must be < --windows = ", count);
  const std::int64_t len = static_cast<std::int64_t>(tokens.size());
  require(len >= n + 1, "the input has ", len, " tokens but a window needs n + 1 = ", n + 1,
          " (n inputs and capture's next-token target)");
  // capture's rule (cf::nn::capture_windows): evenly spread starts
  const std::int64_t s =
      count == 1 ? 0 : std::llround(static_cast<double>(index) * static_cast<double>(len - n - 1) / (count - 1));
  Windows w;
  w.starts.push_back(s);
  w.tokens.emplace_back(tokens.begin() + s, tokens.begin() + s + n);
  return w;
}

Windows influence_windows(const std::vector<std::int32_t>& tokens, int n, int count) {
  require(count >= 1, "--windows must be >= 1 (got ", count, ")");
  Windows w;
  for (int i = 0; i < count; ++i) {
    Windows one = influence_window(tokens, n, i, count);
    w.starts.push_back(one.starts[0]);
    w.tokens.push_back(std::move(one.tokens[0]));
  }
  return w;
}

namespace {
nn::TopObjective top_objective(Target t) {
  return t == Target::Probability      ? nn::TopObjective::Probability
         : t == Target::LogProbability ? nn::TopObjective::LogProbability
                                       : nn::TopObjective::Logit;
}
}  // namespace

template <class T>
InfluenceGradients influence_gradients(const nn::Model<T>& model, const std::vector<std::vector<std::int32_t>>& windows,
                                       Target target, bool keep_gradients, const nn::SeededPass<T>& pass) {
  require(!windows.empty(), "influence needs at least one window");
  const int W = static_cast<int>(windows.size());
  const int n = static_cast<int>(windows[0].size());
  require(n >= 2, "influence needs windows of n >= 2 tokens (got n = ", n, ")");
  require(n <= model.config.block_size, "window length n = ", n,
          " exceeds the model's context block_size = ", model.config.block_size);
  std::vector<std::int32_t> tokens, targets(static_cast<std::size_t>(W) * n, -1);
  tokens.reserve(targets.size());
  for (const auto& w : windows) {
    require(static_cast<int>(w.size()) == n, "windows must have equal length (", w.size(), " vs ", n, ")");
    tokens.insert(tokens.end(), w.begin(), w.end());
  }
  const int C = model.config.d_model;
  // d target / d logits at the last position of every window (cf::nn::TopSeed: the top prediction
  // yhat = argmax p, first index on ties), evaluated where the probabilities are (a device keeps them)
  std::vector<std::int32_t> yhat;
  std::vector<T> p_yhat;
  nn::GradientSeed<T> seed;
  seed.top = nn::TopSeed<T>{top_objective(target), &yhat, &p_yhat};
  std::vector<T> de;
  seed.dresid = &de;
  seed.out_layer = 0;
  seeded_pass_or_cpu(model, pass)(tokens.data(), targets.data(), W, n, seed);
  require(de.size() == static_cast<std::size_t>(W) * n * C, "internal: input gradient has ", de.size(),
          " entries, expected ", static_cast<std::size_t>(W) * n * C);
  require(yhat.size() == static_cast<std::size_t>(W) && p_yhat.size() == yhat.size(), "internal: top predictions of ",
          yhat.size(), " windows, expected ", W);
  InfluenceGradients out;
  out.yhat.assign(yhat.begin(), yhat.end());
  out.p_yhat.resize(W);
  for (int b = 0; b < W; ++b) out.p_yhat(b) = static_cast<double>(p_yhat[static_cast<std::size_t>(b)]);
  out.g.resize(W, n);
  if (keep_gradients) out.de.assign(W, Eigen::MatrixXd(n, C));
  for (int b = 0; b < W; ++b)
    for (int j = 0; j < n; ++j) {
      const T* d = de.data() + (static_cast<std::size_t>(b) * n + j) * C;
      double ss = 0;
      for (int c = 0; c < C; ++c) {
        ss += static_cast<double>(d[c]) * static_cast<double>(d[c]);
        if (keep_gradients) out.de[b](j, c) = static_cast<double>(d[c]);
      }
      out.g(b, j) = std::sqrt(ss);
    }
  return out;
}

Eigen::VectorXd normalise_profile(const Eigen::VectorXd& mean_g) {
  const double s = mean_g.sum();
  // every gradient zero: a degenerate model (weights of 1e-40, all zero), bad input (exit 2) with a
  // message saying so; it read "sums to 0.000000 ... zero or not finite" with exit 1 (issue 29)
  if (s == 0)
    throw InvalidArgument(
        "the model is degenerate: the prediction's gradient with respect to every input position is exactly 0 "
        "(weights that are all zero or vanishingly small, e.g. 1e-40), so there is no influence to measure");
  if (!(s > 0) || !std::isfinite(s))
    throw Error("influence profile sums to " + std::to_string(s) + ": the gradients are not finite");
  return mean_g / s;
}

int influence_batch(const nn::ModelConfig& config, int n, int W, int batch, double budget_bytes) {
  if (batch >= 1) return std::min(batch, W);
  const double per_window =
      4.0 * n * (static_cast<double>(config.n_layer) * 24.0 * config.d_model + 2.0 * config.vocab_size);
  const double fit = std::floor(budget_bytes / std::max(1.0, per_window));
  return static_cast<int>(std::max(1.0, std::min(static_cast<double>(W), fit)));
}

InfluenceResult measure_influence(const nn::Model<float>& model, const std::vector<std::vector<std::int32_t>>& windows,
                                  Target target, int batch, const nn::SeededPass<float>& pass) {
  require(!windows.empty(), "influence needs at least one window");
  require(batch >= 0, "--batch must be >= 1 (got ", batch, ")");
  const int W = static_cast<int>(windows.size());
  const int n0 = static_cast<int>(windows[0].size());
  const int bs = influence_batch(model.config, n0, W, batch);
  InfluenceResult r;
  r.target = target;
  const int n = static_cast<int>(windows[0].size());
  r.per_window.g.resize(W, n);
  r.per_window.p_yhat.resize(W);
  const nn::SeededPass<float> run = seeded_pass_or_cpu(model, pass);  // one scratch and workspace for all batches
  Progress progress("influence: windows", W);                         // stderr, terminals only (cf/core/progress.hpp)
  for (int b0 = 0; b0 < W; b0 += bs) {
    const int b1 = std::min(W, b0 + bs);
    std::vector<std::vector<std::int32_t>> part(windows.begin() + b0, windows.begin() + b1);
    const InfluenceGradients g = influence_gradients(model, part, target, false, run);
    r.per_window.g.middleRows(b0, b1 - b0) = g.g;
    r.per_window.p_yhat.segment(b0, b1 - b0) = g.p_yhat;
    r.per_window.yhat.insert(r.per_window.yhat.end(), g.yhat.begin(), g.yhat.end());
    ++r.backward_passes;
    progress.advance(b1 - b0);
  }
  r.mean_g = r.per_window.g.colwise().mean().transpose();
  r.profile = normalise_profile(r.mean_g);
  return r;
}

template InfluenceGradients influence_gradients<float>(const nn::Model<float>&,
                                                       const std::vector<std::vector<std::int32_t>>&, Target, bool,
                                                       const nn::SeededPass<float>&);
template InfluenceGradients influence_gradients<double>(const nn::Model<double>&,
                                                        const std::vector<std::vector<std::int32_t>>&, Target, bool,
                                                        const nn::SeededPass<double>&);

}  // namespace cf::influence
