// Capture driver (cf/nn/capture.hpp): forward passes with the on_layer hook, streamed into the
// capture writer of lib/io one (layer, sequence) at a time.
#include "cf/nn/capture.hpp"

#include <cmath>
#include <cstdint>

#include "cf/core/error.hpp"
#include "cf/core/progress.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/io/capture.hpp"

namespace cf::nn {

std::vector<std::int32_t> tokenize_text_for(const ModelConfig& cfg, const std::string& text,
                                            const std::string& gpt2_dir, std::string* tokenizer) {
  std::string name;
  if (cfg.vocab_size == data::kByteVocabSize)
    name = "byte";
  else if (cfg.vocab_size == data::kGpt2VocabSize)
    name = "gpt2";
  else
    throw InvalidArgument(
        str("a text needs a byte (256) or GPT-2 BPE (50,257) vocabulary, but the checkpoint has "
            "vocab_size = ",
            cfg.vocab_size, "; tokenise with prepare-data and pass --data PREFIX"));
  const data::Tokenizer tok = data::Tokenizer::create(name, gpt2_dir);
  if (tokenizer) *tokenizer = tok.name();
  const std::vector<data::Token> t = tok.encode(data::load_corpus(text));
  return std::vector<std::int32_t>(t.begin(), t.end());
}

std::vector<std::vector<std::int32_t>> capture_windows(const std::vector<std::int32_t>& tokens, int seq_len,
                                                       int n_seq) {
  require(seq_len >= 1, "capture: seq_len T must be >= 1 (got ", seq_len, ")");
  require(n_seq >= 1, "capture: the number of sequences N must be >= 1 (got ", n_seq, ")");
  const std::int64_t len = static_cast<std::int64_t>(tokens.size()), need = static_cast<std::int64_t>(seq_len) + 1;
  require(len >= need, "capture: the input has ", len, " tokens but T + 1 = ", need,
          " are needed (T inputs and their next-token targets); use a longer text or a shorter sequence length");
  std::vector<std::vector<std::int32_t>> w;
  const std::int64_t span = len - need;
  for (int i = 0; i < n_seq; ++i) {
    const std::int64_t start =
        n_seq == 1 ? 0 : static_cast<std::int64_t>(std::llround(static_cast<double>(i) * span / (n_seq - 1)));
    w.emplace_back(tokens.begin() + start, tokens.begin() + start + need);
  }
  return w;
}

double attention_row_entropy(const float* probs, int seq_len) {
  require(seq_len >= 1, "attention_row_entropy: seq_len must be >= 1 (got ", seq_len, ")");
  double total = 0;
  int rows = 0;
  for (int i = 0; i < seq_len; ++i) {
    const float* r = probs + static_cast<std::size_t>(i) * seq_len;
    double mass = 0;
    for (int j = 0; j < seq_len; ++j) mass += r[j];
    if (!(mass > 0)) continue;
    double h = 0;
    for (int j = 0; j < seq_len; ++j)
      if (r[j] > 0) {
        const double p = r[j] / mass;
        h -= p * std::log(p);
      }
    total += h;
    ++rows;
  }
  return rows > 0 ? total / rows : 0.0;
}

std::uint64_t capture_bytes(const ModelConfig& cfg, std::int64_t n_seq, std::int64_t seq_len,
                            const CaptureOptions& opt) {
  const double N = static_cast<double>(n_seq), T = static_cast<double>(seq_len);
  double b = N * T * 8;  // /tokens, int64
  for (int l = 0; l < cfg.n_layer; ++l) {
    const double H = opt.heads.empty() ? cfg.n_head : static_cast<double>(opt.heads.size());
    if (opt.store_probs) b += N * H * T * T * 4;
    if (opt.store_qk) b += 2 * N * H * T * head_dim(cfg, l) * 4;
    b += 3 * N * T * 4;
  }
  return b >= 1.8e19 ? UINT64_MAX : static_cast<std::uint64_t>(b);
}

CaptureSummary capture_model(const Model<float>& model, const std::vector<std::vector<std::int32_t>>& windows,
                             const std::string& path, const CaptureOptions& opt) {
  Workspace<float> ws;
  const CaptureForward forward = [&](const std::int32_t* in, const std::int32_t* tg, int T, const ForwardHooks& hooks) {
    return static_cast<double>(forward_backward<float>(model, in, tg, 1, T, nullptr, ws, &hooks));
  };
  return capture_model(model.config, forward, windows, path, opt);
}

CaptureSummary capture_model(const ModelConfig& cfg, const CaptureForward& forward,
                             const std::vector<std::vector<std::int32_t>>& windows, const std::string& path,
                             const CaptureOptions& opt) {
  require(!windows.empty(), "capture: no token windows given");
  const int T = static_cast<int>(windows[0].size()) - 1;
  require(T >= 1, "capture: windows need seq_len + 1 >= 2 tokens (got ", windows[0].size(), ")");
  require(T <= cfg.block_size, "capture: seq_len T = ", T, " exceeds the model's block_size = ", cfg.block_size);
  for (std::size_t n = 0; n < windows.size(); ++n)
    require(static_cast<int>(windows[n].size()) == T + 1, "capture: window ", n, " has ", windows[n].size(),
            " tokens but window 0 has ", T + 1);
  const int H = cfg.n_head, L = cfg.n_layer, N = static_cast<int>(windows.size());
  std::vector<bool> seen(static_cast<std::size_t>(H), false);
  for (int h : opt.heads) {
    require(h >= 0 && h < H, "capture: head index ", h, " outside [0, n_head = ", H, ")");
    require(!seen[static_cast<std::size_t>(h)], "capture: head index ", h, " given twice");
    seen[static_cast<std::size_t>(h)] = true;
  }
  std::vector<int> heads = opt.heads;
  if (heads.empty())
    for (int h = 0; h < H; ++h) heads.push_back(h);
  const int Hs = static_cast<int>(heads.size());

  io::CaptureHeader hdr;
  hdr.config_json = to_json(cfg).dump();
  hdr.source = opt.source;
  hdr.n_seq = N;
  hdr.seq_len = T;
  for (int l = 0; l < L; ++l) {
    hdr.n_head.push_back(Hs);
    hdr.d_head.push_back(head_dim(cfg, l));
  }
  if (!opt.heads.empty()) hdr.heads = opt.heads;

  CaptureSummary sum;
  sum.n_seq = N;
  sum.seq_len = T;
  sum.layers.assign(static_cast<std::size_t>(L), CaptureLayerSummary{});
  std::vector<Eigen::MatrixXd> rn(static_cast<std::size_t>(L), Eigen::MatrixXd(N, T)), an = rn;
  const std::size_t TT = static_cast<std::size_t>(T) * T;
  io::write_capture_atomic(path, hdr, [&](io::CaptureWriter& w) {
    std::vector<float> probs, q, k;
    Progress progress("capture", N);  // stderr, terminals only (cf/core/progress.hpp)
    for (int n = 0; n < N; ++n, progress.advance()) {
      const std::vector<std::int32_t> in(windows[n].begin(), windows[n].end() - 1),
          tg(windows[n].begin() + 1, windows[n].end());
      w.write_tokens(n, in);
      ForwardHooks hooks;
      hooks.capture_heads = heads;  // probabilities materialised for the captured heads only
      hooks.on_layer = [&](const LayerActivations& la) {
        const int l = la.layer, dh = la.d_head;
        const std::size_t TD = static_cast<std::size_t>(T) * dh;
        probs.resize(static_cast<std::size_t>(Hs) * TT);
        q.resize(static_cast<std::size_t>(Hs) * TD);
        k.resize(q.size());
        double ent = 0;
        for (int s = 0; s < Hs; ++s) {
          const std::size_t h = static_cast<std::size_t>(heads[static_cast<std::size_t>(s)]);
          std::copy(la.attn_probs + h * TT, la.attn_probs + (h + 1) * TT, probs.begin() + s * TT);
          std::copy(la.q + h * TD, la.q + (h + 1) * TD, q.begin() + s * TD);
          std::copy(la.k + h * TD, la.k + (h + 1) * TD, k.begin() + s * TD);
          ent += attention_row_entropy(la.attn_probs + h * TT, T);
        }
        sum.layers[static_cast<std::size_t>(l)].entropy += ent / Hs / N;
        for (int t = 0; t < T; ++t) {
          rn[static_cast<std::size_t>(l)](n, t) = la.resid_in_norm[t];
          an[static_cast<std::size_t>(l)](n, t) = la.attn_out_norm[t];
        }
        io::LayerCapture c;
        c.attn_probs = opt.store_probs ? probs.data() : nullptr;
        c.q = opt.store_qk ? q.data() : nullptr;
        c.k = opt.store_qk ? k.data() : nullptr;
        c.resid_in_norm = la.resid_in_norm;
        c.attn_out_norm = la.attn_out_norm;
        c.resid_out_norm = la.resid_out_norm;
        w.write(l, n, c);
      };
      sum.nll += static_cast<float>(forward(in.data(), tg.data(), T, hooks)) / N;  // float mean, as before
    }
  });
  for (int l = 0; l < L; ++l) {
    // the same function on the same float norms as the writer's /alpha_* datasets
    const io::ResidualAlpha a = io::residual_alpha(rn[static_cast<std::size_t>(l)], an[static_cast<std::size_t>(l)]);
    sum.layers[static_cast<std::size_t>(l)].alpha_token_mean = a.token_mean;
    sum.layers[static_cast<std::size_t>(l)].alpha_frobenius = a.frobenius;
  }
  return sum;
}

}  // namespace cf::nn
