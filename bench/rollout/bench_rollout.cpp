// Benchmark of the rollout paths (issue 3, acceptance 3): BLOOM-176B preset (70 layers, 112
// heads), variant (b) (measured alpha, no content). Not a unit test; numbers go to
// docs/benchmarks/rollout.md. Usage: bench_rollout [max_dense_general=1024] [max_dense_cached=4096]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "cf/core/app.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

using namespace cf::rollout;

namespace {
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
// Best wall time of `reps` runs; `cpu` receives the process CPU time of that run (all threads):
// on a shared, loaded machine CPU time shows the cost without the waiting.
template <class F>
double best_of(int reps, F&& f, double& cpu) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (wall < best) best = wall, cpu = cpu_now() - c0;
  }
  return best;
}
}  // namespace

int report(long max_general, long max_cached);

// Command line: --help describes the benchmark; unknown options and bad sizes are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{"Benchmark of the rollout paths (BLOOM-176B preset, variant b); prints a Markdown table",
               "bench_rollout"};
  long max_general = 1024, max_cached = 4096;
  app.add_option("max_dense_general", max_general, "Largest n for the general dense path")
      ->check(CLI::Range(1L, 1L << 20))
      ->capture_default_str();
  app.add_option("max_dense_cached", max_cached, "Largest n for the cached dense path")
      ->check(CLI::Range(1L, 1L << 20))
      ->capture_default_str();
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(max_general, max_cached); });
  return code != 0 ? code : rc;
}

int report(long max_general, long max_cached) {
  const Preset p = load_preset("bloom");
  AlibiModel m;
  m.slopes = p.slopes;
  std::printf("BLOOM-176B preset, L = %d, H = %d, variant (b); best of 3 (1 for the slow cases)\n", p.layers, p.heads);
  std::printf("%10s %14s %12s %16s %16s %12s %12s\n", "n", "structured_s", "struct_cpu_s", "dense_general_s",
              "dense_cached_s", "gen/struct", "cached/struct");
  for (long n : {256L, 512L, 1024L, 2048L, 4096L, 8192L, 65536L, 1048576L}) {
    Eigen::VectorXd ps, pd;
    double cs = 0, cg = 0, cc = 0;
    const double ts = best_of(
        n >= 65536 ? 1 : 5, [&] { ps = rollout_last_row_alibi(m, p.alpha_measured, n); }, cs);
    double tg = -1, tc = -1;
    if (n <= max_general)
      tg = best_of(
          1, [&] { pd = rollout_last_row_alibi_dense(m, p.alpha_measured, n); }, cg);
    if (n <= max_cached && n <= kDenseMaxN)
      tc = best_of(
          1,
          [&] {
            // The content-free kernel is the same at every layer: build Abar once, then L products.
            const std::vector<RowMatrix> A{alibi_kernel_dense(m, 0, n)};
            pd = rollout_last_row_dense(A, p.alpha_measured);
          },
          cc);
    double err = pd.size() ? (ps - pd).cwiseAbs().maxCoeff() / pd.cwiseAbs().maxCoeff() : 0;
    std::printf("%10ld %14.5f %12.5f %16s %16s %12s %12s   rel.diff %.1e\n", n, ts, cs,
                tg < 0 ? "-" : std::to_string(tg).c_str(), tc < 0 ? "-" : std::to_string(tc).c_str(),
                tg < 0 ? "-" : std::to_string(tg / ts).c_str(), tc < 0 ? "-" : std::to_string(tc / ts).c_str(), err);
    std::fflush(stdout);
  }
  return 0;
}
