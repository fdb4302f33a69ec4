// Boundary repair (Yang) (boundary repair), Table 2 and §6.9: attention-score accounting per head.
// Should print, at n = 1024, b = w = 128, e = 64 (branch accounting):
//   Block 66,048 | SWA 122,944 | Bridge 123,840 | PBB 123,840 | SE-Bridge 195,744 | Full 524,800
//   write-back: Bridge 896, PBB 448, SE 448; SE / SWA = 1.59x
// and at n = 8192 (union accounting): SWA 1,040,448; PBB 786,432; Full 33,558,528;
//   3:1 PBB+Full 35,917,824; 3:1 SWA+Full 36,679,872.
// The same numbers are asserted in tests/graph/test_scores.cpp.
#include <cstdio>

#include "cf/core/app.hpp"
#include "cf/graph/scores.hpp"

using namespace cf::graph;

int report() {
  Pattern base;  // b = w = 128, e = 64
  std::printf("Boundary repair (Yang) Table 2: attention scores per head, n = 1024, b = w = 128, e = 64\n\n");
  std::printf("| pattern | branch scores | x SWA | x Full | write-back |\n|---|---|---|---|---|\n");
  const double swa = double(scores_branch({[&] {
                                             Pattern p = base;
                                             p.kind = PatternKind::Swa;
                                             return p;
                                           }(),
                                           1024}));
  for (PatternKind k : {PatternKind::Block, PatternKind::Swa, PatternKind::Bridge, PatternKind::Pbb,
                        PatternKind::SeBridge, PatternKind::Full}) {
    Pattern p = base;
    p.kind = k;
    const Mask m = make_mask(p, 1024);
    std::printf("| %s | %lld | %.2fx | %.3fx | %lld |\n", describe(p).c_str(), (long long)scores_branch(m),
                scores_branch(m) / swa, scores_branch(m) / 524800.0, (long long)write_back(m));
  }
  std::printf("\nBoundary repair (Yang) §6.9: unique edges (union accounting), n = 8192, b = 128, h = 64\n\n");
  std::printf("| mask | union scores |\n|---|---|\n");
  for (const char* s : {"swa", "pbb", "full", "pbb,pbb,pbb,full", "swa,swa,swa,full"}) {
    const Schedule sc = parse_schedule(s, base);
    std::printf("| %s | %lld |\n", s, (long long)scores_schedule(sc, 8192).unions);
  }
  return 0;
}

// Command line: --help describes the report; unknown options and arguments are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{"Notebook: Boundary repair (Yang) Table 2 attention-score accounting", "nb_boundary_01_table2_scores"};
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(); });
  return code != 0 ? code : rc;
}
