#include "cf/core/output.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/version.hpp"

namespace cf::output {

Format parse_format(const std::string& name) {
  if (name == "table") return Format::Table;
  if (name == "csv") return Format::Csv;
  if (name == "json") return Format::Json;
  throw InvalidArgument(str("unknown --format '", name, "': expected table, csv or json"));
}

void Table::add_row(std::vector<std::string> row) {
  require(row.size() == header.size(), "table '", title, "': row has ", row.size(),
          " cells but the header has ", header.size());
  rows.push_back(std::move(row));
}

std::string Table::render_text() const {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::ostringstream os;
  if (!title.empty()) os << title << "\n";
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size(); ++c) {
      os << (c ? "  " : "  ");
      os << std::string(width[c] - r[c].size(), ' ') << r[c];
    }
    os << "\n";
  };
  line(header);
  size_t total = 0;
  for (auto w : width) total += w + 2;
  os << "  " << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
  for (const auto& r : rows) line(r);
  return os.str();
}

static std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + "\"";
}

std::string Table::render_csv() const {
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size(); ++c) os << (c ? "," : "") << csv_cell(r[c]);
    os << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return os.str();
}

std::string Report::render(Format f) const {
  std::ostringstream os;
  switch (f) {
    case Format::Json: {
      nlohmann::json j = body.is_null() ? nlohmann::json::object() : body;
      j["meta"] = meta;
      os << j.dump(2) << "\n";
      break;
    }
    case Format::Csv:
      for (size_t i = 0; i < tables.size(); ++i) {
        if (i) os << "\n";
        if (!tables[i].title.empty()) os << "# " << tables[i].title << "\n";
        os << tables[i].render_csv();
      }
      break;
    case Format::Table:
      for (size_t i = 0; i < tables.size(); ++i) {
        if (i) os << "\n";
        os << tables[i].render_text();
      }
      if (!notes.empty()) os << "\n";
      for (const auto& n : notes) os << n << "\n";
      break;
  }
  return os.str();
}

nlohmann::json metadata(const std::string& tool, const nlohmann::json& params) {
  char buf[32];
  std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"tool", tool},
          {"causalflow_version", kVersion},
          {"git_revision", kGitRevision},
          {"created_utc", buf},
          {"params", params}};
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string fmt_int(long long v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  std::string out;
  int k = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (k && k % 3 == 0) out += ',';
    out += *it;
    ++k;
  }
  if (v < 0) out += '-';
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace cf::output
