#include "cf/core/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

namespace cf::plot {
namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// "Nice" tick positions covering [lo, hi]; integer_only keeps the step >= 1 (layer indices).
std::vector<double> ticks(double lo, double hi, int target = 6, bool integer_only = false) {
  std::vector<double> t;
  if (!(hi > lo)) {
    t.push_back(lo);
    return t;
  }
  double raw = (hi - lo) / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  if (integer_only) step = std::max(1.0, std::round(step));
  // Multiples of step, computed (not accumulated) and snapped at zero: no "-0" or 0.30000000004.
  for (double k = std::ceil(lo / step); k * step <= hi + 1e-9 * step; k += 1)
    t.push_back(std::abs(k) < 0.5 ? 0.0 : k * step);
  return t;
}

std::string extension(const std::string& path) {
  auto dot = path.rfind('.');
  if (dot == std::string::npos) return "";
  std::string e = path.substr(dot + 1);
  for (auto& c : e) c = static_cast<char>(std::tolower(c));
  return e;
}

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o += "'\\''";
    else o += c;
  }
  return o + "'";
}

void run_gnuplot(const std::string& script, const std::string& data, const std::string& path) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw Error("PNG output needs gnuplot (apt-get install gnuplot-nox); use a .svg path instead");
  write_path_atomic(path, [&](const std::string& tmp) {
    std::string dat = tmp + ".dat", gp = tmp + ".gp";
    {
      std::ofstream d(dat);
      d << data;
    }
    {
      std::ofstream g(gp);
      g << "set terminal pngcairo size 1000,700 enhanced font 'DejaVu Sans,11'\n"
        << "set output " << shell_quote(tmp) << "\n"
        << "datafile = " << shell_quote(dat) << "\n"
        << script;
    }
    int rc = std::system(("gnuplot " + shell_quote(gp) + " >/dev/null 2>&1").c_str());
    std::remove(dat.c_str());
    std::remove(gp.c_str());
    if (rc != 0) throw Error(str("gnuplot failed writing '", path, "'"));
  });
}

std::string gp_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

bool all_integer_x(const LinePlot& p) {
  for (const auto& s : p.series)
    for (double x : s.x)
      if (x != std::floor(x)) return false;
  return true;
}

bool wants_markers(const Series& s) { return s.x.size() <= kMarkerPoints; }

}  // namespace

void check_plot_path(const std::string& path) {
  auto e = extension(path);
  require(e == "svg" || e == "png", "--plot '", path, "': the file name must end in .svg or .png");
}

std::string render_svg(const LinePlot& p) {
  // The legend sits right of the frame: widen the picture for long labels instead of cutting them.
  std::size_t longest = 0;
  for (const auto& s : p.series) longest = std::max(longest, s.label.size());
  const double R = std::max(190.0, 60.0 + 7.5 * double(longest)), W = 710 + R, H = 560, L = 80, T = 50, B = 60;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const auto& s : p.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      double y = s.y[i];
      if (p.log_y) {
        if (!(y > 0)) continue;
        y = std::log10(y);
      }
      if (!std::isfinite(y) || !std::isfinite(s.x[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax == ymin) ymax = ymin + 1;
  double pad = 0.05 * (ymax - ymin);
  ymin -= pad;
  ymax += pad;
  auto to_axis = [&](double v) { return p.log_y ? std::log10(v) : v; };
  if (std::isfinite(p.y_min) && (!p.log_y || p.y_min > 0)) ymin = to_axis(p.y_min);
  if (std::isfinite(p.y_max) && (!p.log_y || p.y_max > 0)) ymax = to_axis(p.y_max);
  if (!(ymax > ymin)) ymax = ymin + 1;
  const bool int_x = all_integer_x(p);
  if (std::any_of(p.series.begin(), p.series.end(), wants_markers)) {  // whole markers at the ends
    const double xpad = 0.03 * (xmax - xmin);
    xmin -= xpad;
    xmax += xpad;
  }
  auto X = [&](double x) { return L + (x - xmin) / (xmax - xmin) * (W - L - R); };
  auto Y = [&](double y) { return H - B - (y - ymin) / (ymax - ymin) * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << (L + (W - L - R) / 2) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
    << esc(p.title) << "</text>\n";
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << (W - L - R) << "\" height=\"" << (H - T - B)
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  o << "<defs><clipPath id=\"frame\"><rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << (W - L - R)
    << "\" height=\"" << (H - T - B) << "\"/></clipPath></defs>\n";
  for (double t : ticks(xmin, xmax, 6, int_x))
    o << "<line x1=\"" << X(t) << "\" x2=\"" << X(t) << "\" y1=\"" << (H - B) << "\" y2=\"" << (H - B + 5)
      << "\" stroke=\"black\"/><text x=\"" << X(t) << "\" y=\"" << (H - B + 20)
      << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  for (double t : ticks(ymin, ymax))
    o << "<line x1=\"" << (L - 5) << "\" x2=\"" << L << "\" y1=\"" << Y(t) << "\" y2=\"" << Y(t)
      << "\" stroke=\"black\"/><line x1=\"" << L << "\" x2=\"" << (W - R) << "\" y1=\"" << Y(t) << "\" y2=\""
      << Y(t) << "\" stroke=\"#dddddd\"/><text x=\"" << (L - 8) << "\" y=\"" << (Y(t) + 4)
      << "\" text-anchor=\"end\">" << (p.log_y ? "1e" + num(t) : num(t)) << "</text>\n";
  o << "<text x=\"" << (L + (W - L - R) / 2) << "\" y=\"" << (H - 15) << "\" text-anchor=\"middle\">"
    << esc(p.xlabel) << "</text>\n";
  o << "<text transform=\"translate(20," << (T + (H - T - B) / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << esc(p.ylabel + (p.log_y ? " (log10)" : "")) << "</text>\n";
  for (size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    const char* col = kPalette[k % 10];
    std::ostringstream marks;
    o << "<g clip-path=\"url(#frame)\"><polyline fill=\"none\" stroke=\"" << col
      << "\" stroke-width=\"1.8\" points=\"";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      double y = s.y[i];
      if (p.log_y) {
        if (!(y > 0)) continue;
        y = std::log10(y);
      }
      if (!std::isfinite(y)) continue;
      o << X(s.x[i]) << "," << Y(y) << " ";
      if (wants_markers(s))
        marks << "<circle cx=\"" << X(s.x[i]) << "\" cy=\"" << Y(y) << "\" r=\"3.5\" fill=\"" << col << "\"/>";
    }
    o << "\"/>" << marks.str() << "</g>\n";
    double ly = T + 20 + 22 * k;
    o << "<line x1=\"" << (W - R + 12) << "\" x2=\"" << (W - R + 40) << "\" y1=\"" << ly << "\" y2=\"" << ly
      << "\" stroke=\"" << col << "\" stroke-width=\"3\"/><text x=\"" << (W - R + 46) << "\" y=\"" << (ly + 4)
      << "\">" << esc(s.label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string render_svg(const Heatmap& h) {
  const double W = 900, H = 620, L = 80, R = 130, T = 50, B = 60;
  const auto rows = h.values.rows(), cols = h.values.cols();
  double vmin = rows * cols ? h.values.minCoeff() : 0, vmax = rows * cols ? h.values.maxCoeff() : 1;
  if (vmax == vmin) vmax = vmin + 1;
  const double cw = (W - L - R) / std::max<Eigen::Index>(cols, 1), ch = (H - T - B) / std::max<Eigen::Index>(rows, 1);
  auto color = [&](double v) {
    double t = (v - vmin) / (vmax - vmin);  // white -> dark blue
    int r = static_cast<int>(255 * (1 - 0.85 * t)), g = static_cast<int>(255 * (1 - 0.65 * t)),
        b = static_cast<int>(255 * (1 - 0.25 * t));
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
    return std::string(buf);
  };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"13\" shape-rendering=\"crispEdges\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << (L + (W - L - R) / 2) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
    << esc(h.title) << "</text>\n";
  for (Eigen::Index i = 0; i < rows; ++i) {
    double y = h.y_up ? (H - B - (i + 1) * ch) : (T + i * ch);
    // One rectangle per run of equal values keeps the file small for 0/1 maps.
    for (Eigen::Index j = 0; j < cols;) {
      Eigen::Index k = j + 1;
      while (k < cols && h.values(i, k) == h.values(i, j)) ++k;
      o << "<rect x=\"" << (L + j * cw) << "\" y=\"" << y << "\" width=\"" << (k - j) * cw + 0.02 << "\" height=\""
        << ch + 0.02 << "\" fill=\"" << color(h.values(i, j)) << "\"/>\n";
      j = k;
    }
  }
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << (W - L - R) << "\" height=\"" << (H - T - B)
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double t : ticks(h.x0, h.x0 + cols - 1)) {
    double x = L + (t - h.x0 + 0.5) * cw;
    o << "<text x=\"" << x << "\" y=\"" << (H - B + 20) << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  }
  for (double t : ticks(h.y0, h.y0 + rows - 1)) {
    double i = t - h.y0;
    double y = h.y_up ? (H - B - (i + 0.5) * ch) : (T + (i + 0.5) * ch);
    o << "<text x=\"" << (L - 8) << "\" y=\"" << (y + 4) << "\" text-anchor=\"end\">" << num(t) << "</text>\n";
  }
  o << "<text x=\"" << (L + (W - L - R) / 2) << "\" y=\"" << (H - 15) << "\" text-anchor=\"middle\">"
    << esc(h.xlabel) << "</text>\n";
  o << "<text transform=\"translate(20," << (T + (H - T - B) / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << esc(h.ylabel) << "</text>\n";
  // colour bar
  for (int k = 0; k < 50; ++k) {
    double v = vmin + (vmax - vmin) * k / 49.0;
    o << "<rect x=\"" << (W - R + 30) << "\" y=\"" << (H - B - (k + 1) * (H - T - B) / 50) << "\" width=\"20\" height=\""
      << (H - T - B) / 50 + 0.5 << "\" fill=\"" << color(v) << "\"/>\n";
  }
  o << "<text x=\"" << (W - R + 56) << "\" y=\"" << (H - B) << "\">" << num(vmin) << "</text>\n"
    << "<text x=\"" << (W - R + 56) << "\" y=\"" << (T + 10) << "\">" << num(vmax) << "</text>\n"
    << "<text x=\"" << (W - R + 30) << "\" y=\"" << (T - 10) << "\">" << esc(h.value_label) << "</text>\n";
  o << "</svg>\n";
  return o.str();
}

void save(const LinePlot& p, const std::string& path) {
  check_plot_path(path);
  if (extension(path) == "svg") return write_file_atomic(path, render_svg(p));
  std::ostringstream data, script;
  script << "set title " << gp_str(p.title) << "\nset xlabel " << gp_str(p.xlabel) << "\nset ylabel "
         << gp_str(p.ylabel) << "\nset grid\nset key outside right\n";
  if (p.log_y) script << "set logscale y\n";
  if (std::isfinite(p.y_min) || std::isfinite(p.y_max))
    script << "set yrange [" << (std::isfinite(p.y_min) ? num(p.y_min) : std::string("*")) << ":"
           << (std::isfinite(p.y_max) ? num(p.y_max) : std::string("*")) << "]\n";
  if (all_integer_x(p)) {  // few integer x (layers): one tick each, never 2.5
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& s : p.series)
      for (double x : s.x) lo = std::min(lo, x), hi = std::max(hi, x);
    if (hi - lo <= 24) script << "set xtics 1\nset mxtics 1\n";
    else script << "set format x \"%.0f\"\n";
  }
  script << "plot ";
  for (size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) data << s.x[i] << " " << s.y[i] << "\n";
    data << "\n\n";
    // Labels are literal ("per_layer"): gnuplot's enhanced mode would read '_' as a subscript.
    script << (k ? ", " : "") << "datafile index " << k << (wants_markers(s) ? " with linespoints pt 7" : " with lines")
           << " lw 2 title " << gp_str(s.label) << " noenhanced";
  }
  script << "\n";
  run_gnuplot(script.str(), data.str(), path);
}

void save(const Heatmap& h, const std::string& path) {
  check_plot_path(path);
  if (extension(path) == "svg") return write_file_atomic(path, render_svg(h));
  std::ostringstream data, script;
  for (Eigen::Index i = 0; i < h.values.rows(); ++i) {
    for (Eigen::Index j = 0; j < h.values.cols(); ++j) data << (h.x0 + j) << " " << (h.y0 + i) << " " << h.values(i, j) << "\n";
    data << "\n";
  }
  script << "set title " << gp_str(h.title) << "\nset xlabel " << gp_str(h.xlabel) << "\nset ylabel "
         << gp_str(h.ylabel) << "\nset cblabel " << gp_str(h.value_label)
         << "\nset palette defined (0 'white', 1 '#26549e')\n";
  script << "set xrange [" << h.x0 - 0.5 << ":" << h.x0 + h.values.cols() - 0.5 << "]\n";
  script << "set yrange [" << h.y0 - 0.5 << ":" << h.y0 + h.values.rows() - 0.5 << "]" << (h.y_up ? "" : " reverse") << "\n";
  script << "plot datafile using 1:2:3 with image notitle\n";
  run_gnuplot(script.str(), data.str(), path);
}

}  // namespace cf::plot
