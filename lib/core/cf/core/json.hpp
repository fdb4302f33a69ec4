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

namespace cf {

/// A value of a user's JSON file together with where it sits (the file and a JSON pointer,
/// RFC 6901: "/model/vocab/abc", "" = the root), for typed reads whose errors name both:
/// "tokenizer 'dir/tokenizer.json': /model/type must be a string (got 3)". nlohmann's own
/// accessors (value(), get<T>()) throw type_error messages that name neither the file nor the
/// field (found by a hostile-input sweep, issue 29). Every getter throws cf::InvalidArgument
/// (exit 2); integers are JSON integers only (1.9 and 4294967297 outside the range are refused,
/// never truncated or wrapped). The referenced json must outlive the JsonRef.
class JsonRef {
 public:
  /// `what` is the message prefix naming the file, e.g. "tokenizer 'dir/tokenizer.json'".
  JsonRef(const nlohmann::json& value, std::string what, std::string pointer = "");
  const nlohmann::json& json() const { return *v_; }
  const std::string& pointer() const { return ptr_; }
  /// Whether this is an object holding `key` with a non-null value.
  bool has(const std::string& key) const;
  /// Member `key` (this must be an object holding it) / element `i` (this must be an array).
  JsonRef at(const std::string& key) const;
  JsonRef at(std::size_t i) const;
  /// This value as a string / boolean / integer in [lo, hi] / object / array, else throws naming
  /// the pointer, the expected type and the value found (at most 60 characters of it).
  std::string as_string() const;
  bool as_bool() const;
  std::int64_t as_integer(std::int64_t lo, std::int64_t hi) const;
  const JsonRef& as_object() const;
  const JsonRef& as_array() const;
  /// Member `key` typed, or `fallback` when it is absent or null.
  std::string string_or(const std::string& key, const std::string& fallback) const;
  bool bool_or(const std::string& key, bool fallback) const;
  std::int64_t integer_or(const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) const;
  /// Throws cf::InvalidArgument "<what>: <pointer> <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const nlohmann::json* v_;
  std::string what_, ptr_;
};

/// parse_json for a user's file: any JSON syntax error (an empty file included) becomes
/// cf::InvalidArgument "'<path>' is not valid JSON (...)" naming the file (exit 2), instead of
/// nlohmann's exception.
nlohmann::json parse_json_file_text(std::string_view text, const std::string& path);

}  // namespace cf
