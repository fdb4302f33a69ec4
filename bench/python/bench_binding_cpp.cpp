// The C++ side of the Python binding overhead benchmark (bench/python/bench_bindings.py): the
// library calls that causalflow.graph.coverage_map, causalflow.graph.closure_sizes and
// causalflow.rollout.rollout make, with the same arguments, timed as the median of `reps` calls
// (wall clock). Prints one JSON line per case. Not a unit test.
// Usage: bench_binding_cpp CASE REPS, CASE = coverage_map | closure_sizes | rollout
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "cf/graph/coverage.hpp"
#include "cf/graph/mask.hpp"
#include "cf/graph/reachability.hpp"
#include "cf/graph/schedule.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/variants.hpp"

namespace {

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Median wall time of `reps` calls; `cpu` receives the median process CPU time (all threads): on a
// shared, loaded machine CPU time shows the cost without the waiting.
template <class F>
double median_seconds(int reps, double& cpu, F&& f) {
  std::vector<double> t, c;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    c.push_back(cpu_now() - c0);
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  cpu = c[c.size() / 2];
  return t[t.size() / 2];
}

volatile double g_sink = 0;  // keeps results observable

}  // namespace

int main(int argc, char** argv) {
  using namespace cf;
  const char* usage = "usage: bench_binding_cpp coverage_map|closure_sizes|rollout REPS\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      return 0;
    }
    if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "bench_binding_cpp: unknown option '%s'\n%s", a.c_str(), usage);
      return 2;
    }
  }
  if (argc != 3) {
    std::fprintf(stderr, "%s", usage);
    return 2;
  }
  const std::string what = argv[1];
  const int reps = std::atoi(argv[2]);
  if (reps < 1) {
    std::fprintf(stderr, "bench_binding_cpp: REPS must be >= 1\n");
    return 2;
  }
  double s = 0, cpu = 0;
  std::size_t bytes = 0;
  if (what == "coverage_map") {
    // causalflow.graph.coverage_map(Pattern("se-bridge", b=128)): the map of the n = 1,024 geometry
    graph::Pattern p;
    p.kind = graph::PatternKind::SeBridge, p.b = 128, p.w = 128, p.e = 64;
    s = median_seconds(reps, cpu, [&] {
      graph::validate(p, 1);
      const auto C = graph::coverage_matrix_closed_form(p, 2 * p.b);
      g_sink = g_sink + C(0, 0);
      bytes = C.size();
    });
  } else if (what == "closure_sizes") {
    // causalflow.graph.closure_sizes("swa", 262144, layers=4, b=128): 2 MiB of int64
    graph::Pattern p;
    p.kind = graph::PatternKind::Swa, p.b = 128, p.w = 128, p.e = 64;
    s = median_seconds(reps, cpu, [&] {
      const auto sizes = graph::closure_sizes(graph::closure(graph::uniform_schedule(p, 4), 262144));
      g_sink = g_sink + sizes.back();
      bytes = sizes.size() * sizeof(sizes[0]);
    });
  } else if (what == "rollout") {
    // causalflow.rollout.rollout(model="bloom", n=65536): BLOOM-176B, three variants of 65,536
    rollout::SourceOptions o;
    o.n = 65536;
    s = median_seconds(reps, cpu, [&] {
      const auto src = rollout::make_source(o, 256);
      const auto vs = rollout::rollout_variants(src, src.n, false);
      g_sink = g_sink + vs[1].p(0);
      bytes = 0;
      for (const auto& v : vs) bytes += v.p.size() * sizeof(double);
    });
  } else {
    std::fprintf(stderr, "bench_binding_cpp: unknown case '%s'\n", what.c_str());
    return 2;
  }
  std::printf("{\"case\": \"%s\", \"reps\": %d, \"median_s\": %.9g, \"median_cpu_s\": %.9g, \"result_bytes\": %zu}\n",
              what.c_str(), reps, s, cpu, bytes);
  return 0;
}
