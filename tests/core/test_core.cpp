// lib/core: report rendering, atomic writes (nothing a user saved is lost), plots.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/core/number_file.hpp"
#include "cf/core/output.hpp"
#include "cf/core/plot.hpp"

using namespace cf;

TEST_CASE(
    "output: tables render as aligned text, CSV without quoting (a comma in a cell becomes a semicolon) and JSON with "
    "meta",
    "[core]") {
  output::Table t;
  t.title = "T";
  t.header = {"name", "value"};
  t.add_row({"a,b", "1"});
  t.add_row({"say \"hi\"", "22"});
  REQUIRE_THROWS_AS(t.add_row({"only one"}), InvalidArgument);
  // numpy.genfromtxt knows no quoting: a comma in a cell would split it (issue 29)
  REQUIRE(t.render_csv() == "name,value\na;b,1\nsay 'hi',22\n");
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
  REQUIRE(output::fmt_int(-9223372036854775807LL - 1) == "-9,223,372,036,854,775,808");
  REQUIRE(output::fmt_int(-1000) == "-1,000");
  REQUIRE(output::fmt_int(12) == "12");
  REQUIRE_THROWS_AS(output::parse_format("xml"), InvalidArgument);
}

TEST_CASE("split_list: items trimmed, an empty item is refused naming the option", "[core]") {
  CHECK(cf::split_list("0", "--heads") == std::vector<std::string>{"0"});
  CHECK(cf::split_list("0, 3 ,a.h5", "--heads") == std::vector<std::string>{"0", "3", "a.h5"});
  for (const char* bad : {"0,", ",0", "0,,1", "0, ,1"})
    CHECK_THROWS_WITH(cf::split_list(bad, "--heads"), "--heads: the comma list '" + std::string(bad) +
                                                          "' has an empty item (a leading, trailing or doubled comma)");
  CHECK_THROWS_WITH(cf::split_list("", "--heads"), "--heads: empty list");
  CHECK_THROWS_WITH(cf::split_list(" ", "--heads"), "--heads: empty list");
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

// ---- issue 9: output paths, CSV/JSON shape, plots, progress, threads ---------------------------
#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "cf/core/progress.hpp"
#include "cf/core/threads.hpp"

namespace {

// A fresh empty folder under the test's working directory.
std::string fresh_dir(const std::string& name) {
  const std::string d = "core_io_" + name;
  std::system(("rm -rf " + d + " && mkdir -p " + d).c_str());
  return d;
}

std::vector<std::string> list_dir(const std::string& d) {
  std::vector<std::string> out;
  if (DIR* h = opendir(d.c_str())) {
    while (const dirent* e = readdir(h))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    closedir(h);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool has_temp(const std::string& d) {
  for (const auto& n : list_dir(d))
    if (n.find(".tmp.") != std::string::npos) return true;
  return false;
}

mode_t kind_of(const std::string& p) {
  struct stat st;
  REQUIRE(lstat(p.c_str(), &st) == 0);
  return st.st_mode & S_IFMT;
}

// A PID that certainly runs no process: a child that has exited and been reaped.
long dead_pid() {
  const pid_t c = fork();
  if (c == 0) _exit(0);
  int status = 0;
  waitpid(c, &status, 0);
  return static_cast<long>(c);
}

}  // namespace

TEST_CASE("output path: a symbolic link stays a link and its target is replaced atomically", "[core][io]") {
  const std::string d = fresh_dir("symlink");
  write_file_atomic(d + "/target.txt", "old");
  REQUIRE(symlink("target.txt", (d + "/link.txt").c_str()) == 0);  // relative link
  write_file_atomic(d + "/link.txt", "new");
  CHECK(kind_of(d + "/link.txt") == S_IFLNK);
  CHECK(read_file(d + "/target.txt") == "new");
  // a chain of links and write_path_atomic (the HDF5 / gnuplot path)
  REQUIRE(symlink("link.txt", (d + "/link2.txt").c_str()) == 0);
  write_path_atomic(d + "/link2.txt", [](const std::string& tmp) { std::ofstream(tmp) << "newer"; });
  CHECK(kind_of(d + "/link2.txt") == S_IFLNK);
  CHECK(kind_of(d + "/link.txt") == S_IFLNK);
  CHECK(read_file(d + "/target.txt") == "newer");
  // a dangling link: its target is created, the link kept
  REQUIRE(symlink("made.txt", (d + "/dangling.txt").c_str()) == 0);
  write_file_atomic(d + "/dangling.txt", "made");
  CHECK(kind_of(d + "/dangling.txt") == S_IFLNK);
  CHECK(read_file(d + "/made.txt") == "made");
  CHECK(!has_temp(d));
  // a directory is refused, not replaced
  REQUIRE_THROWS_AS(write_file_atomic(d, "x"), Error);
  // the file mode of a replaced file is kept
  chmod((d + "/target.txt").c_str(), 0640);
  write_file_atomic(d + "/target.txt", "mode");
  struct stat st;
  REQUIRE(stat((d + "/target.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("output path: a FIFO is written straight through and stays a FIFO", "[core][io]") {
  const std::string d = fresh_dir("fifo");
  const std::string f = d + "/pipe";
  REQUIRE(mkfifo(f.c_str(), 0600) == 0);
  for (int round = 0; round < 2; ++round) {
    std::string got;
    std::thread reader([&] {
      std::ifstream in(f, std::ios::binary);
      std::ostringstream os;
      os << in.rdbuf();
      got = os.str();
    });
    if (round == 0)
      write_file_atomic(f, "through the pipe");
    else
      write_path_atomic(f, [](const std::string& tmp) { std::ofstream(tmp) << "through the pipe"; });
    reader.join();
    CHECK(got == "through the pipe");
    CHECK(kind_of(f) == S_IFIFO);
  }
  CHECK(!has_temp(d));
}

TEST_CASE("input path: a FIFO, a folder or a device is refused at once, process substitution still reads",
          "[core][io]") {
  // A FIFO with no writer used to block read_file forever: the alarm turns a regression into a
  // failed run (SIGALRM) instead of a hang.
  alarm(20);
  const std::string d = fresh_dir("input");
  const std::string f = d + "/pipe";
  REQUIRE(mkfifo(f.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_file(f), Catch::Equals("'" + f + "' is not a regular file (a FIFO)"));
  CHECK_THROWS_WITH(require_regular_input(f, "--text"),
                    Catch::Equals("--text '" + f + "' is not a regular file (a FIFO)"));
  CHECK_THROWS_WITH(read_number_rows(f, "kernel file"), Catch::Contains("is not a regular file (a FIFO)"));
  CHECK_THROWS_WITH(read_file(d), Catch::Contains("is not a regular file (a directory)"));
  CHECK_THROWS_WITH(read_number_rows(d, "alpha file"), Catch::Contains("is not a regular file (a directory)"));
  const std::string dev = d + "/zero";
  if (mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 5)) == 0)  // needs root; /dev/zero would never end
    CHECK_THROWS_WITH(read_file(dev), Catch::Contains("is not a regular file (a device)"));
  // missing files keep the open's own message
  CHECK_THROWS_WITH(read_file(d + "/none"), Catch::Contains("No such file"));
  // `--text <(cmd)` arrives as /dev/fd/N: a pipe that has a writer, read to its end
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(write(fds[1], "1 2\n3\n", 6) == 6);
  close(fds[1]);
  CHECK(read_file("/dev/fd/" + std::to_string(fds[0])) == "1 2\n3\n");
  close(fds[0]);
  std::system(("rm -rf " + d).c_str());
  alarm(0);
}

TEST_CASE("output path: a character device is written straight through and stays a device", "[core][io]") {
  const std::string d = fresh_dir("device");
  const std::string dev = d + "/null";
  if (mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    // Not root (or no CAP_MKNOD): use /dev/null itself, checked before and after.
    struct stat before;
    REQUIRE(stat("/dev/null", &before) == 0);
    REQUIRE(S_ISCHR(before.st_mode));
    write_file_atomic("/dev/null", "discarded");
    write_path_atomic("/dev/null", [](const std::string& tmp) { std::ofstream(tmp) << "discarded"; });
    struct stat after;
    REQUIRE(stat("/dev/null", &after) == 0);
    CHECK(S_ISCHR(after.st_mode));
    CHECK(after.st_rdev == before.st_rdev);
    return;
  }
  write_file_atomic(dev, "discarded");
  write_path_atomic(dev, [](const std::string& tmp) { std::ofstream(tmp) << "discarded"; });
  struct stat st;
  REQUIRE(stat(dev.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == makedev(1, 3));
  CHECK(resolve_output(dev).first == OutputKind::Stream);
  CHECK(resolve_output("-").first == OutputKind::Stdout);
  CHECK(!has_temp(d));
}

TEST_CASE("output path: failures leave the old file and no temporary, stale temporaries are swept", "[core][io]") {
  const std::string d = fresh_dir("stale");
  write_file_atomic(d + "/a.txt", "old");
  REQUIRE_THROWS(write_path_atomic(d + "/a.txt", [](const std::string& tmp) {
    std::ofstream(tmp) << "partial";
    throw Error("interrupted");
  }));
  CHECK(read_file(d + "/a.txt") == "old");
  CHECK(!has_temp(d));
  // writing a target sweeps that target's own dead temporaries only: a live one's (the parent:
  // the test runner), another target's and a user's file shaped like a temporary all stay
  const std::string dead = d + "/a.txt.tmp." + std::to_string(dead_pid());
  const std::string live = d + "/a.txt.tmp." + std::to_string(static_cast<long>(getppid()));
  const std::string user = d + "/thesis.tmp." + std::to_string(dead_pid());
  std::ofstream(dead) << "x";
  std::ofstream(live) << "x";
  std::ofstream(user) << "chapter 1";
  std::ofstream(d + "/notes.tmp.txt") << "x";
  write_file_atomic(d + "/c.txt", "c");
  CHECK(access(dead.c_str(), F_OK) == 0);  // not c.txt's
  CHECK(access(user.c_str(), F_OK) == 0);
  write_file_atomic(d + "/a.txt", "new");
  CHECK(access(dead.c_str(), F_OK) != 0);
  CHECK(access(live.c_str(), F_OK) == 0);
  CHECK(access(user.c_str(), F_OK) == 0);
  CHECK(read_file(user) == "chapter 1");
  CHECK(access((d + "/notes.tmp.txt").c_str(), F_OK) == 0);
  // check before long work
  CHECK_NOTHROW(check_output_writable(d + "/new.txt"));
  CHECK_NOTHROW(check_output_writable("-"));
  CHECK_THROWS_AS(check_output_writable(d + "/missing/x.txt"), Error);
  CHECK_THROWS_AS(check_output_writable(d), Error);
  CHECK_NOTHROW(check_output_dir_writable(d + "/new/deeper"));
  CHECK_THROWS_AS(check_output_dir_writable(d + "/a.txt/sub"), Error);
  CHECK(list_dir(d).size() == 5);  // a.txt, c.txt, the live temporary, thesis.tmp.N, notes.tmp.txt: no probe left
}

TEST_CASE("output path: a multi-file product commits as one unit", "[core][io]") {
  const std::string d = fresh_dir("multi");
  write_files_atomic({{d + "/x.bin", "x1"}, {d + "/y.bin", "y1"}, {d + "/m.json", "m1"}});
  CHECK(read_file(d + "/x.bin") == "x1");
  CHECK(read_file(d + "/m.json") == "m1");
  // the last file cannot be written (its folder is missing): nothing changes, no temporary
  REQUIRE_THROWS_AS(write_files_atomic({{d + "/x.bin", "x2"}, {d + "/y.bin", "y2"}, {d + "/no/m.json", "m2"}}), Error);
  CHECK(read_file(d + "/x.bin") == "x1");
  CHECK(read_file(d + "/y.bin") == "y1");
  CHECK(!has_temp(d));
}

TEST_CASE("signal cleanup: SIGTERM removes registered temporaries and the process dies of the signal", "[core][io]") {
  const std::string d = fresh_dir("signal");
  const std::string tmp = d + "/big.h5.tmp.child";
  const pid_t c = fork();
  if (c == 0) {
    install_temp_cleanup_handlers();
    std::ofstream(tmp) << "partial";
    register_temp(tmp);
    for (;;) pause();
  }
  for (int i = 0; i < 200 && access(tmp.c_str(), F_OK) != 0; ++i) usleep(10000);
  usleep(50000);
  kill(c, SIGTERM);
  int status = 0;
  waitpid(c, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(access(tmp.c_str(), F_OK) != 0);
}

TEST_CASE("CSV: one table with a header row, raw full-precision numbers, a table column", "[core][csv]") {
  output::set_number_style(output::NumberStyle::Raw);
  output::Table a, b;
  a.title = "Scores per head: n = 1,024";
  a.header = {"pattern", "branch", "ratio"};
  a.add_row({output::marked("swa", true), output::fmt_int(66048), output::ratio(2.0 / 3.0)});
  b.name = "fractions";
  b.header = {"d", "ratio"};
  b.add_row({"0", output::fmt(0.1 + 0.2, 4)});
  output::Report r;
  r.tables = {a, b};
  const std::string csv = r.render(output::Format::Csv);
  output::set_number_style(output::NumberStyle::Human);
  CHECK(csv ==
        "table,pattern,branch,ratio,d\n"
        "scores_per_head,swa,66048,0.6666666666666666,nan\n"  // a numeric column's missing cell: nan (issue 29:
        "fractions,,nan,0.30000000000000004,0\n");            // numpy fills an empty integer cell with -1)
  CHECK(std::strtod("0.6666666666666666", nullptr) == 2.0 / 3.0);
  // human style for the text table
  CHECK(output::ratio(2.0 / 3.0) == "0.6667x");
  CHECK(output::marked("swa", true) == "swa *");
  CHECK(output::fmt_exact(0.1) == "0.1");
  CHECK(output::fmt_exact(1e300) == "1e+300");
}

TEST_CASE("JSON: meta first, numeric arrays on one line", "[core][json]") {
  output::Report r;
  r.meta = output::metadata("tool", {{"n", 4}});
  r.body = {{"a", {1.5, 2, 3}}, {"z", {{"rows", {{1, 2}, {3, 4}}}}}, {"names", {"x", "y"}}};
  const std::string j = r.render(output::Format::Json);
  CHECK(j.find("{\n  \"meta\": {") == 0);
  CHECK(j.find("\"a\": [1.5,2,3]") != std::string::npos);
  CHECK(j.find("[1,2]") != std::string::npos);
  CHECK(j.find("[\n      \"x\"") == std::string::npos);  // string arrays are indented, one item a line
  CHECK(nlohmann::json::parse(j)["z"]["rows"][1][0] == 3);
}

TEST_CASE("plot: SVG and PNG come from one gnuplot script that differs only in the terminal", "[core][plot]") {
  plot::LinePlot p;
  p.title = "Title with p_j";
  p.xlabel = "position";
  p.ylabel = "probability";
  p.series.push_back({"curve_a", {0, 1, 2}, {0.1, 0.5, 0.2}});
  const std::string svg = plot::gnuplot_script(p, "svg", "DATA", "OUT");
  const std::string png = plot::gnuplot_script(p, "png", "DATA", "OUT");
  CHECK(svg.rfind("set terminal svg", 0) == 0);
  CHECK(png.rfind("set terminal pngcairo", 0) == 0);
  CHECK(svg.substr(svg.find('\n')) == png.substr(png.find('\n')));
  plot::Heatmap h;
  h.values = Eigen::MatrixXd::Identity(3, 4);
  const std::string hs = plot::gnuplot_script(h, "svg", "D", "O"), hp = plot::gnuplot_script(h, "png", "D", "O");
  CHECK(hs.substr(hs.find('\n')) == hp.substr(hp.find('\n')));
  CHECK_THROWS_AS(plot::check_plot_path("x.pdf"), InvalidArgument);
  CHECK_NOTHROW(plot::check_plot_path("x.PNG"));
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    WARN("gnuplot missing: files not drawn");
    return;
  }
  const std::string d = fresh_dir("plot");
  plot::save(p, d + "/p.svg");
  plot::save(p, d + "/p.png");
  CHECK(read_file(d + "/p.svg").find("Produced by GNUPLOT") != std::string::npos);
  CHECK(read_file(d + "/p.png").rfind("\x89PNG", 0) == 0);
  CHECK(!has_temp(d));
}

TEST_CASE("plot: constant maps draw, 0/1 maps get a two-colour legend, clipping is named only when it happens",
          "[core][plot]") {
  plot::Heatmap h;
  h.values = Eigen::MatrixXd::Constant(4, 5, 0.25);
  std::string s = plot::gnuplot_script(h, "svg", "D", "O");
  CHECK(s.find("set cbrange [0.125:0.375]") != std::string::npos);  // a range around the constant
  h.values = Eigen::MatrixXd::Zero(4, 5);
  h.values(1, 2) = 1;
  s = plot::gnuplot_script(h, "svg", "D", "O");
  CHECK(s.find("maxcolors 2") != std::string::npos);
  h.categories = {"not covered", "covered"};
  s = plot::gnuplot_script(h, "svg", "D", "O");
  CHECK(s.find("set cbtics (\"not covered\" 0, \"covered\" 1)") != std::string::npos);
  plot::LinePlot p;
  p.title = "T";
  p.series.push_back({"(a) attention-only", {0, 1, 2}, {0.9, 0.05, 0.05}});
  p.series.push_back({"(b) residual-aware", {0, 1, 2}, {0.3, 0.3, 0.4}});
  p.y_min = 0;
  p.y_max = 0.44;
  CHECK(plot::clipped_series(p) == std::vector<std::string>{"(a) attention-only"});
  CHECK(plot::gnuplot_script(p, "svg", "D", "O").find("(clipped: (a) attention-only)") != std::string::npos);
  p.y_max = 1.0;
  CHECK(plot::clipped_series(p).empty());
  CHECK(plot::gnuplot_script(p, "svg", "D", "O").find("clipped") == std::string::npos);
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
  const std::string d = fresh_dir("heat");
  h.values = Eigen::MatrixXd::Constant(4, 5, 7.0);
  h.categories.clear();
  plot::save(h, d + "/const.svg");  // draws (gnuplot refuses an empty colour range)
  CHECK(read_file(d + "/const.svg").find("<image") != std::string::npos);
}

TEST_CASE("plot (issue 29): legend inside or below, x range = data range, one '(log scale)', error bars, dashed bounds",
          "[core][plot]") {
  plot::LinePlot p;
  p.xlabel = "n";
  p.ylabel = "mass (log scale)";
  p.log_y = true;
  plot::Series a{"measured", {}, {}};
  for (int n = 1; n <= 256; ++n) a.x.push_back(n), a.y.push_back(1.0 / n);  // 256 points: a line, no markers
  p.series.push_back(a);
  std::string s = plot::gnuplot_script(p, "svg", "D", "O");
  CHECK(s.find("set xrange [1:256]") != std::string::npos);  // not extended to the next tick (300)
  CHECK(s.find("(log scale) (log scale)") == std::string::npos);
  CHECK(s.find("outside") == std::string::npos);
  CHECK(s.find("set key inside top right") != std::string::npos);
  for (int k = 0; k < 4; ++k) p.series.push_back(a);  // 5 curves: the legend goes below the frame
  CHECK(plot::gnuplot_script(p, "svg", "D", "O").find("set key below") != std::string::npos);
  plot::LinePlot q;
  q.ylabel = "p";
  plot::Series acc{"model A", {0, 1, 2, 3}, {0.2, 0.3, 0.4, 0.5}}, bound{"bound", {0, 1, 2, 3}, {1, 1, 1, 1}};
  acc.y_lo = {0.1, 0.2, 0.3, 0.4};
  acc.y_hi = {0.3, 0.4, 0.5, 0.6};
  bound.dashed = true;
  bound.colour = 0;
  q.series = {acc, bound};
  s = plot::gnuplot_script(q, "svg", "D", "O");
  CHECK(s.find("using 1:2:3:4 with yerrorlines") != std::string::npos);
  CHECK(s.find("with lines dt 2 lw 2 lc rgb '#1f77b4'") != std::string::npos);  // model A's colour
  CHECK(s.find("set xrange [-0.08999") != std::string::npos);                   // 3 % of 0..3 for the end markers
  CHECK(s.find(":3.08999") != std::string::npos);
  CHECK(s.find("(log scale)") == std::string::npos);
}

TEST_CASE("plot (issue 29): heat maps on real axes, one shared colour scale, a grey mask, stacked panels",
          "[core][plot]") {
  plot::Heatmap h;
  h.values = Eigen::MatrixXd::Zero(2, 3);  // all 0: would be a 0/1 category map without a fixed range
  h.x_labels = {"0", "50", "100"};
  h.y_labels = {"512", "1024"};
  h.cb_min = 0;
  h.cb_max = 1;
  std::string s = plot::gnuplot_script(h, "svg", "D", "O");
  CHECK(s.find("set xtics (\"0\" 0, \"50\" 1, \"100\" 2)") != std::string::npos);
  CHECK(s.find("set ytics (\"512\" 0, \"1024\" 1)") != std::string::npos);
  CHECK(s.find("set cbrange [0:1]") != std::string::npos);
  CHECK(s.find("maxcolors") == std::string::npos);
  CHECK(s.find("'#ffffcc'") != std::string::npos);  // the smallest value is light yellow, not white
  h.values(0, 1) = std::nan("");
  h.masked_label = "grey: s > d";
  s = plot::gnuplot_script(h, "svg", "D", "O");
  CHECK(s.find("fillcolor rgb '#9e9e9e'") != std::string::npos);
  CHECK(s.find("grey: s > d") != std::string::npos);
  plot::Panels pn;
  pn.title = "two";
  plot::LinePlot l1, l2;
  l1.series.push_back({"a", {0, 1}, {1, 2}});
  l2.series.push_back({"b", {0, 1}, {3, 4}});
  pn.panels = {l1, l2};
  s = plot::gnuplot_script(pn, "svg", "D", "O");
  CHECK(s.find("set multiplot layout 2,1") != std::string::npos);
  CHECK(s.find("index 1 using") != std::string::npos);  // the second panel reads the second block
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
  const std::string d = fresh_dir("panels");
  plot::save(pn, d + "/p.svg");
  plot::save(h, d + "/h.svg");
  CHECK(read_file(d + "/p.svg").find("Produced by GNUPLOT") != std::string::npos);
  CHECK(read_file(d + "/h.svg").find("grey: s > d") != std::string::npos);
}

TEST_CASE("progress: the line shows done/total, percent and an ETA, durations read naturally", "[core][progress]") {
  Progress p("capture", 4);
  p.advance(1);
  const std::string l = p.line();
  CHECK(l.rfind("capture: 1/4 (25%)", 0) == 0);
  CHECK(l.find("ETA") != std::string::npos);
  CHECK(format_duration(5) == "5s");
  CHECK(format_duration(125) == "2m05s");
  CHECK(format_duration(3723) == "1h02m03s");
  CHECK(format_duration(NAN) == "?");
}

TEST_CASE("threads: an explicit count is applied, the default is between 1 and the cores", "[core][threads]") {
  const ThreadChoice two = configure_threads(2);
  CHECK(two.threads == 2);
  CHECK(omp_get_max_threads() == 2);
  CHECK_FALSE(omp_get_dynamic());
  const ThreadChoice def = default_threads();
  CHECK(def.threads >= 1);
  CHECK(def.threads <= std::max(def.cores, def.threads));
  CHECK_THROWS_AS(configure_threads(-1), InvalidArgument);
  configure_threads(1);
}

TEST_CASE("output path: a read-only file is not replaced (exit 2 before the work), its bytes kept", "[core][io]") {
  const std::string d = fresh_dir("readonly");
  const std::string f = d + "/mine.json";
  write_file_atomic(f, "mine");
  REQUIRE(::chmod(f.c_str(), 0444) == 0);
  // root may write anything: the refusal reads the mode bits, not only access(2)
  CHECK_THROWS_AS(check_output_writable(f), InvalidArgument);
  CHECK_THROWS_WITH(write_file_atomic(f, "theirs"), Catch::Contains("read-only (mode 0444)"));
  CHECK_THROWS_AS(write_path_atomic(f, [](const std::string& tmp) { std::ofstream(tmp) << "theirs"; }),
                  InvalidArgument);
  CHECK_THROWS_AS(write_files_atomic({{d + "/other.bin", "o"}, {f, "theirs"}}), InvalidArgument);
  CHECK(read_file(f) == "mine");
  CHECK(access((d + "/other.bin").c_str(), F_OK) != 0);  // nothing of the product was committed
  CHECK(list_dir(d).size() == 1);
  REQUIRE(::chmod(f.c_str(), 0644) == 0);
  write_file_atomic(f, "theirs");
  CHECK(read_file(f) == "theirs");
}

TEST_CASE(
    "output path: a pipe behind /dev/fd (process substitution) and a FIFO with a reader are written through, "
    "a FIFO nobody reads is refused after a bounded wait, not a hang",
    "[core][io]") {
  // `--out >(cmd)`: the shell passes /dev/fd/N, a link to "pipe:[inode]" that names no file
  int p[2];
  REQUIRE(::pipe(p) == 0);
  std::string got;
  std::thread reader([&] {
    char buf[256];
    ssize_t k;
    while ((k = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(k));
  });
  write_file_atomic("/dev/fd/" + std::to_string(p[1]), "through the pipe");
  ::close(p[1]);
  reader.join();
  ::close(p[0]);
  CHECK(got == "through the pipe");

  const std::string d = fresh_dir("fifo");
  const std::string f = d + "/fifo";
  REQUIRE(::mkfifo(f.c_str(), 0600) == 0);
  std::string via_fifo;
  std::thread fifo_reader([&] {  // opens for reading (blocks until the writer opens), reads to EOF
    const int fd = ::open(f.c_str(), O_RDONLY);
    char buf[256];
    ssize_t k;
    while (fd >= 0 && (k = ::read(fd, buf, sizeof buf)) > 0) via_fifo.append(buf, static_cast<std::size_t>(k));
    if (fd >= 0) ::close(fd);
  });
  write_file_atomic(f, "through the fifo");
  fifo_reader.join();
  CHECK(via_fifo == "through the fifo");
  // no reader: refused (InvalidArgument: exit 2) naming the FIFO, after the 10 s wait
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(write_file_atomic(f, "nobody"), Catch::Contains("FIFO that no process reads"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  struct stat st;
  REQUIRE(::stat(f.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));  // never replaced by a regular file
}
