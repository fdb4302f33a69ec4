#pragma once
// Candidate ranking (Boundary repair (Yang) §5, docs/spec.md §5): single-fact prompts whose answer is one of four
// balanced candidates (the correct slot cycles through 0..3; the other three are distinct values
// of the same list), ranked by the summed NLL of each candidate's tokens after the prompt.
// Families: needle (fact at a depth of filler text, query at the end), bridge-window (the fact's
// value in [p-h, p) of a block boundary p, the readout in [p, p+h): inside the repaired window),
// boundary-tail (the value ends `offset` tokens before a boundary, the query right after it),
// semantic-exact (query repeats the fact), semantic-paraphrase (query rephrases it),
// semantic-distractor (a second fact with another value, which is among the candidates).
#include <cstdint>
#include <string>
#include <vector>

#include "cf/data/task_file.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/nn/model.hpp"
#include "cf/probe/evaluate.hpp"
#include "cf/probe/prepare.hpp"
#include "cf/probe/report.hpp"

namespace cf::probe {

/// The known family names, in report order.
const std::vector<std::string>& ranking_families();

struct RankingSpec {
  std::vector<std::string> families;
  int items_val = 500;    ///< validation items per family
  int rows_train = 2000;  ///< training rows (prompt + correct candidate), families cycled
  int context = 64;       ///< prompt tokens of needle / bridge-window / boundary-tail items
  int b = 32, w = 32;     ///< block size and bridge width (h = w/2)
  std::uint64_t seed = 1;
};

/// Spec from the prepare-data options (--families, --rows-val items per family, --rows-train,
/// --context, --b, --w, --seed); throws cf::InvalidArgument naming a bad option.
RankingSpec ranking_spec(const TaskOptions& o);

/// Build the task. Items hold {"family", "prompt_len", "candidates" (4 token lists), "correct"
/// (slot 0..3), "source_end" (last token of the fact's value), "readout" (last prompt token)}.
data::TaskData generate_ranking(const RankingSpec& s, const data::Tokenizer& tok,
                                const std::vector<data::Token>& filler);

/// One evaluated item.
struct RankingOutcome {
  std::string family;
  int correct_slot = 0, chosen = 0;
  bool correct = false;            ///< the correct candidate has the strictly lowest NLL
  double margin = 0;               ///< min NLL of the wrong candidates - NLL of the correct one (nats)
  std::vector<double> prompt_nll;  ///< -log p(prompt token i | tokens < i), i = 1..prompt_len-1
};

/// Check a read ranking task before it indexes anything (items.json and the metadata are input):
/// a "families" list in the metadata, and per validation item a "family" of that list, a
/// "prompt_len" in [1, row_len - 1], "candidates" = 4 non-empty lists of token ids below
/// vocab_size that fit the row after the prompt, and a "correct" slot in [0, 3]. Throws
/// cf::InvalidArgument naming the item and field.
void check_ranking_task(const data::TaskData& d);

/// Score every validation item (4 forward rows per item, batched). `forward`: the model's forward
/// pass (empty = the CPU's).
std::vector<RankingOutcome> evaluate_ranking(const nn::Model<float>& model, const data::TaskData& d, int batch,
                                             int max_rows, const Progress& progress = {},
                                             const ProbsForward& forward = {});
/// The same on the forward pass `forward` (required) of a model with config `c`.
std::vector<RankingOutcome> evaluate_ranking(const nn::ModelConfig& c, const ProbsForward& forward,
                                             const data::TaskData& d, int batch, int max_rows,
                                             const Progress& progress = {});

/// `probe ranking`: accuracy per family, margins, prompt-token NLL by position (heatmap), paired
/// comparison of two checkpoints per family and overall.
output::Report run_ranking(const ProbeOptions& o, const data::TaskData& d);

}  // namespace cf::probe
