#pragma once
// Plots for `--plot FILE.svg|.png`: ONE back end, gnuplot (Debian gnuplot-nox, scripts/deps/apt.txt).
// A plot becomes one gnuplot script; only its first line, the terminal, differs between the two
// formats (svg or pngcairo, same size and font), so the SVG and the PNG of a plot show the same
// picture (docs/conventions.md "Plots").
#include <Eigen/Dense>
#include <limits>
#include <string>
#include <vector>

namespace cf::plot {

/// One curve: x and y of equal length; label shown in the legend. With `y_lo` / `y_hi` (same
/// length as x; NaN = no bar at that point) the curve carries vertical error bars (confidence
/// intervals); `dashed` draws it dashed without markers (bounds, references), so a measured curve
/// lying on a bound stays visible.
struct Series {
  std::string label;
  std::vector<double> x, y;
  std::vector<double> y_lo = {}, y_hi = {};
  bool dashed = false;
  int colour = -1;    ///< palette index (a bound in its model's colour); -1 = the series' position
  int dash_type = 0;  ///< gnuplot dash type (2 dashed, 3 dotted, 4 dash-dot) for a line with markers; 0 solid
};

/// Line plot with labelled axes and a legend. Series of at most kMarkerPoints points are drawn
/// with markers (a 4-layer sweep is 4 points, not a line shape); when every x is an integer the
/// x ticks are integers (layers, positions). The x axis spans exactly the data's x range (n = 256
/// ends at 256, not at the next tick; with markers 3 % more on each side, so end markers and error
/// bars are not drawn on the frame); the legend sits inside the frame (at most 4 curves) or below
/// it, never beside it (a legend at the side takes a quarter of the width). With log_y the y label
/// gets " (log scale)" unless it already says so.
struct LinePlot {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  bool log_y = false;
  /// Legend place: "auto" (inside top right for at most 4 curves, else below), "below", or any
  /// gnuplot `set key inside ...` position such as "bottom right", "top left".
  std::string key = "auto";
  /// Fixed y range (data units, before the log); NaN = from the data. Curves outside it are
  /// clipped at the frame, so one extreme curve cannot flatten the others; the title then names
  /// the clipped curves ("clipped: ...") -- only those that really leave the range.
  double y_min = std::numeric_limits<double>::quiet_NaN(), y_max = std::numeric_limits<double>::quiet_NaN();
};
inline constexpr std::size_t kMarkerPoints = 40;

/// Heat map: values(row, col) drawn with row index on the y axis (row 0 at the top unless
/// y_up), column index on the x axis; x = x0 + col, y = y0 + row. A constant map draws in one
/// colour (never blank). With `categories` (k labels) the values are codes 0..k-1 drawn in k
/// discrete colours with a labelled legend; a map whose values are all 0 or 1 gets a two-colour
/// legend even without labels (unless a fixed colour range cb_min..cb_max is given).
struct Heatmap {
  std::string title, xlabel, ylabel, value_label;
  Eigen::MatrixXd values;
  double x0 = 0, y0 = 0;
  bool y_up = false;
  std::vector<std::string> categories;
  /// Tick labels in the reader's units, one per column / row (e.g. depth "0.25", context length
  /// "512"); empty = numeric ticks at x0 + col / y0 + row.
  std::vector<std::string> x_labels = {}, y_labels = {};
  /// Fixed colour range (NaN = from the data): maps of several models drawn against ONE scale
  /// (accuracy 0..1), so the same colour means the same value in every figure.
  double cb_min = std::numeric_limits<double>::quiet_NaN(), cb_max = std::numeric_limits<double>::quiet_NaN();
  /// Non-empty: NaN cells are a mask (e.g. "grey: s > d, not causal"), drawn in grey -- distinct from
  /// every colour of the scale, whose smallest values are a light yellow, not the white page -- and
  /// the text is printed under the map when a cell is NaN. Empty: NaN cells are left blank.
  std::string masked_label = {};
};

/// Several line plots stacked in one figure (one panel each, own y axis), under one title: for
/// quantities whose scales differ by orders of magnitude.
struct Panels {
  std::string title;
  std::vector<LinePlot> panels;
};

/// The gnuplot script of a plot for `ext` ("svg" or "png"), reading its data from `data_path`
/// and writing `out_path`. The scripts of the two formats differ only in their first line.
std::string gnuplot_script(const LinePlot& p, const std::string& ext, const std::string& data_path,
                           const std::string& out_path);
std::string gnuplot_script(const Heatmap& h, const std::string& ext, const std::string& data_path,
                           const std::string& out_path);
std::string gnuplot_script(const Panels& p, const std::string& ext, const std::string& data_path,
                           const std::string& out_path);

/// The labels of the series that leave the fixed y range (empty without one).
std::vector<std::string> clipped_series(const LinePlot& p);

/// Save to `path` (.svg or .png, written through cf::write_path_atomic) with gnuplot.
/// Throws cf::InvalidArgument for another extension, cf::Error if gnuplot is missing or fails.
void save(const LinePlot& p, const std::string& path);
void save(const Heatmap& h, const std::string& path);
void save(const Panels& p, const std::string& path);

/// Throws cf::InvalidArgument unless `path` ends in .svg or .png and gnuplot is installed (check
/// before long work).
void check_plot_path(const std::string& path);

/// Whether gnuplot is on the PATH (plots are optional extras on a machine without it).
bool gnuplot_available();

}  // namespace cf::plot
