#pragma once
// JSON from users' files (configs, metadata, checkpoint attributes, tokenizer files) is parsed
// through parse_json: nesting deeper than kMaxJsonDepth is refused before nlohmann sees the text.
// nlohmann's parser keeps its own stack, but dump() (every message that quotes a bad value uses it)
// recurses, so a file of 100,000 '[' crashed `rollout --model-config` with a stack overflow
// (found by a hostile-input sweep, 2026-11-27). No file the tools read needs more than a few levels.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cf {

constexpr int kMaxJsonDepth = 256;

/// Throws cf::InvalidArgument ("'<label>': JSON nested deeper than N levels (at byte B)") if an
/// object or array of `text` opens more than max_depth levels deep (strings are skipped).
void check_json_nesting(std::string_view text, int max_depth, const std::string& label);

/// check_json_nesting, then nlohmann::json::parse (whose exceptions pass through unchanged).
nlohmann::json parse_json(std::string_view text, const std::string& label = "JSON text", int max_depth = kMaxJsonDepth);

}  // namespace cf
