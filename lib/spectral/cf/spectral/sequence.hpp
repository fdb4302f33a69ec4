#pragma once
// Sequence-level routing/filtering analysis (Routing/filtering (Jamil & Kapadia) §3, App. A; docs/spec.md §3): the
// UNMASKED score matrix M = Q K^T / sqrt(d_k) (S–D layers: S - D) of every head on given texts, intercepted from the
// trainer's forward pass (cf::nn::ForwardHooks::on_scores), decomposed and averaged over texts.
#include <functional>
#include <string>
#include <vector>

#include "cf/nn/model.hpp"
#include "cf/spectral/model.hpp"
#include "cf/spectral/partial.hpp"

namespace cf::spectral {

/// Unit roundoff of float32 (2^-24): the forward pass computes the score matrices in float32.
constexpr double kFloat32RoundingUnit = 0x1p-24;

/// One text's forward pass with `hooks` (their on_scores set): nn::forward_logits's, or a device
/// model's (apps/spectral, docs/gpu.md "Analysis model"), which calls on_scores per (layer, head) on
/// the host with the same unmasked score matrix.
using ScoresForward = std::function<void(const std::vector<std::int32_t>& tokens, const nn::ForwardHooks& hooks)>;

/// Settings of the sequence-level analysis.
struct SequenceOptions {
  std::string texts_path;          ///< one text per non-empty line
  std::string tokenizer = "auto";  ///< auto (byte for vocab 256, gpt2 for 50257) | byte | gpt2
  std::string gpt2_dir;            ///< GPT-2 vocabulary folder ("" = lib/data default)
  int max_tokens = 1024;           ///< each text is cut to min(max_tokens, block_size) tokens
  /// spectrum_M is ignored (sequence level reports F and R); rounding_unit is raised to
  /// kFloat32RoundingUnit (the scores are float32), so rank_R / rank_F count sigma_i >
  /// n 2^-24 sigma_max and a head is unstable only when max Re lambda > n 2^-24 ||M||_F.
  AnalysisOptions analysis;
  /// n above this: max Re lambda from Spectra's GenEigsSolver instead of the dense eigensolver.
  Index dense_eigen_max_n = 128;
  /// Builds the loaded model's forward pass; empty (or returning an empty function) = the CPU's,
  /// nn::forward_logits.
  std::function<ScoresForward(const nn::Model<float>& model)> forward;
};

/// Result: per-head metrics averaged over the texts, plus the token count of each text.
struct SequenceAnalysis {
  ModelSpectrum spectrum;  ///< level "sequence"
  std::vector<int> token_counts;
  std::string tokenizer;
};

/// Tokenize each non-empty line of `texts_path` (throws cf::InvalidArgument if the file is
/// missing or has no text, or the tokenizer does not fit vocab_size). When `checkpoint` is a
/// Hugging Face folder with its own tokenizer.json, that tokenizer is used (as every other tool
/// does, cf/hf/token_input.hpp; `tokenizer` must then be "auto": byte or gpt2 would read the text
/// in another vocabulary than the model's).
std::vector<std::vector<std::int32_t>> tokenize_texts(const std::string& texts_path, const std::string& tokenizer,
                                                      const std::string& gpt2_dir, int vocab_size, int max_tokens,
                                                      std::string* resolved_tokenizer,
                                                      const std::string& checkpoint = "");

/// Metrics of one unmasked score matrix M (n x n): dense SVDs of F and R; max Re lambda by the
/// dense eigensolver for n <= dense_eigen_max_n, else Spectra GenEigs (dense fallback inside).
/// opt.rounding_unit must be that of the arithmetic that produced M (float32 scores:
/// kFloat32RoundingUnit), so that ranks and instability ignore rounding noise.
HeadSpectrum analyse_scores(const Eigen::MatrixXd& M, const AnalysisOptions& opt, Index dense_eigen_max_n);

/// Analyse `layers` (all when empty; indices in [0, n_layer)) of a loaded model on token lists.
/// Linear-attention layers have no score matrix and are skipped.
ModelSpectrum analyse_sequences(const nn::Model<float>& model, const std::vector<std::vector<std::int32_t>>& texts,
                                const std::vector<int>& layers, const SequenceOptions& opt);

/// Load `checkpoint`, tokenize opt.texts_path and analyse.
SequenceAnalysis analyse_sequences(const std::string& checkpoint, const std::vector<int>& layers,
                                   const SequenceOptions& opt);

}  // namespace cf::spectral
