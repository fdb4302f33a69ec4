#pragma once
// Passkey retrieval (Runway (Lee & Clark) §C.2, docs/spec.md §5): the needle "The passkey is NNNNN." is placed at a
// depth fraction of filler text, the prompt ends with "The passkey is", the model decodes greedily
// and an item counts only if the decoded digits are exactly the five of the passkey.
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

/// Grid and counts. Context length = tokens of the prompt (filler + needle + "The passkey is").
struct PasskeySpec {
  std::vector<int> lengths;    ///< each >= needle + prompt tokens + 1
  std::vector<double> depths;  ///< each in [0, 1]: 0 = needle first, 1 = needle right before the prompt
  int reps = 4;                ///< validation items per (length, depth) cell
  int rows_train = 2000;       ///< training items, cycling through the grid
  std::uint64_t seed = 1;
  /// The longest context length the evaluated models were trained at (0 = not stated): lengths up
  /// to it are in-context, longer ones out-of-context (Runway (Lee & Clark) §5.3 / App. C.2, where
  /// models trained at 1,024 tokens are probed from 1,024 up to 1,536). Written to the metadata as
  /// "in_context"; `probe passkey` then labels the lengths and compares the regimes separately.
  int in_context = 0;
};

/// Spec from the prepare-data options; throws cf::InvalidArgument for a depth outside [0, 1], a
/// length < 1 or reps < 1 (naming --depths / --lengths / --reps and the value).
PasskeySpec passkey_spec(const TaskOptions& o);

/// The needle text of a passkey ("The passkey is 12345." with a leading space) and the prompt
/// (" The passkey is").
std::string passkey_needle(const std::string& digits);
inline constexpr const char* kPasskeyPrompt = " The passkey is";

/// Build the task: rows = prompt tokens + answer tokens (" NNNNN."), right-padded to one row length
/// with the tokenizer's space (mask 0); loss only on the answer. Items (both splits) hold
/// {"length", "depth", "passkey", "needle_pos", "prompt_len"}. Filler windows are cut from
/// `filler` at seeded offsets; the needle starts at round(depth * filler tokens).
data::TaskData generate_passkey(const PasskeySpec& s, const data::Tokenizer& tok,
                                const std::vector<data::Token>& filler);

/// The scoring rule: exact when the leading digit run of the decoded text (after leading spaces)
/// is the passkey, all and only its digits (Runway (Lee & Clark) App. C.2); prefix_match when its
/// first five digits are the passkey (more may follow). The answer of a generated row, " NNNNN.",
/// is exact: the period ends the digit run.
struct PasskeyScore {
  bool exact = false;
  bool prefix_match = false;
};
PasskeyScore score_passkey_answer(const std::string& decoded, const std::string& passkey);

/// "in-context" or "out-of-context" for a context length against the task's metadata "in_context"
/// (empty when the task does not state it: its value is 0 or absent).
std::string passkey_regime(const data::TaskData& d, int length);

/// One evaluated item.
struct PasskeyOutcome {
  int length = 0;
  double depth = 0;
  std::string passkey, decoded;
  bool correct = false;       ///< exact: the leading digit run is the passkey (all and only its digits)
  bool prefix_match = false;  ///< the first five decoded digits are the passkey (more may follow)
};

/// Check a read passkey task before it indexes anything (items.json and the metadata are input):
/// non-empty lists "lengths" and "depths" in the metadata, and per validation item a "length" of
/// that list within the row, a "depth" of that list and a non-empty digit-string "passkey".
/// Throws cf::InvalidArgument naming the item and field.
void check_passkey_task(const data::TaskData& d);

/// Greedy decoding of up to max_new tokens after each validation prompt (batched per length);
/// exact match of the leading digit run of the decoded text with the passkey. `forward`: the
/// model's forward pass (empty = the CPU's).
std::vector<PasskeyOutcome> evaluate_passkey(const nn::Model<float>& model, const data::TaskData& d,
                                             const data::Tokenizer& tok, int max_new, int batch, int max_rows,
                                             const Progress& progress = {}, const ProbsForward& forward = {});
/// The same on the forward pass `forward` (required) of a model with config `c`.
std::vector<PasskeyOutcome> evaluate_passkey(const nn::ModelConfig& c, const ProbsForward& forward,
                                             const data::TaskData& d, const data::Tokenizer& tok, int max_new,
                                             int batch, int max_rows, const Progress& progress = {});

/// `probe passkey`: exact match over length x depth per checkpoint (table, heatmap), the depth
/// curve, and the paired comparison of two checkpoints.
output::Report run_passkey(const ProbeOptions& o, const data::TaskData& d);

}  // namespace cf::probe
