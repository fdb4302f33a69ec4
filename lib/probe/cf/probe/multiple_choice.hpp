#pragma once
// Zero-shot multiple-choice scoring (issue 33, docs/mc-eval.md): items read from JSONL files in the
// field layouts of lm-evaluation-harness v0.4's tasks (ARC, HellaSwag, PIQA, CommonsenseQA) or the
// generic {context, choices, gold}, turned into a context string and choice strings by the
// harness's prompt templates, and scored by the summed natural-log likelihood of " " + choice
// given the context (no BOS token), the continuation split off as the harness's _encode_pair does.
// Decisions: acc = argmax of the summed log-likelihood, acc_norm_char = argmax of it divided by
// the choice's length in code points (the harness's acc_norm, completion_len), acc_norm_token =
// divided by the continuation's token count; ties go to the first maximum (numpy.argmax).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/nn/model.hpp"

namespace cf::probe {

/// Field layouts of a JSONL line (docs/mc-eval.md "Layouts"). Auto picks one from the first item's
/// field names.
enum class McLayout { Auto, Generic, Arc, Hellaswag, Piqa, Csqa };

/// The layouts' names (mc-eval --layout, the report).
inline constexpr EnumTable kMcLayouts{std::array{
    EnumEntry<McLayout>{McLayout::Auto, "auto"},
    EnumEntry<McLayout>{McLayout::Generic, "generic"},
    EnumEntry<McLayout>{McLayout::Arc, "arc"},
    EnumEntry<McLayout>{McLayout::Hellaswag, "hellaswag"},
    EnumEntry<McLayout>{McLayout::Piqa, "piqa"},
    EnumEntry<McLayout>{McLayout::Csqa, "csqa"},
}};

/// How the context string is made: Harness = the lm-evaluation-harness v0.4 doc_to_text of the
/// layout; Verbatim = the item's own `context` field as it is (every layout).
enum class McTemplate { Harness, Verbatim };
inline constexpr EnumTable kMcTemplates{std::array{
    EnumEntry<McTemplate>{McTemplate::Harness, "harness"},
    EnumEntry<McTemplate>{McTemplate::Verbatim, "verbatim"},
}};

/// Parse a layout name: auto | generic | arc | hellaswag | piqa | csqa. Throws cf::InvalidArgument.
McLayout parse_layout(const std::string& name);
/// The layout's name (as parse_layout reads it).
std::string layout_name(McLayout l);

/// One scored item: the context string, the choice strings (without the leading space) and the
/// index of the right one. `line` is the 1-based line of the JSONL file it came from.
struct McItem {
  int line = 0;
  std::string context;
  std::vector<std::string> choices;
  int gold = 0;
};

/// Python's str.isspace for one code point (Unicode White_Space plus U+001C..U+001F), which
/// str.strip() / str.rstrip() with no argument remove.
bool python_isspace(char32_t cp);
/// Python's str.strip() (no argument) of a UTF-8 string.
std::string python_strip(std::string_view s);
/// Python's str.capitalize() of a UTF-8 string: the first code point upper-cased, the rest
/// lower-cased, for the letters of ASCII, Latin-1 Supplement and Latin Extended-A (one-to-one
/// pairs), Greek (U+0391..U+03A9 / U+03B1..U+03C9, no final-sigma rule) and basic Cyrillic
/// (U+0400..U+044F / U+0450..U+045F); other code points are kept (Python maps a few more).
std::string python_capitalize(std::string_view s);
/// lm-evaluation-harness v0.4 hellaswag/utils.py preprocess: strip(), " [title]" -> ". ", every
/// non-greedy "[...]" removed (re.sub(r"\[.*?\]", "")), then "  " -> " " (one pass, as Python's
/// str.replace: "   " becomes "  ").
std::string hellaswag_preprocess(std::string_view text);

/// Length of a UTF-8 string in code points (Python's len() of the decoded str).
int code_points(std::string_view s);

/// Item from one parsed JSON line in `layout` (not Auto). Throws cf::InvalidArgument naming the
/// field (missing, wrong type, gold out of range, an empty choice list or an empty choice); the
/// caller prefixes the file and line.
McItem mc_item_from_json(const nlohmann::json& j, McLayout layout, McTemplate tpl);

/// The layout a JSON object's field names imply (docs/mc-eval.md "Layouts"): ctx_a / endings ->
/// HellaSwag, goal / sol1 -> PIQA, context / choices / gold -> generic, question_concept (at the
/// top or inside `question`) -> CommonsenseQA, question / answerKey -> ARC. Throws
/// cf::InvalidArgument when none fits.
McLayout detect_layout(const nlohmann::json& j);

/// Read a JSONL file of items: one JSON object per non-blank line (a UTF-8 BOM and CR line ends
/// allowed). Every line must be valid UTF-8 and valid JSON and carry its layout's fields; the first
/// bad line throws cf::InvalidArgument "--data 'FILE' line N: ...". `layout` Auto is resolved from
/// the first item and written to `resolved` (if not null). `max_items` > 0 stops after that many.
/// At least one item is required.
std::vector<McItem> read_mc_file(const std::string& path, McLayout layout, McTemplate tpl, int max_items = 0,
                                 McLayout* resolved = nullptr);

/// A text encoder: string -> token ids of one model's vocabulary.
using Encoder = std::function<std::vector<std::int32_t>(std::string_view)>;

/// The encoder of the model at `checkpoint` (vocab_size entries): a Hugging Face folder's
/// tokenizer.json, else bytes (vocab_size 256) or GPT-2 BPE (50,257; files from gpt2_dir, "" =
/// the default). Ids are checked against vocab_size. `name` (if not null) receives "byte",
/// "gpt2" or "tokenizer.json". Throws cf::InvalidArgument for another vocabulary size.
Encoder make_encoder(const std::string& checkpoint, int vocab_size, const std::string& gpt2_dir, std::string* name);

/// Token ids of one item: the context's (encoded once, shared by the choices) and, per choice, the
/// continuation's: lm-evaluation-harness _encode_pair with the continuation " " + choice, i.e. the
/// context's trailing whitespace (Python rstrip) moved to the continuation's front, the whole
/// string encoded and the continuation taken as the ids after the context's id count.
struct McEncoded {
  std::vector<std::int32_t> context;
  std::vector<std::vector<std::int32_t>> continuations;
};
/// Throws cf::InvalidArgument when the context is empty after removing its trailing whitespace
/// (no token to condition on: the harness would insert a BOS token, which this tool never does) or
/// a continuation has no token.
McEncoded encode_item(const McItem& item, const Encoder& enc);

/// Scores of one item under one model.
struct McScore {
  std::vector<double> loglik;                   ///< summed natural-log likelihood of each continuation
  std::vector<int> n_tokens;                    ///< continuation token counts
  std::vector<int> n_chars;                     ///< choice lengths in code points (without the leading space)
  int pred = 0, pred_char = 0, pred_token = 0;  ///< argmax of loglik, loglik/n_chars, loglik/n_tokens
  int dropped = 0;                              ///< context tokens dropped on the left (max over the choices)
};

/// Index of the first maximum (numpy.argmax). Requires a non-empty vector.
int argmax_first(const std::vector<double>& v);

/// Called after each forward pass with (rows done, rows total); may be empty.
using McProgress = std::function<void(std::int64_t done, std::int64_t total)>;

/// A model's forward pass as score_items reads it: B sequences of T tokens and their targets (< 0 =
/// not scored) -> log p(target) per position in `logprobs` (B*T entries, 0 where not scored). The
/// CPU's (nn::forward_backward, the default) or a device model's (apps/mc-eval, docs/gpu.md
/// "Analysis model").
using LogprobForward = std::function<void(const std::int32_t* tokens, const std::int32_t* targets, int B, int T,
                                          std::vector<float>& logprobs)>;

/// Builds the forward pass of each loaded checkpoint's model; empty = the CPU's.
using MakeLogprobForward = std::function<LogprobForward(const nn::Model<float>& model)>;

/// Score encoded items: one row per (item, choice), context + continuation minus its last token;
/// identical rows computed once; rows ordered longest first and packed up to `batch` rows per
/// forward pass (fewer where the pass's logits would pass 1 GiB), right-padded (causal masks make
/// the padding invisible to the scored positions). A row longer than the model's block_size keeps its last block_size
/// tokens when `truncate_left` (lm-evaluation-harness: (context + continuation)[-(max_length+1):]
/// [:-1]); a continuation of more than block_size tokens, or any overlong row without
/// truncate_left, throws cf::InvalidArgument naming the item's line (items[i].line); a non-finite
/// log-likelihood (a model whose forward pass overflows) throws cf::Error. `forward`: the model's
/// forward pass (empty = the CPU's).
std::vector<McScore> score_items(const nn::Model<float>& model, const std::vector<McEncoded>& enc,
                                 const std::vector<McItem>& items, int batch, bool truncate_left,
                                 const McProgress& progress = {}, const LogprobForward& forward = {});

}  // namespace cf::probe
