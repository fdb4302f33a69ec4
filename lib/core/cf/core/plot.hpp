#pragma once
// Plots for `--plot FILE.svg|.png`: a small self-contained SVG writer (no dependency) and, for PNG,
// gnuplot's pngcairo terminal (Debian gnuplot-nox, installed by scripts/setup.sh).
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
  /// clipped at the frame, so one extreme curve cannot flatten the others.
  double y_min = std::numeric_limits<double>::quiet_NaN(), y_max = std::numeric_limits<double>::quiet_NaN();
};
inline constexpr std::size_t kMarkerPoints = 40;

/// Heat map: values(row, col) drawn with row index on the y axis (row 0 at the top unless
/// y_up), column index on the x axis; x = x0 + col, y = y0 + row.
struct Heatmap {
  std::string title, xlabel, ylabel, value_label;
  Eigen::MatrixXd values;
  double x0 = 0, y0 = 0;
  bool y_up = false;
};

std::string render_svg(const LinePlot& p);
std::string render_svg(const Heatmap& h);

/// Save to `path`, choosing by extension: .svg (built-in writer) or .png (gnuplot). Atomic.
/// Throws cf::InvalidArgument for another extension, cf::Error if gnuplot is missing for .png.
void save(const LinePlot& p, const std::string& path);
void save(const Heatmap& h, const std::string& path);

/// Throws cf::InvalidArgument unless `path` ends in .svg or .png (check before long work).
void check_plot_path(const std::string& path);

}  // namespace cf::plot
