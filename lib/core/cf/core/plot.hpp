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

/// One curve: x and y of equal length; label shown in the legend.
struct Series {
  std::string label;
  std::vector<double> x, y;
};

/// Line plot with labelled axes and a legend. Series of at most kMarkerPoints points are drawn
/// with markers (a 4-layer sweep is 4 points, not a line shape); when every x is an integer the
/// x ticks are integers (layers, positions).
struct LinePlot {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  bool log_y = false;
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
/// legend even without labels.
struct Heatmap {
  std::string title, xlabel, ylabel, value_label;
  Eigen::MatrixXd values;
  double x0 = 0, y0 = 0;
  bool y_up = false;
  std::vector<std::string> categories;
};

/// The gnuplot script of a plot for `ext` ("svg" or "png"), reading its data from `data_path`
/// and writing `out_path`. The scripts of the two formats differ only in their first line.
std::string gnuplot_script(const LinePlot& p, const std::string& ext, const std::string& data_path,
                           const std::string& out_path);
std::string gnuplot_script(const Heatmap& h, const std::string& ext, const std::string& data_path,
                           const std::string& out_path);

/// The labels of the series that leave the fixed y range (empty without one).
std::vector<std::string> clipped_series(const LinePlot& p);

/// Save to `path` (.svg or .png, written through cf::write_path_atomic) with gnuplot.
/// Throws cf::InvalidArgument for another extension, cf::Error if gnuplot is missing or fails.
void save(const LinePlot& p, const std::string& path);
void save(const Heatmap& h, const std::string& path);

/// Throws cf::InvalidArgument unless `path` ends in .svg or .png and gnuplot is installed (check
/// before long work).
void check_plot_path(const std::string& path);

/// Whether gnuplot is on the PATH (plots are optional extras on a machine without it).
bool gnuplot_available();

}  // namespace cf::plot
