#include "cf/probe/evaluate.hpp"

#include <cmath>
#include <memory>

#include "cf/core/error.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/nn/ops.hpp"
#include "cf/probe/stats.hpp"

namespace cf::probe {

const float* forward_probs(const nn::Model<float>& model, const std::int32_t* tokens, int B, int T,
                           nn::Workspace<float>& ws) {
  std::vector<std::int32_t> none(static_cast<std::size_t>(B) * T, -1);
  nn::forward_backward<float>(model, tokens, none.data(), B, T, nullptr, ws);
  // after the forward pass the logits buffer holds the softmax probabilities (crossentropy_forward)
  return ws.probabilities();
}

ProbsForward cpu_probs_forward(const nn::Model<float>& model) {
  auto ws = std::make_shared<nn::Workspace<float>>();
  return [&model, ws](const std::int32_t* tokens, int B, int T) { return forward_probs(model, tokens, B, T, *ws); };
}

ProbsForward probs_from_logits(LogitsForward forward, int vocab_size) {
  auto z = std::make_shared<std::vector<float>>();
  auto losses = std::make_shared<std::vector<float>>();
  return [forward = std::move(forward), vocab_size, z, losses](const std::int32_t* tokens, int B, int T) {
    const int N = B * T;
    forward(tokens, B, T, *z);
    require(z->size() == static_cast<std::size_t>(N) * vocab_size, "the forward pass returned ", z->size(),
            " logits, not ", N, " x ", vocab_size);
    const std::vector<std::int32_t> none(static_cast<std::size_t>(N), -1);
    losses->resize(static_cast<std::size_t>(N));
    nn::crossentropy_forward<float>(z->data(), losses->data(), none.data(), N, vocab_size);
    return static_cast<const float*>(z->data());
  };
}

void check_model_fits(const nn::ModelConfig& c, int seq_len, int task_vocab, const std::string& what) {
  require(seq_len <= c.block_size, what, ": context ", seq_len, " tokens is above the model's block_size ",
          c.block_size);
  require(task_vocab <= c.vocab_size, what, ": task tokens need vocab_size ", task_vocab,
          " but the model has vocab_size ", c.vocab_size, " (another tokeniser?)");
}

std::vector<Readout> evaluate_boundary_copy(const nn::Model<float>& model, const BoundaryCopySpec& s,
                                            const data::TaskSplit& split, int batch, int max_rows,
                                            const Progress& progress, const ProbsForward& forward) {
  return evaluate_boundary_copy(model.config, forward ? forward : cpu_probs_forward(model), s, split, batch, max_rows,
                                progress);
}

std::vector<Readout> evaluate_boundary_copy(const nn::ModelConfig& c, const ProbsForward& probs,
                                            const BoundaryCopySpec& s, const data::TaskSplit& split, int batch,
                                            int max_rows, const Progress& progress) {
  require(static_cast<bool>(probs), "evaluate_boundary_copy: no forward pass given");
  require(batch >= 1, "--batch must be >= 1 (got ", batch, ")");
  const int T = s.seq_len, L = s.seq_len + 1, V = c.vocab_size;
  require(split.tokens.size() % static_cast<std::size_t>(L) == 0, "task split is not a whole number of rows of ", L);
  std::int64_t rows = static_cast<std::int64_t>(split.tokens.size() / static_cast<std::size_t>(L));
  if (max_rows > 0) rows = std::min<std::int64_t>(rows, max_rows);
  for (auto a : s.alphabet) require(int(a) < V, "alphabet token ", a, " >= the model's vocab_size ", V);
  const graph::Closure cl = graph::closure(model_schedule(c), T);
  std::vector<int> index(static_cast<std::size_t>(V), -1);
  for (int k = 0; k < s.K; ++k) index[s.alphabet[static_cast<std::size_t>(k)]] = k;
  std::vector<Readout> out;
  std::vector<std::int32_t> x;
  for (std::int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int B = static_cast<int>(std::min<std::int64_t>(batch, rows - r0));
    x.resize(static_cast<std::size_t>(B) * T);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) x[b * T + t] = split.tokens[static_cast<std::size_t>((r0 + b) * L + t)];
    const float* P = probs(x.data(), B, T);
    for (int b = 0; b < B; ++b) {
      const std::size_t base = static_cast<std::size_t>((r0 + b) * L);
      for (int p = 0; p < T; ++p) {
        if (!split.mask[base + p + 1]) continue;
        Readout ro;
        ro.row = static_cast<int>(r0 + b);
        ro.p = p;
        ro.phase = p % s.b;
        const int lab = index[split.tokens[base + p + 1]];
        require(lab >= 0, "row ", ro.row, ": scored token at ", p + 1, " is not in the task alphabet");
        ro.label = lab;
        const float* pr = P + static_cast<std::size_t>(b * T + p) * V;
        double sum = 0, best = -1;
        for (int k = 0; k < s.K; ++k) {
          const double v = pr[s.alphabet[static_cast<std::size_t>(k)]];
          sum += v;
          if (v > best) {
            best = v;
            ro.predicted = k;
          }
        }
        const double pl = pr[s.alphabet[static_cast<std::size_t>(lab)]];
        ro.ce = sum > 0 && pl > 0 ? -std::log(pl / sum) : INFINITY;
        ro.covered = p - s.d >= 0 && cl.contains(p, p - s.d);
        out.push_back(ro);
      }
    }
    if (progress) progress(r0 + B, rows);
  }
  return out;
}

std::vector<PhaseResult> summarise_phases(const std::vector<Readout>& readouts, int K, int b, double alpha) {
  require(alpha > 0 && alpha < 1, "--alpha must lie in (0, 1) (got ", alpha, ")");
  std::vector<PhaseResult> ph(static_cast<std::size_t>(b));
  std::vector<std::int64_t> cov(static_cast<std::size_t>(b), 0);
  for (int r = 0; r < b; ++r) ph[static_cast<std::size_t>(r)].phase = r;
  for (const auto& ro : readouts) {
    auto& q = ph[static_cast<std::size_t>(ro.phase)];
    ++q.n;
    q.correct += ro.predicted == ro.label;
    q.ce += ro.ce;
    cov[static_cast<std::size_t>(ro.phase)] += ro.covered;
  }
  std::vector<PhaseResult> out;
  for (int r = 0; r < b; ++r) {
    auto q = ph[static_cast<std::size_t>(r)];
    if (q.n == 0) continue;
    q.accuracy = double(q.correct) / double(q.n);
    q.ce /= double(q.n);
    q.pi = double(cov[static_cast<std::size_t>(r)]) / double(q.n);
    const auto bd = graph::coverage_limited_bound(q.pi, K);
    q.acc_bound = bd.accuracy_max;
    q.ce_bound = bd.cross_entropy_min;
    q.p_value = binomial_test_above(q.correct, q.n, std::min(1.0, q.acc_bound));
    out.push_back(q);
  }
  for (auto& q : out) q.significant = q.p_value < alpha / double(out.size());
  return out;
}

}  // namespace cf::probe
