#include "cf/spectral/sequence.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/model/load.hpp"

namespace cf::spectral {

std::vector<std::vector<std::int32_t>> tokenize_texts(const std::string& texts_path, const std::string& tokenizer,
                                                      const std::string& gpt2_dir, int vocab_size, int max_tokens,
                                                      std::string* resolved, const std::string& checkpoint) {
  require_regular_input(texts_path, "texts file");  // a FIFO would block the open below forever
  std::ifstream in(texts_path);
  require(static_cast<bool>(in), "cannot open texts file '", texts_path, "'");
  // the folder's own tokenizer.json first (it was ignored: the texts were read as bytes or GPT-2
  // BPE in another vocabulary than the model's, with exit 0; issue 29)
  if (const auto hf_tok = checkpoint.empty() ? nullptr : hf::folder_tokenizer(checkpoint)) {
    require(tokenizer == "auto", "--tokenizer ", tokenizer, ": the checkpoint folder '", checkpoint,
            "' has its own tokenizer.json, which the texts are read with; leave --tokenizer at auto");
    std::vector<std::vector<std::int32_t>> out;
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::vector<std::int32_t> ids = hf_tok->encode(line);
      for (std::int32_t id : ids)
        require(id < vocab_size, "tokenizer.json of '", checkpoint, "' produced id ", id,
                " but the model has vocab_size = ", vocab_size);
      if (ids.size() > std::size_t(max_tokens)) ids.resize(std::size_t(max_tokens));
      if (ids.size() >= 2) out.push_back(std::move(ids));
    }
    require(!out.empty(), "texts file '", texts_path, "' has no text of at least 2 tokens");
    if (resolved) *resolved = "tokenizer.json";
    return out;
  }
  std::string name = tokenizer;
  if (name == "auto") {
    require(vocab_size == data::kByteVocabSize || vocab_size == data::kGpt2VocabSize,
            "--tokenizer auto needs vocab_size 256 (byte) or 50257 (gpt2); the checkpoint has ", vocab_size,
            ": give --tokenizer");
    name = vocab_size == data::kByteVocabSize ? "byte" : "gpt2";
  }
  const data::Tokenizer tok = data::Tokenizer::create(name, gpt2_dir);
  require(tok.vocab_size() <= vocab_size, "tokenizer '", name, "' has ", tok.vocab_size(),
          " ids but the checkpoint's vocab_size is ", vocab_size);
  std::vector<std::vector<std::int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<data::Token> t = tok.encode(line);
    std::vector<std::int32_t> ids(t.begin(), t.begin() + std::min<std::size_t>(t.size(), std::size_t(max_tokens)));
    if (ids.size() >= 2) out.push_back(std::move(ids));
  }
  require(!out.empty(), "texts file '", texts_path, "' has no text of at least 2 tokens");
  if (resolved) *resolved = name;
  return out;
}

HeadSpectrum analyse_scores(const Eigen::MatrixXd& M, const AnalysisOptions& opt, Index dense_eigen_max_n) {
  AnalysisOptions o = opt;
  o.spectrum_M = false;
  const bool big = M.rows() > dense_eigen_max_n;
  if (big) o.eigenvalues = false;
  HeadSpectrum h = analyse_dense(M, o);
  if (big && opt.eigenvalues) {
    const PartialResult r = partial_max_real_eigenvalue(DenseOperator{M});
    h.max_re_lambda = r.converged ? r.values[0] : std::numeric_limits<double>::quiet_NaN();
  }
  return h;
}

ModelSpectrum analyse_sequences(const nn::Model<float>& model, const std::vector<std::vector<std::int32_t>>& texts,
                                const std::vector<int>& layers, const SequenceOptions& opt) {
  const int L = model.config.n_layer, H = model.config.n_head;
  std::set<int> want;
  for (int l : layers) {
    require(l >= 0 && l < L, "layer ", l, " is out of range (0 <= layer < n_layer = ", L, ")");
    want.insert(l);
  }
  if (want.empty())
    for (int l = 0; l < L; ++l) want.insert(l);
  std::vector<std::vector<HeadResult>> per_head(std::size_t(L) * H);
  // The scores come from the float32 forward pass: rank and instability are judged against
  // float32 rounding (decomposition.hpp AnalysisOptions), not double's.
  AnalysisOptions ao = opt.analysis;
  ao.rounding_unit = std::max(ao.rounding_unit, kFloat32RoundingUnit);
  nn::ForwardHooks hooks;
  hooks.on_scores = [&](int l, int h, Eigen::Ref<Eigen::MatrixXf> M) {
    if (!want.count(l)) return;
    const HeadSpectrum s = analyse_scores(M.cast<double>(), ao, opt.dense_eigen_max_n);
    per_head[std::size_t(l) * H + h].push_back(head_result(l, h, nn::attn_name(model.config.layers[l].attn), s));
  };
  const ScoresForward forward = opt.forward ? opt.forward(model) : ScoresForward{};
  for (const auto& t : texts) {
    const std::size_t n = std::min<std::size_t>(t.size(), std::size_t(model.config.block_size));
    const std::vector<std::int32_t> tt(t.begin(), t.begin() + n);
    if (forward)
      forward(tt, hooks);
    else
      nn::forward_logits(model, tt, &hooks);
  }
  ModelSpectrum m;
  m.level = "sequence";
  for (const auto& v : per_head)
    if (!v.empty()) m.heads.push_back(average_heads(v));
  aggregate(m);
  return m;
}

SequenceAnalysis analyse_sequences(const std::string& checkpoint, const std::vector<int>& layers,
                                   const SequenceOptions& opt) {
  const nn::Model<float> model = cf::model::load_model(checkpoint);
  SequenceAnalysis r;
  const auto texts = tokenize_texts(opt.texts_path, opt.tokenizer, opt.gpt2_dir, model.config.vocab_size,
                                    std::min(opt.max_tokens, model.config.block_size), &r.tokenizer, checkpoint);
  for (const auto& t : texts) r.token_counts.push_back(int(t.size()));
  r.spectrum = analyse_sequences(model, texts, layers, opt);
  return r;
}

}  // namespace cf::spectral
