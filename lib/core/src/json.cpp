#include "cf/core/json.hpp"

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
