#include "cf/core/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

namespace cf::plot {
namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
// Discrete heat-map colours: 0 = light, 1 = the map colour, then distinct hues.
const char* kCategory[] = {"#f2f2f2", "#26549e", "#e6862e", "#5aa85a", "#b94a48", "#8a6bbe", "#c4a000", "#17becf"};

std::string extension(const std::string& path) {
  auto dot = path.rfind('.');
  if (dot == std::string::npos) return "";
  std::string e = path.substr(dot + 1);
  for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'')
      o += "'\\''";
    else
      o += c;
  }
  return o + "'";
}

// A gnuplot string literal (double quotes, backslash escapes); text is set `noenhanced` so '_' and
// '^' print literally ("p_j", "alpha_l").
std::string gp_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Same size and font for both terminals: the only line that differs between SVG and PNG.
std::string terminal(const std::string& ext) {
  if (ext == "svg") return "set terminal svg size 1000,700 dynamic font 'DejaVu Sans,13' background '#ffffff'\n";
  return "set terminal pngcairo size 1000,700 font 'DejaVu Sans,11' background '#ffffff'\n";
}

std::string header(const std::string& ext, const std::string& out, const std::string& title, const std::string& xl,
                   const std::string& yl) {
  std::ostringstream s;
  s << terminal(ext) << "set output " << gp_str(out) << "\n"
    << "set encoding utf8\n"
    << "set title " << gp_str(title) << " noenhanced\n"
    << "set xlabel " << gp_str(xl) << " noenhanced\n"
    << "set ylabel " << gp_str(yl) << " noenhanced\n";
  return s.str();
}

bool all_integer_x(const LinePlot& p) {
  for (const auto& s : p.series)
    for (double x : s.x)
      if (std::isfinite(x) && x != std::floor(x)) return false;
  return true;
}

bool wants_markers(const Series& s) { return s.x.size() <= kMarkerPoints; }

std::string value(double v) { return std::isfinite(v) ? num(v) : std::string("NaN"); }

std::string line_data(const LinePlot& p) {
  std::ostringstream d;
  for (const auto& s : p.series) {
    const std::size_t n = std::min(s.x.size(), s.y.size());
    for (std::size_t i = 0; i < n; ++i) {
      d << value(s.x[i]) << " " << value(s.y[i]);
      if (!s.y_lo.empty() || !s.y_hi.empty())
        d << " " << value(i < s.y_lo.size() ? s.y_lo[i] : NAN) << " " << value(i < s.y_hi.size() ? s.y_hi[i] : NAN);
      d << "\n";
    }
    if (n == 0) d << "NaN NaN\n";
    d << "\n\n";
  }
  return d.str();
}

std::string heat_data(const Heatmap& h) {
  std::ostringstream d;
  for (Eigen::Index i = 0; i < h.values.rows(); ++i) {
    for (Eigen::Index j = 0; j < h.values.cols(); ++j)
      d << num(h.x0 + double(j)) << " " << num(h.y0 + double(i)) << " " << value(h.values(i, j)) << "\n";
    d << "\n";
  }
  return d.str();
}

// Categories of a heat map: the given labels, or {"0", "1"} for a 0/1 map.
std::vector<std::string> categories_of(const Heatmap& h) {
  if (!h.categories.empty()) return h.categories;
  // a fixed colour range is a continuous scale shared with other maps (accuracy 0..1): a map that
  // happens to hold only 0 and 1 must draw on that scale too
  if (h.values.size() == 0 || (std::isfinite(h.cb_min) && std::isfinite(h.cb_max))) return {};
  for (Eigen::Index k = 0; k < h.values.size(); ++k) {
    const double v = h.values.data()[k];
    if (v != 0.0 && v != 1.0) return {};
  }
  return {"0", "1"};
}

void run_gnuplot(const std::string& data, const std::string& path,
                 const std::function<std::string(const std::string&, const std::string&)>& script_for) {
  if (!gnuplot_available()) throw Error("plots need gnuplot (apt-get install gnuplot-nox; scripts/deps/apt.txt)");
  write_path_atomic(path, [&](const std::string& out) {
    TempFile dat("cf_plot_data"), gp("cf_plot_script"), err("cf_plot_err");
    {
      std::ofstream d(dat.path());
      d << data;
      if (!d) throw Error(str("cannot write the plot data for '", path, "' (disk full?)"));
    }
    {
      std::ofstream g(gp.path());
      g << script_for(dat.path(), out);
      if (!g) throw Error(str("cannot write the plot script for '", path, "' (disk full?)"));
    }
    const int rc =
        std::system(("gnuplot " + shell_quote(gp.path()) + " >/dev/null 2>" + shell_quote(err.path())).c_str());
    if (rc != 0) {
      std::string msg;
      std::ifstream e(err.path());
      std::string line;
      while (std::getline(e, line))
        if (line.find_first_not_of(" ^") != std::string::npos) msg = line;  // the last real line
      throw Error(str("gnuplot failed writing '", path, "'", msg.empty() ? "" : ": " + msg));
    }
  });
}

}  // namespace

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

void check_plot_path(const std::string& path) {
  auto e = extension(path);
  require(e == "svg" || e == "png", "--plot '", path, "': the file name must end in .svg or .png");
  // a plot asked for is refused before the work, not after it (a GPU machine may lack gnuplot)
  require(gnuplot_available(), "--plot '", path,
          "': plots need gnuplot (apt-get install gnuplot-nox; scripts/deps/apt.txt)");
}

std::vector<std::string> clipped_series(const LinePlot& p) {
  std::vector<std::string> out;
  if (!std::isfinite(p.y_min) && !std::isfinite(p.y_max)) return out;
  for (const auto& s : p.series) {
    bool clipped = false;
    for (double y : s.y) {
      if (!std::isfinite(y) || (p.log_y && !(y > 0))) continue;
      if ((std::isfinite(p.y_max) && y > p.y_max) || (std::isfinite(p.y_min) && y < p.y_min)) clipped = true;
    }
    if (clipped) out.push_back(s.label);
  }
  return out;
}

namespace {

std::string with_clipped(const LinePlot& p) {
  std::string title = p.title;
  const auto clipped = clipped_series(p);
  if (!clipped.empty()) {
    title += title.empty() ? "clipped: " : " (clipped: ";
    for (std::size_t i = 0; i < clipped.size(); ++i) title += (i ? ", " : "") + clipped[i];
    if (!p.title.empty()) title += ")";
  }
  return title;
}

std::string y_label(const LinePlot& p) {
  if (!p.log_y || p.ylabel.find("log scale") != std::string::npos) return p.ylabel;
  return p.ylabel + " (log scale)";
}

std::string key_command(const LinePlot& p) {
  const std::string where = p.key == "auto" ? (p.series.size() <= 4 ? "inside top right" : "below") : p.key;
  if (where == "below") return "set key below horizontal maxrows 3 noenhanced\n";
  return "set key " + (where.rfind("inside", 0) == 0 ? where : "inside " + where) +
         " noenhanced opaque box lc rgb '#cccccc'\n";
}

// Everything of a line plot after the terminal: labels, axes, legend and the plot command; its data
// are the blocks `first`, `first + 1`, ... of `data_path`.
std::string line_body(const LinePlot& p, const std::string& data_path, std::size_t first) {
  std::ostringstream s;
  s << "set title " << gp_str(with_clipped(p)) << " noenhanced\n"
    << "set xlabel " << gp_str(p.xlabel) << " noenhanced\n"
    << "set ylabel " << gp_str(y_label(p)) << " noenhanced\n";
  s << "set grid lc rgb '#dddddd'\n" << key_command(p) << "set border lw 1\n";
  if (p.log_y) s << "set logscale y\nset format y '%g'\n";
  if (std::isfinite(p.y_min) || std::isfinite(p.y_max))
    s << "set yrange [" << (std::isfinite(p.y_min) ? num(p.y_min) : std::string("*")) << ":"
      << (std::isfinite(p.y_max) ? num(p.y_max) : std::string("*")) << "]\n";
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  bool any = false;
  for (const auto& se : p.series)
    for (std::size_t i = 0; i < se.x.size() && i < se.y.size(); ++i)
      if (std::isfinite(se.x[i]) && std::isfinite(se.y[i]))
        lo = std::min(lo, se.x[i]), hi = std::max(hi, se.x[i]), any = true;
  if (any && all_integer_x(p)) {  // layers, positions: integer ticks, never 2.5
    if (hi - lo <= 24)
      s << "set xtics 1\nset mxtics 1\n";
    else
      s << "set format x '%.0f'\n";
  }
  if (any) {  // the data's range: n = 256 ends at 256 (autoscale would extend to the next tick)
    const bool markers = std::any_of(p.series.begin(), p.series.end(), wants_markers);
    const double pad = markers ? 0.03 * (hi - lo) : 0.0;
    if (hi > lo)
      s << "set xrange [" << num(lo - pad) << ":" << num(hi + pad) << "]\n";
    else
      s << "set xrange [" << num(lo - 0.5) << ":" << num(hi + 0.5) << "]\n";
    s << "unset clip points\n";  // whole markers on the frame's edges
  }
  if (!any) {  // an empty frame with the labels, not an error
    s << "set xrange [0:1]\n"
      << (std::isfinite(p.y_min) || std::isfinite(p.y_max) ? "" : "set yrange [0:1]\n") << "plot -1e300 notitle\n";
    return s.str();
  }
  s << "plot ";
  for (std::size_t k = 0; k < p.series.size(); ++k) {
    const auto& se = p.series[k];
    const std::size_t ci = se.colour >= 0 ? static_cast<std::size_t>(se.colour) : k;
    const std::string colour = std::string("lc rgb '") + kPalette[ci % 10] + "'";
    s << (k ? ", \\\n     " : "") << gp_str(data_path) << " index " << first + k;
    if (!se.y_lo.empty() || !se.y_hi.empty())
      s << " using 1:2:3:4 with yerrorlines pt 7 ps 0.8 lw 2 " << colour;
    else if (se.dashed)
      s << " using 1:2 with lines dt 2 lw 2 " << colour;
    else
      s << " using 1:2" << (wants_markers(se) ? " with linespoints pt 7 ps 0.8" : " with lines") << " lw 2 "
        << (se.dash_type > 0 ? "dt " + std::to_string(se.dash_type) + " " : std::string()) << colour;
    s << " title " << gp_str(se.label) << " noenhanced";
  }
  s << "\n";
  return s.str();
}

}  // namespace

std::string gnuplot_script(const LinePlot& p, const std::string& ext, const std::string& data_path,
                           const std::string& out_path) {
  return terminal(ext) + "set output " + gp_str(out_path) + "\nset encoding utf8\n" + line_body(p, data_path, 0);
}

std::string gnuplot_script(const Panels& p, const std::string& ext, const std::string& data_path,
                           const std::string& out_path) {
  std::ostringstream s;
  s << terminal(ext) << "set output " << gp_str(out_path) << "\nset encoding utf8\n";
  if (p.panels.empty()) {
    s << "set title " << gp_str(p.title) << " noenhanced\nset xrange [0:1]\nset yrange [0:1]\nplot -1e300 notitle\n";
    return s.str();
  }
  s << "set multiplot layout " << p.panels.size() << ",1 title " << gp_str(p.title) << " noenhanced\n";
  std::size_t first = 0;
  for (const auto& panel : p.panels) {
    s << "reset\n" << line_body(panel, data_path, first);
    first += panel.series.size();
  }
  s << "unset multiplot\n";
  return s.str();
}

std::string gnuplot_script(const Heatmap& h, const std::string& ext, const std::string& data_path,
                           const std::string& out_path) {
  std::ostringstream s;
  s << header(ext, out_path, h.title, h.xlabel, h.ylabel);
  const Eigen::Index rows = h.values.rows(), cols = h.values.cols();
  s << "set xrange [" << num(h.x0 - 0.5) << ":" << num(h.x0 + double(std::max<Eigen::Index>(cols, 1)) - 0.5) << "]\n";
  s << "set yrange [" << num(h.y0 - 0.5) << ":" << num(h.y0 + double(std::max<Eigen::Index>(rows, 1)) - 0.5) << "]"
    << (h.y_up ? "" : " reverse") << "\n";
  s << "set tics out\nset cblabel " << gp_str(h.value_label) << " noenhanced\n";
  // ticks in the reader's units (context length 512, depth 0.25), thinned to about 16 per axis
  auto ticks = [&](const char* axis, const std::vector<std::string>& labels, double origin) {
    if (labels.empty()) return;
    const std::size_t step = (labels.size() + 15) / 16;
    s << "set " << axis << "tics (";
    for (std::size_t i = 0, k = 0; i < labels.size(); i += step, ++k)
      s << (k ? ", " : "") << gp_str(labels[i]) << " " << num(origin + double(i));
    s << ") noenhanced\n";
  };
  ticks("x", h.x_labels, h.x0);
  ticks("y", h.y_labels, h.y0);
  bool any_nan = false;
  for (Eigen::Index q = 0; q < h.values.size(); ++q) any_nan = any_nan || std::isnan(h.values.data()[q]);
  if (!h.masked_label.empty() && any_nan) {  // masked cells (NaN, transparent in the image) show this grey
    s << "set object 1 rectangle from graph 0,0 to graph 1,1 behind fillcolor rgb '#9e9e9e' fillstyle solid "
         "noborder\n"
      << "set bmargin 5\nset label 1 " << gp_str(h.masked_label) << " at screen 0.5, screen 0.025 center noenhanced\n";
  }
  const auto cats = categories_of(h);
  if (!cats.empty()) {
    const std::size_t k = cats.size();
    s << "set cbrange [-0.5:" << num(double(k) - 0.5) << "]\nset palette maxcolors " << k << "\nset palette defined (";
    for (std::size_t i = 0; i < k; ++i) s << (i ? ", " : "") << i << " '" << kCategory[i % 8] << "'";
    if (k == 1) s << ", 1 '" << kCategory[0] << "'";
    s << ")\nset cbtics (";
    for (std::size_t i = 0; i < k; ++i) s << (i ? ", " : "") << gp_str(cats[i]) << " " << i;
    s << ") scale 0 noenhanced\n";
    std::size_t longest = 0;
    for (const auto& c : cats) longest = std::max(longest, c.size());
    s << "set rmargin " << std::max<std::size_t>(10, longest + 8) << "\n";  // room for the legend labels
  } else {
    double vmin = 0, vmax = 1;
    bool any = false;
    const bool fixed = std::isfinite(h.cb_min) && std::isfinite(h.cb_max) && h.cb_max > h.cb_min;
    for (Eigen::Index q = 0; q < h.values.size(); ++q) {
      const double v = h.values.data()[q];
      if (!std::isfinite(v)) continue;
      vmin = any ? std::min(vmin, v) : v;
      vmax = any ? std::max(vmax, v) : v;
      any = true;
    }
    if (fixed) {  // one scale shared by the figures compared
      vmin = h.cb_min;
      vmax = h.cb_max;
    } else if (!(vmax > vmin)) {  // constant map: a range around the value, so it still draws
      const double pad = vmin == 0 ? 1.0 : 0.5 * std::abs(vmin);
      vmin -= pad;
      vmax += pad;
    }
    s << "set cbrange [" << num(vmin) << ":" << num(vmax) << "]\n";
    if (!h.value_label.empty()) s << "set rmargin 14\n";  // room for the colour bar's label
    // smallest values light yellow, not white: distinct from a grey mask and from the blank page
    s << "set palette defined (0 '#ffffcc', 0.35 '#a1dab4', 0.65 '#41b6c4', 1 '#253494')\n";
  }
  if (rows == 0 || cols == 0) {
    s << "plot -1e300 notitle\n";
    return s.str();
  }
  // `with image`: one embedded bitmap in the SVG (small files); a single row or column needs `pixels`.
  s << "plot " << gp_str(data_path) << " using 1:2:3 with image" << (rows < 2 || cols < 2 ? " pixels" : "")
    << " notitle\n";
  return s.str();
}

void save(const LinePlot& p, const std::string& path) {
  check_plot_path(path);
  const std::string ext = extension(path);
  run_gnuplot(line_data(p), path,
              [&](const std::string& dat, const std::string& out) { return gnuplot_script(p, ext, dat, out); });
}

void save(const Panels& p, const std::string& path) {
  check_plot_path(path);
  const std::string ext = extension(path);
  std::string data;
  for (const auto& panel : p.panels) data += line_data(panel);
  run_gnuplot(data, path,
              [&](const std::string& dat, const std::string& out) { return gnuplot_script(p, ext, dat, out); });
}

void save(const Heatmap& h, const std::string& path) {
  check_plot_path(path);
  const std::string ext = extension(path);
  run_gnuplot(heat_data(h), path,
              [&](const std::string& dat, const std::string& out) { return gnuplot_script(h, ext, dat, out); });
}

}  // namespace cf::plot
