#pragma once
// Report rendering shared by every tool (docs/conventions.md): one Report holds the JSON body and
// the human tables; it renders as an aligned text table, CSV or JSON with a metadata block.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/core/enum_table.hpp"

namespace cf::output {

enum class Format { Table, Csv, Json };

/// The formats' names (--format of every tool).
inline constexpr EnumTable kFormats{std::array{
    EnumEntry<Format>{Format::Table, "table"},
    EnumEntry<Format>{Format::Csv, "csv"},
    EnumEntry<Format>{Format::Json, "json"},
}};

/// Parse "table" | "csv" | "json"; throws cf::InvalidArgument otherwise.
Format parse_format(const std::string& name);

/// How fmt() / fmt_int() / ratio() write numbers: Human for the text table (%.Ng, thousands
/// separators, "x" after ratios), Raw for machine-readable output (CSV): shortest round-trip
/// decimal, plain digits, no suffixes. cf::app::run selects Raw when the resolved format is CSV.
enum class NumberStyle { Human, Raw };
void set_number_style(NumberStyle s);
NumberStyle number_style();

/// A titled table of pre-formatted cells (all rows have header.size() cells).
struct Table {
  std::string title;
  std::string name;  ///< key in the CSV `table` column ("" = from the title's first words)
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  /// Append a row; throws cf::InvalidArgument if its width differs from the header's.
  void add_row(std::vector<std::string> row);
  /// Right-aligned text table with the title above it.
  std::string render_text() const;
  /// CSV (header line first) that numpy.genfromtxt(delimiter=',') splits right: never quoted, a
  /// comma inside a cell is written ';', a double quote as a single quote, a line break as a space.
  std::string render_csv() const;
};

/// What a tool produces: a JSON body (keys documented per tool) plus tables for humans.
struct Report {
  nlohmann::json meta;  ///< from metadata()
  nlohmann::json body;  ///< tool-specific results
  std::vector<Table> tables;
  std::vector<std::string> notes;  ///< free-text lines printed under the tables

  /// Render in the given format. JSON: an object with "meta" first, then the body's keys; arrays
  /// of numbers on one line each. CSV: ONE table with a header row: the table itself when there is
  /// one, else a leading `table` column (Table::name) and the union of the tables' columns (cells a
  /// table lacks are `nan` in a column of numbers, empty in a text column; an empty cell of a numeric
  /// column of a single table is `nan` too), so csv.reader / numpy.genfromtxt / pandas load every report.
  std::string render(Format f) const;
};

/// Write the report as HDF5 to `path` (through cf::write_path_atomic): every array of numbers in
/// the body (at any depth; an array of equal-length number arrays becomes a 2-D dataset) is a
/// float64 dataset at its JSON path under /body ({"variants": {"residual": [...]}} ->
/// /body/variants/residual);
/// the rest of the report is the JSON text of the scalar datasets /meta and /report (fixed-length
/// strings, arrays replaced by "<dataset /path>"). For long vectors (rollout --n 1048576).
void write_report_h5(const Report& report, const std::string& path);

/// Metadata block every output carries: tool, version, git revision, UTC time, resolved params.
nlohmann::json metadata(const std::string& tool, const nlohmann::json& params);

/// Human style: %.{digits}g. Raw style: shortest decimal that reads back as the same double.
std::string fmt(double v, int digits = 6);
/// Human style: thousands separators, 195744 -> "195,744". Raw style: "195744".
std::string fmt_int(long long v);
/// A ratio: Human "0.5372x", Raw the number alone.
std::string ratio(double v, int digits = 4);
/// A row label with a marker: Human "label *" when `marked`, Raw the label alone.
std::string marked(const std::string& label, bool mark);
/// Shortest decimal that reads back as the same double (17 significant digits at most).
std::string fmt_exact(double v);

/// JSON text with `meta` (if present) as the first key, two-space indentation, and every array
/// whose elements are all numbers (or null) on one line.
std::string dump_json(const nlohmann::json& j);

}  // namespace cf::output
