#include "cf/core/json.hpp"

#include <cstdint>

#include "cf/core/error.hpp"

namespace cf {

void check_json_nesting(std::string_view text, int max_depth, const std::string& label) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_str) {
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        throw InvalidArgument(str("'", label, "': JSON nested deeper than ", max_depth, " levels (at byte ", i, ")"));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

nlohmann::json parse_json(std::string_view text, const std::string& label, int max_depth) {
  check_json_nesting(text, max_depth, label);
  return nlohmann::json::parse(text.begin(), text.end());
}

}  // namespace cf

namespace cf {

namespace {
std::string escape_pointer(const std::string& key) {
  std::string r;
  for (char c : key) r += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return r;
}
std::string short_dump(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}
}  // namespace

JsonRef::JsonRef(const nlohmann::json& value, std::string what, std::string pointer)
    : v_(&value), what_(std::move(what)), ptr_(std::move(pointer)) {}

void JsonRef::fail(const std::string& message) const {
  throw InvalidArgument(str(what_, ": ", ptr_.empty() ? std::string("the top level") : ptr_, " ", message));
}

bool JsonRef::has(const std::string& key) const {
  return v_->is_object() && v_->contains(key) && !(*v_)[key].is_null();
}

JsonRef JsonRef::at(const std::string& key) const {
  as_object();
  const std::string p = ptr_ + "/" + escape_pointer(key);
  if (!v_->contains(key)) JsonRef(*v_, what_, p).fail("is missing");
  return JsonRef((*v_)[key], what_, p);
}

JsonRef JsonRef::at(std::size_t i) const {
  as_array();
  const std::string p = ptr_ + "/" + std::to_string(i);
  if (i >= v_->size()) JsonRef(*v_, what_, p).fail("is missing");
  return JsonRef((*v_)[i], what_, p);
}

std::string JsonRef::as_string() const {
  if (!v_->is_string()) fail("must be a string (got " + short_dump(*v_) + ")");
  return v_->get<std::string>();
}

bool JsonRef::as_bool() const {
  if (!v_->is_boolean()) fail("must be true or false (got " + short_dump(*v_) + ")");
  return v_->get<bool>();
}

std::int64_t JsonRef::as_integer(std::int64_t lo, std::int64_t hi) const {
  // integers only: nlohmann would truncate 1.9 to 1 and wrap 4294967297 read as a 32-bit int
  bool ok = false;
  std::int64_t x = 0;
  if (v_->is_number_unsigned()) {
    const std::uint64_t u = v_->get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(INT64_MAX);
    x = ok ? static_cast<std::int64_t>(u) : 0;
  } else if (v_->is_number_integer()) {
    ok = true;
    x = v_->get<std::int64_t>();
  }
  if (!ok || x < lo || x > hi) fail(str("must be an integer in [", lo, ", ", hi, "] (got ", short_dump(*v_), ")"));
  return x;
}

const JsonRef& JsonRef::as_object() const {
  if (!v_->is_object()) fail("must be an object (got " + short_dump(*v_) + ")");
  return *this;
}

const JsonRef& JsonRef::as_array() const {
  if (!v_->is_array()) fail("must be an array (got " + short_dump(*v_) + ")");
  return *this;
}

std::string JsonRef::string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? at(key).as_string() : fallback;
}

bool JsonRef::bool_or(const std::string& key, bool fallback) const { return has(key) ? at(key).as_bool() : fallback; }

std::int64_t JsonRef::integer_or(const std::string& key, std::int64_t fallback, std::int64_t lo,
                                 std::int64_t hi) const {
  return has(key) ? at(key).as_integer(lo, hi) : fallback;
}

nlohmann::json parse_json_file_text(std::string_view text, const std::string& path) {
  try {
    return parse_json(text, path);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(
        str("'", path, "' is not valid JSON (",
            text.find_first_not_of(" \t\r\n") == std::string_view::npos ? "the file is empty" : e.what(), ")"));
  }
}

}  // namespace cf
