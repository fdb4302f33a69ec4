// Boundary repair (Yang) §3.5-3.6 (Eqs. 18, 22-24): coverage maps C(d, r) of Block, SWA, PBB and SE-Bridge at
// b = w = 128, e = 64, d = 0..256, written as SVG heat maps to the folder given as argument
// (default: results/). Should print the reachable-phase fraction at d = 64, 128, 192:
//   block 0.5 0 0 | swa 1 0 0 | pbb 1 0 0 | se-bridge 1 0.5 0 (Prop. 1; Eqs. 22-24).
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "cf/core/app.hpp"
#include "cf/core/plot.hpp"
#include "cf/graph/coverage.hpp"

using namespace cf::graph;

int report(const std::string& dir);

// Command line: --help describes the report; unknown options are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{"Notebook: Boundary repair (Yang) coverage maps of block, SWA, PBB and SE-Bridge as SVG heat maps",
               "nb_boundary_02_coverage_maps"};
  std::string dir = "results";
  app.add_option("dir", dir, "Folder for the SVG maps (created if needed)")->capture_default_str();
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(dir); });
  return code != 0 ? code : rc;
}

int report(const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  for (PatternKind k : {PatternKind::Block, PatternKind::Swa, PatternKind::Pbb, PatternKind::SeBridge}) {
    Pattern p;
    p.kind = k;
    const CoverageMatrix C = coverage_matrix_closed_form(p, 256);
    const auto f = phase_fraction(C);
    std::printf("%-10s fraction at d=64: %.3g  d=128: %.3g  d=192: %.3g\n", pattern_name(k).c_str(), f[64], f[128],
                f[192]);
    cf::plot::Heatmap h;
    h.title = "Coverage C(d, r): " + describe(p);
    h.xlabel = "target phase r";
    h.ylabel = "backward distance d";
    h.value_label = "covered";
    h.values = C.cast<double>();
    h.y_up = true;
    cf::plot::save(h, dir + "/coverage_" + pattern_name(k) + ".svg");
  }
  return 0;
}
