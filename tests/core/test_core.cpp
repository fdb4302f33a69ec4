// lib/core: report rendering, atomic writes (nothing a user saved is lost), plots.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/number_file.hpp"
#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"

using namespace cf;

TEST_CASE("output: tables render as aligned text, RFC 4180 CSV and JSON with meta", "[core]") {
  output::Table t;
  t.title = "T";
  t.header = {"name", "value"};
  t.add_row({"a,b", "1"});
  t.add_row({"say \"hi\"", "22"});
  REQUIRE_THROWS_AS(t.add_row({"only one"}), InvalidArgument);
  REQUIRE(t.render_csv() == "name,value\n\"a,b\",1\n\"say \"\"hi\"\"\",22\n");
  const std::string text = t.render_text();
  REQUIRE(text.find("T\n") == 0);
  REQUIRE(text.find("      a,b      1") != std::string::npos);
  output::Report r;
  r.meta = output::metadata("tool", {{"n", 3}});
  r.body = {{"x", 1}};
  r.tables.push_back(t);
  const auto j = nlohmann::json::parse(r.render(output::Format::Json));
  REQUIRE(j["x"] == 1);
  REQUIRE(j["meta"]["tool"] == "tool");
  REQUIRE(j["meta"]["params"]["n"] == 3);
  REQUIRE(j["meta"].contains("git_revision"));
  REQUIRE(output::fmt_int(195744) == "195,744");
  REQUIRE(output::fmt_int(-1000) == "-1,000");
  REQUIRE(output::fmt_int(12) == "12");
  REQUIRE_THROWS_AS(output::parse_format("xml"), InvalidArgument);
}

TEST_CASE("atomic_file: a failed write leaves the previous file intact", "[core]") {
  const std::string path = "cf_test_atomic.txt";
  write_file_atomic(path, "first");
  REQUIRE(read_file(path) == "first");
  REQUIRE_THROWS(write_path_atomic(path, [](const std::string& tmp) {
    std::ofstream(tmp) << "partial";
    throw Error("interrupted");
  }));
  REQUIRE(read_file(path) == "first");
  write_file_atomic(path, "second");
  REQUIRE(read_file(path) == "second");
  std::remove(path.c_str());
  REQUIRE_THROWS_AS(read_file("/nonexistent/file"), InvalidArgument);
  REQUIRE_THROWS_AS(write_file_atomic("/nonexistent-dir/x.txt", "x"), Error);
}

TEST_CASE("plot: SVG line plots and heat maps carry titles, labels and legends", "[core]") {
  plot::LinePlot p;
  p.title = "Title <1>";
  p.xlabel = "position";
  p.ylabel = "probability";
  p.series.push_back({"curve", {0, 1, 2}, {0.1, 0.5, 0.2}});
  const std::string svg = plot::render_svg(p);
  REQUIRE(svg.find("Title &lt;1&gt;") != std::string::npos);
  REQUIRE(svg.find("position") != std::string::npos);
  REQUIRE(svg.find("curve") != std::string::npos);
  plot::Heatmap h;
  h.values = Eigen::MatrixXd::Identity(3, 4);
  h.xlabel = "r";
  h.ylabel = "d";
  REQUIRE(plot::render_svg(h).find("<rect") != std::string::npos);
  REQUIRE_THROWS_AS(plot::check_plot_path("x.pdf"), InvalidArgument);
  REQUIRE_NOTHROW(plot::check_plot_path("x.PNG"));
}

TEST_CASE("plot: short series get markers, integer x gets integer ticks, a fixed y range clips", "[core]") {
  plot::LinePlot p;
  p.xlabel = "layer";
  p.series.push_back({"per_layer", {0, 1, 2}, {300, 200, 100}});
  std::string svg = plot::render_svg(p);
  CHECK(svg.find("<circle") != std::string::npos);  // 3 points: markers
  CHECK(svg.find(">0.5<") == std::string::npos);     // no tick between layers 0 and 1
  CHECK(svg.find(">1<") != std::string::npos);
  plot::LinePlot q;
  std::vector<double> x(200), y(200);
  for (int i = 0; i < 200; ++i) x[i] = 0.5 * i, y[i] = i == 0 ? 1.0 : 0.01;
  q.series.push_back({"spike", x, y});
  q.y_min = 0;
  q.y_max = 0.02;
  svg = plot::render_svg(q);
  CHECK(svg.find("<circle") == std::string::npos);             // 200 points: a line
  CHECK(svg.find("clip-path=\"url(#frame)\"") != std::string::npos);  // the spike is clipped
  CHECK(svg.find(">0.02<") != std::string::npos);              // axis follows the fixed range
  CHECK(svg.find(">1<") == std::string::npos);
}

TEST_CASE("number_file: comments, separators, empty lines, and malformed tokens", "[core]") {
  const std::string path = "test_core_numbers.txt";
  {
    std::ofstream f(path);
    f << "# alpha schedule\n0.5, 0.25;0.125\t1e-3\n\n   \n2 # trailing comment\r\n";
  }
  const auto rows = cf::read_number_rows(path, "alpha file");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == std::vector<double>{0.5, 0.25, 0.125, 1e-3});
  CHECK(rows[1] == std::vector<double>{2.0});
  for (const char* bad : {"0.5 nan\n", "1.0x\n", "inf\n"}) {
    {
      std::ofstream f(path);
      f << "0.1\n" << bad;
    }
    try {
      cf::read_number_rows(path, "alpha file");
      FAIL("accepted '" << bad << "'");
    } catch (const cf::InvalidArgument& e) {
      CHECK(std::string(e.what()).find("line 2") != std::string::npos);
    }
  }
  std::remove(path.c_str());
  CHECK_THROWS_AS(cf::read_number_rows("/nonexistent/x.txt", "kernel file"), cf::InvalidArgument);
}
