// Benchmark of attention flow (issue 34, acceptance 2): max-flow from input positions to the last
// position on the layered graph of R_l = 0.5 I + 0.5 Abar(l) (Abnar & Zuidema's mixing), Abar(l)
// the head mean of 12 content-free causal ALiBi heads (slopes 2^(-8h/12)), L layers, n positions.
// Times both Boost.Graph solvers on the same sources. Not a unit test; numbers and the networkx side
// (bench/rollout/flow_networkx_bench.py runs this program and networkx in the same run) go to
// docs/benchmarks.md, "Attention flow".
// Usage: bench_flow N L SAMPLES [ALGORITHMS=bk,push-relabel] [KERNELS_OUT] [FLOWS_OUT]
//   SAMPLES = 0: every source 0..N-1; K > 0: the K evenly spaced sources j = floor(k N / K).
//   KERNELS_OUT: R written as L*N rows of N numbers (17 digits); FLOWS_OUT: "j flow" per source.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/rollout/flow.hpp"
#include "cf/rollout/kernel.hpp"

using namespace cf::rollout;

namespace {
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
}  // namespace

int report(long n, int L, long samples, const std::string& algs, const std::string& kernels_out,
           const std::string& flows_out);

// Command line: --help describes the benchmark; unknown options and bad sizes are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{
      "Benchmark of attention flow (max-flow from input positions to the last one on the layered graph "
      "of 0.5 I + 0.5 x a 12-head ALiBi mean kernel), both Boost.Graph solvers",
      "bench_flow"};
  long n = 256, samples = 0;
  int L = 12;
  std::string algs = "layered,bk,push-relabel", kernels_out, flows_out;
  app.add_option("n", n, "Positions n")->check(CLI::Range(2L, 8192L))->capture_default_str();
  app.add_option("layers", L, "Layers L")->check(CLI::Range(1, 96))->capture_default_str();
  app.add_option("samples", samples, "0 = every source; K = the K evenly spaced sources floor(k n / K)")
      ->check(CLI::Range(0L, 8192L))
      ->capture_default_str();
  app.add_option("algorithms", algs, "Comma list of solvers: layered, bk, push-relabel")->capture_default_str();
  app.add_option("kernels_out", kernels_out, "Write R as L*n rows of n numbers (17 digits)");
  app.add_option("flows_out", flows_out, "Write 'j flow' per computed source (the first solver's flows)");
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] {
    cf::require(samples <= n, "samples: at most n = ", n, " sources, got ", samples);
    std::size_t start = 0;
    while (start <= algs.size()) {  // every item names a solver (parse_flow_algorithm throws otherwise)
      const std::size_t comma = std::min(algs.find(',', start), algs.size());
      parse_flow_algorithm(algs.substr(start, comma - start), "algorithms");
      start = comma + 1;
    }
    rc = report(n, L, samples, algs, kernels_out, flows_out);
  });
  return code != 0 ? code : rc;
}

int report(long n, int L, long samples, const std::string& algs, const std::string& kernels_out,
           const std::string& flows_out) {
  AlibiModel m;
  m.slopes = alibi_slopes_simple(12);
  std::vector<RowMatrix> ks(1, alibi_kernel_dense(m, 0, n));  // the same kernel at every layer
  const std::vector<RowMatrix> R = residual_mixed_kernels(ks, Eigen::VectorXd::Constant(L, 0.5));
  if (!kernels_out.empty()) {
    std::ofstream f(kernels_out);
    f.precision(17);
    for (const auto& M : R)
      for (long i = 0; i < n; ++i)
        for (long j = 0; j < n; ++j) f << M(i, j) << (j + 1 < n ? ' ' : '\n');
  }
  FlowOptions o;
  if (samples > 0)
    for (long k = 0; k < samples; ++k) o.sources.push_back(k * n / samples);
  std::printf("attention flow: n = %ld, L = %d, %s sources, R = 0.5 I + 0.5 (12-head ALiBi mean)\n", n, L,
              samples ? std::to_string(samples).c_str() : "all");
  std::printf("%-14s %10s %10s %12s %12s %10s %8s %14s\n", "algorithm", "wall s", "cpu s", "edges(max)", "gap(max)",
              "flow(0)", "phases", "arcs scanned");
  FlowResult first;
  bool have = false;
  for (const std::string a : {"layered", "bk", "push-relabel"}) {
    if (algs.find(a) == std::string::npos) continue;
    o.algorithm = parse_flow_algorithm(a);
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    const FlowResult fr = attention_flow(R, o);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-14s %10.4f %10.4f %12ld %12.2e %10.6f %8ld %14lld\n", a.c_str(), wall, cpu_now() - c0, fr.max_edges,
                fr.max_cut_gap, fr.flow(0), fr.max_phases, static_cast<long long>(fr.arcs_scanned));
    if (have) {
      double d = 0;
      for (long j = 0; j < n; ++j)
        d = std::max(d, std::abs(fr.flow(j) - first.flow(j)) / std::max(first.flow(j), 1e-300));
      std::printf("  max relative difference to the first solver: %.2e\n", d);
    } else {
      first = fr;
      have = true;
    }
  }
  if (!flows_out.empty() && have) {
    std::ofstream f(flows_out);
    f.precision(17);
    const std::vector<long>& src = o.sources;
    for (long j = 0; j < n; ++j)
      if (src.empty() || std::find(src.begin(), src.end(), j) != src.end()) f << j << ' ' << first.flow(j) << '\n';
  }
  return 0;
}
