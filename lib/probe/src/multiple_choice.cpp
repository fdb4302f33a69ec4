// Multiple-choice items from JSONL files (cf/probe/multiple_choice.hpp): strict UTF-8 and JSON per
// line, the layouts' fields read by name, and the lm-evaluation-harness v0.4 prompt templates.
#include "cf/probe/multiple_choice.hpp"

#include <algorithm>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/data/unicode.hpp"

namespace cf::probe {

McLayout parse_layout(const std::string& name) {
  if (const auto l = kMcLayouts.find(name)) return *l;
  throw InvalidArgument(str("--layout '", name, "' is not one of ", kMcLayouts.list()));
}

std::string layout_name(McLayout l) { return std::string(kMcLayouts.name(l)); }
// ---------------------------------------------------------------- Python string semantics
bool python_isspace(char32_t c) {
  // str.isspace: bidirectional class WS, B or S, or category Zs (CPython's _PyUnicode_IsWhitespace)
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Decode a string already checked to be valid UTF-8.
std::vector<char32_t> decode(std::string_view s) { return data::utf8_decode(s); }

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;  // micro sign -> Greek capital mu, as Python
  if (c == 0x131) return 'I';   // dotless i
  if (c == 0x17F) return 'S';   // long s
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 1) ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x3C2) return 0x3A3;  // final sigma
  if (c >= 0x3B1 && c <= 0x3C9) return c - 0x20;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). Returns the
// byte offset of the first bad sequence, or npos.
std::size_t utf8_error(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + static_cast<std::size_t>(len) > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (int k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += static_cast<std::size_t>(len);
  }
  return std::string_view::npos;
}

}  // namespace

std::string python_strip(std::string_view s) {
  const auto cp = decode(s);
  std::size_t a = 0, b = cp.size();
  while (a < b && python_isspace(cp[a])) ++a;
  while (b > a && python_isspace(cp[b - 1])) --b;
  return data::utf8_encode(
      std::vector<char32_t>(cp.begin() + static_cast<std::ptrdiff_t>(a), cp.begin() + static_cast<std::ptrdiff_t>(b)));
}

std::string python_capitalize(std::string_view s) {
  auto cp = decode(s);
  for (std::size_t i = 0; i < cp.size(); ++i) cp[i] = i == 0 ? to_upper(cp[i]) : to_lower(cp[i]);
  return data::utf8_encode(cp);
}

namespace {
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  // Python str.replace: non-overlapping, left to right, the scan resumes after each replacement
  std::string out;
  std::size_t i = 0;
  for (std::size_t k; (k = s.find(from, i)) != std::string::npos; i = k + from.size()) out += s.substr(i, k - i) + to;
  return out + s.substr(i);
}
}  // namespace

std::string hellaswag_preprocess(std::string_view text) {
  std::string t = replace_all(python_strip(text), " [title]", ". ");
  // re.sub(r"\[.*?\]", "", t): at each '[' the nearest ']' with no newline between ('.' does not
  // match '\n'); a '[' without one stays
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    if (t[i] == '[') {
      const std::size_t close = t.find_first_of("]\n", i + 1);
      if (close != std::string::npos && t[close] == ']') {
        i = close + 1;
        continue;
      }
    }
    out += t[i++];
  }
  return replace_all(out, "  ", " ");
}

int code_points(std::string_view s) {
  int n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// ---------------------------------------------------------------- fields
namespace {

const char* type_name(const nlohmann::json& j) { return j.type_name(); }

const nlohmann::json& field(const nlohmann::json& j, const std::string& name, const std::string& where = "") {
  const std::string full = where.empty() ? name : where + "." + name;
  require(j.is_object(), "field '", where, "' must be an object (got ", type_name(j), ")");
  const auto it = j.find(name);
  require(it != j.end(), "field '", full, "' is missing");
  return *it;
}

std::string text(const nlohmann::json& j, const std::string& name, const std::string& where = "") {
  const auto& v = field(j, name, where);
  require(v.is_string(), "field '", where.empty() ? name : where + "." + name, "' must be a string (got ", type_name(v),
          ")");
  return v.get<std::string>();
}

std::vector<std::string> texts(const nlohmann::json& v, const std::string& full) {
  require(v.is_array(), "field '", full, "' must be an array of strings (got ", type_name(v), ")");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    require(v[i].is_string(), "field '", full, "[", i, "]' must be a string (got ", type_name(v[i]), ")");
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

// An index written as a JSON integer or a decimal string ("2": HellaSwag's label).
long long index_value(const nlohmann::json& v, const std::string& full) {
  if (v.is_number_unsigned())
    require(v.get<std::uint64_t>() <= 1000000000u, "gold out of range: field '", full, "' = ", v.get<std::uint64_t>(),
            " is beyond any choice index");
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    require(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos, "field '", full,
            "' must be a whole number (got \"", s.substr(0, 40), "\")");
    require(s.size() <= 9, "gold out of range: field '", full, "' = \"", s.substr(0, 40),
            "\" is beyond any choice index");
    return std::stoll(s);
  }
  throw InvalidArgument(str("field '", full, "' must be a whole number (got ", type_name(v), ")"));
}

int label_index(const std::vector<std::string>& labels, const std::string& key, const std::string& full) {
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == key) return static_cast<int>(i);
  std::string all;
  for (const auto& l : labels) all += (all.empty() ? "" : ", ") + l;
  throw InvalidArgument(str("gold out of range: field '", full, "' = \"", key.substr(0, 40),
                            "\" is not one of the choice labels [", all.substr(0, 200), "]"));
}

// The choices {text: [...], label: [...]} of HF ARC / CommonsenseQA, or the list [{text, label}] of
// the original ARC / CommonsenseQA releases (inside `question`).
void labelled_choices(const nlohmann::json& v, const std::string& full, std::vector<std::string>& text_out,
                      std::vector<std::string>& label_out) {
  if (v.is_object()) {
    text_out = texts(field(v, "text", full), full + ".text");
    label_out = texts(field(v, "label", full), full + ".label");
    require(text_out.size() == label_out.size(), "field '", full, "': ", text_out.size(), " texts but ",
            label_out.size(), " labels");
    return;
  }
  require(v.is_array(), "field '", full, "' must be an object {text, label} or an array of {text, label} (got ",
          type_name(v), ")");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = full + "[" + std::to_string(i) + "]";
    text_out.push_back(text(v[i], "text", at));
    label_out.push_back(text(v[i], "label", at));
  }
}

// question string + labelled choices, from either the HF layout (question: str, choices at the top)
// or the original one (question: {stem, choices}).
void question_and_choices(const nlohmann::json& j, std::string& q, std::vector<std::string>& txt,
                          std::vector<std::string>& lab, std::string& where) {
  const auto& qv = field(j, "question");
  if (qv.is_object()) {
    q = text(qv, "stem", "question");
    labelled_choices(field(qv, "choices", "question"), "question.choices", txt, lab);
    where = "question.choices";
  } else {
    require(qv.is_string(), "field 'question' must be a string or an object {stem, choices} (got ", type_name(qv), ")");
    q = qv.get<std::string>();
    labelled_choices(field(j, "choices"), "choices", txt, lab);
    where = "choices";
  }
}

}  // namespace

McLayout detect_layout(const nlohmann::json& j) {
  require(j.is_object(), "an item must be a JSON object (got ", type_name(j), ")");
  if (j.contains("ctx_a") || j.contains("endings")) return McLayout::Hellaswag;
  if (j.contains("goal") || j.contains("sol1")) return McLayout::Piqa;
  if (j.contains("gold") && j.contains("choices") && !j.contains("answerKey")) return McLayout::Generic;
  const auto q = j.find("question");
  if (j.contains("question_concept") || (q != j.end() && q->is_object() && q->contains("question_concept")))
    return McLayout::Csqa;
  if (q != j.end() && j.contains("answerKey")) return McLayout::Arc;
  throw InvalidArgument(
      "cannot tell the layout from the fields (expected ctx_a/endings (hellaswag), goal/sol1 (piqa), "
      "context/choices/gold (generic), question/answerKey (arc) or question_concept (csqa)): give --layout");
}

McItem mc_item_from_json(const nlohmann::json& j, McLayout layout, McTemplate tpl) {
  require(j.is_object(), "an item must be a JSON object (got ", type_name(j), ")");
  McItem it;
  std::string choices_field = "choices";
  long long gold = 0;
  switch (layout) {
    case McLayout::Auto:
      throw InvalidArgument("mc_item_from_json: resolve the layout first");
    case McLayout::Generic: {
      it.context = text(j, "context");
      it.choices = texts(field(j, "choices"), "choices");
      gold = index_value(field(j, "gold"), "gold");
      break;
    }
    case McLayout::Arc: {
      std::string q;
      std::vector<std::string> labels;
      question_and_choices(j, q, it.choices, labels, choices_field);
      it.context = "Question: " + q + "\nAnswer:";
      gold = label_index(labels, text(j, "answerKey"), "answerKey");
      break;
    }
    case McLayout::Csqa: {
      // harness commonsense_qa: the choices are the letters, the texts are listed in the prompt
      std::string q;
      std::vector<std::string> txt, labels;
      question_and_choices(j, q, txt, labels, choices_field);
      it.context = "Question: " + python_strip(q);
      for (std::size_t i = 0; i < txt.size(); ++i) it.context += "\n" + labels[i] + ". " + txt[i];
      it.context += "\nAnswer:";
      it.choices = labels;
      gold = label_index(labels, text(j, "answerKey"), "answerKey");
      break;
    }
    case McLayout::Piqa: {
      it.context = "Question: " + text(j, "goal") + "\nAnswer:";
      it.choices = {text(j, "sol1"), text(j, "sol2")};
      choices_field = "sol1/sol2";
      gold = index_value(field(j, "label"), "label");
      break;
    }
    case McLayout::Hellaswag: {
      const std::string ctx = text(j, "ctx_a") + " " + python_capitalize(text(j, "ctx_b"));
      it.context = hellaswag_preprocess(text(j, "activity_label") + ": " + ctx);
      for (const auto& e : texts(field(j, "endings"), "endings")) it.choices.push_back(hellaswag_preprocess(e));
      choices_field = "endings";
      gold = index_value(field(j, "label"), "label");
      break;
    }
  }
  if (tpl == McTemplate::Verbatim) it.context = text(j, "context");
  require(!it.choices.empty(), "empty choices: field '", choices_field, "' has no choice");
  require(it.choices.size() >= 2, "field '", choices_field, "' has 1 choice: a multiple-choice item needs at least 2");
  for (std::size_t i = 0; i < it.choices.size(); ++i)
    require(!it.choices[i].empty(), "empty choice: choice ", i, " of field '", choices_field,
            "' is an empty string (no token to score, no length to normalise by)");
  require(gold >= 0 && gold < static_cast<long long>(it.choices.size()), "gold out of range: ", gold, " is not in [0, ",
          it.choices.size() - 1, "] (", it.choices.size(), " choices)");
  it.gold = static_cast<int>(gold);
  require(!python_strip(it.context).empty(),
          "the context is empty (or only white space): nothing to condition "
          "the choices on (this tool adds no BOS token)");
  return it;
}

std::vector<McItem> read_mc_file(const std::string& path, McLayout layout, McTemplate tpl, int max_items,
                                 McLayout* resolved) {
  std::string all;
  try {
    all = read_file(path);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("--data: ", e.what()));
  }
  std::vector<McItem> items;
  std::size_t pos = 0;
  if (all.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;  // a UTF-8 byte-order mark
  for (int line = 1; pos < all.size() && (max_items <= 0 || static_cast<int>(items.size()) < max_items); ++line) {
    std::size_t end = all.find('\n', pos);
    if (end == std::string::npos) end = all.size();
    std::string_view s(all.data() + pos, end - pos);
    pos = end + 1;
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    const auto where = [&] { return str("--data '", path, "' line ", line, ": "); };
    if (const std::size_t bad = utf8_error(s); bad != std::string_view::npos)
      throw InvalidArgument(str(where(), "not valid UTF-8 (byte ", bad + 1, " of the line, value 0x", std::hex,
                                static_cast<unsigned>(static_cast<unsigned char>(s[bad])), ")"));
    if (s.find_first_not_of(" \t") == std::string_view::npos) continue;
    nlohmann::json j;
    try {
      j = parse_json(s, "the item");
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(str(where(), "not valid JSON (", e.what(), ")"));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(str(where(), e.what()));
    }
    try {
      if (layout == McLayout::Auto) layout = detect_layout(j);
      McItem it = mc_item_from_json(j, layout, tpl);
      it.line = line;
      items.push_back(std::move(it));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(
          str(where(), e.what(), layout == McLayout::Auto ? std::string() : " (layout " + layout_name(layout) + ")"));
    }
  }
  require(!items.empty(), "--data '", path, "' holds no item (an empty file, or only blank lines)");
  if (resolved) *resolved = layout;
  return items;
}

}  // namespace cf::probe
