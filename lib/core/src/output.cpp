#include "cf/core/output.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/version.hpp"

namespace cf::output {

namespace {
std::atomic<int> g_style{0};
}

void set_number_style(NumberStyle s) { g_style.store(static_cast<int>(s)); }
NumberStyle number_style() { return static_cast<NumberStyle>(g_style.load()); }

Format parse_format(const std::string& name) {
  if (const auto f = kFormats.find(name)) return *f;
  throw InvalidArgument(str("unknown --format '", name, "': expected table, csv or json"));
}

void Table::add_row(std::vector<std::string> row) {
  require(row.size() == header.size(), "table '", title, "': row has ", row.size(), " cells but the header has ",
          header.size());
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

// A CSV cell never needs quotes: numpy.genfromtxt(delimiter=',') splits at every comma and knows no
// quoting, so a comma inside a text cell is written ';', a double quote as a single one, a line
// break as a space (docs/conventions.md "CSV"). Numbers contain none of them.
static std::string csv_cell(const std::string& s) {
  std::string o = s;
  for (char& ch : o) {
    if (ch == ',') ch = ';';
    if (ch == '"') ch = '\'';
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return o;
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

namespace {

std::string slug(const std::string& title, std::size_t index) {
  std::string out;
  int words = 0;
  bool sep = false;
  for (char ch : title) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      if (sep && !out.empty()) {
        if (++words >= 4) break;
        out += '_';
      }
      sep = false;
      out += static_cast<char>(std::tolower(c));
    } else if (ch == ':' || ch == '(' || ch == ',' || ch == ';') {
      if (!out.empty()) break;
    } else {
      sep = true;
    }
  }
  return out.empty() ? "table" + std::to_string(index + 1) : out;
}

bool numeric_array(const nlohmann::json& j) {
  if (!j.is_array() || j.empty()) return false;
  for (const auto& x : j)
    if (!x.is_number() && !x.is_null() && !x.is_boolean()) return false;
  return true;
}

void dump_into(std::ostringstream& os, const nlohmann::json& j, int indent) {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  if (j.is_object()) {
    if (j.empty()) {
      os << "{}";
      return;
    }
    os << "{\n";
    bool first = true;
    auto item = [&](const std::string& k, const nlohmann::json& v) {
      if (!first) os << ",\n";
      first = false;
      os << pad << nlohmann::json(k).dump() << ": ";
      dump_into(os, v, indent + 2);
    };
    if (indent == 0 && j.contains("meta")) item("meta", j.at("meta"));
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!(indent == 0 && it.key() == "meta")) item(it.key(), it.value());
    os << "\n" << std::string(static_cast<std::size_t>(indent), ' ') << "}";
  } else if (j.is_array()) {
    if (j.empty()) {
      os << "[]";
    } else if (numeric_array(j)) {
      os << j.dump();  // one line
    } else {
      os << "[\n";
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (i) os << ",\n";
        os << pad;
        dump_into(os, j[i], indent + 2);
      }
      os << "\n" << std::string(static_cast<std::size_t>(indent), ' ') << "]";
    }
  } else {
    os << j.dump();
  }
}

}  // namespace

std::string dump_json(const nlohmann::json& j) {
  std::ostringstream os;
  dump_into(os, j, 0);
  return os.str();
}

namespace {

bool is_number_cell(const std::string& c) {
  if (c.empty()) return false;
  char* end = nullptr;
  std::strtod(c.c_str(), &end);
  return end == c.c_str() + c.size();
}

// An empty cell of a numeric column reads as -1 in numpy.genfromtxt(dtype=None) when the column's
// numbers are integers (its filling value): a silent wrong number. In a column of numbers the
// missing cells are written `nan` (a float column for every reader); text columns keep them empty.
Table with_nan_cells(Table t) {
  for (std::size_t c = 0; c < t.header.size(); ++c) {
    bool numeric = false, text = false;
    for (const auto& r : t.rows) {
      if (r[c].empty()) continue;
      (is_number_cell(r[c]) ? numeric : text) = true;
    }
    if (!numeric || text) continue;
    for (auto& r : t.rows)
      if (r[c].empty()) r[c] = "nan";
  }
  return t;
}

}  // namespace

std::string Report::render(Format f) const {
  std::ostringstream os;
  switch (f) {
    case Format::Json: {
      nlohmann::json j = body.is_null() ? nlohmann::json::object() : body;
      j["meta"] = meta;
      os << dump_json(j) << "\n";
      break;
    }
    case Format::Csv: {
      if (tables.size() == 1) {
        os << with_nan_cells(tables[0]).render_csv();
        break;
      }
      // One table: a `table` column, then the union of the columns in order of appearance.
      std::vector<std::string> cols;
      std::map<std::string, std::size_t> where;
      for (const auto& t : tables)
        for (const auto& h : t.header)
          if (!where.count(h) && h != "table") where[h] = cols.size(), cols.push_back(h);
      Table u;
      u.header = {"table"};
      u.header.insert(u.header.end(), cols.begin(), cols.end());
      for (std::size_t i = 0; i < tables.size(); ++i) {
        const Table& t = tables[i];
        const std::string key = t.name.empty() ? slug(t.title, i) : t.name;
        for (const auto& r : t.rows) {
          std::vector<std::string> row(u.header.size());
          row[0] = key;
          for (std::size_t c = 0; c < t.header.size(); ++c)
            if (t.header[c] != "table") row[1 + where[t.header[c]]] = r[c];
          u.add_row(std::move(row));
        }
      }
      os << with_nan_cells(u).render_csv();
      break;
    }
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

std::string fmt_exact(double v) {
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v || !(v == v)) break;
  }
  return buf;
}

std::string fmt(double v, int digits) {
  if (number_style() == NumberStyle::Raw) return fmt_exact(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string fmt_int(long long v) {
  if (number_style() == NumberStyle::Raw) return std::to_string(v);
  const unsigned long long mag = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  std::string s = std::to_string(mag);
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

std::string ratio(double v, int digits) {
  return number_style() == NumberStyle::Raw ? fmt_exact(v) : fmt(v, digits) + "x";
}

std::string marked(const std::string& label, bool mark) {
  return mark && number_style() == NumberStyle::Human ? label + " *" : label;
}

}  // namespace cf::output
