#pragma once
// Report rendering shared by every tool (docs/conventions.md): one Report holds the JSON body and
// the human tables; it renders as an aligned text table, CSV or JSON with a metadata block.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cf::output {

enum class Format { Table, Csv, Json };

/// Parse "table" | "csv" | "json"; throws cf::InvalidArgument otherwise.
Format parse_format(const std::string& name);

/// A titled table of pre-formatted cells (all rows have header.size() cells).
struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  /// Append a row; throws cf::InvalidArgument if its width differs from the header's.
  void add_row(std::vector<std::string> row);
  /// Right-aligned text table with the title above it.
  std::string render_text() const;
  /// RFC 4180 CSV (header line first); cells with commas or quotes are quoted.
  std::string render_csv() const;
};

/// What a tool produces: a JSON body (keys documented per tool) plus tables for humans.
struct Report {
  nlohmann::json meta;   ///< from metadata()
  nlohmann::json body;   ///< tool-specific results
  std::vector<Table> tables;
  std::vector<std::string> notes;  ///< free-text lines printed under the tables

  /// Render in the given format. JSON = body with "meta" added; CSV = each table, separated by a
  /// blank line and preceded by "# title".
  std::string render(Format f) const;
};

/// Metadata block every output carries: tool, version, git revision, UTC time, resolved params.
nlohmann::json metadata(const std::string& tool, const nlohmann::json& params);

/// Fixed or scientific formatting with `digits` significant digits (%.{digits}g).
std::string fmt(double v, int digits = 6);
/// Integer with thousands separators: 195744 -> "195,744".
std::string fmt_int(long long v);

}  // namespace cf::output
