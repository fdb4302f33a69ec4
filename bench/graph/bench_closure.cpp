// Benchmark: structural dependency closure R_L(t) (issue 2 target: n = 65,536, 32 layers of
// SWA(128) or PBB(128) in under 5 s on 2 cores). Side by side: the library's interval closure and
// a plain bitset closure (n x n bits, word-parallel OR over every edge) at the same sizes.
// Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build/bench/bin/bench_closure
#include <chrono>
#include <cstdio>
#include <vector>

#include "cf/core/app.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/graph/reachability.hpp"

using namespace cf::graph;
using Clock = std::chrono::steady_clock;

// Baseline: dense bitset rows, R_{l+1}(t) = R_l(t) | OR_{s in sources(t)} R_l(s).
static std::vector<std::uint64_t> bitset_closure(const Schedule& s, Index n) {
  const Index W = (n + 63) / 64;
  std::vector<std::uint64_t> R(n * W, 0), next;
  for (Index t = 0; t < n; ++t) R[t * W + t / 64] |= std::uint64_t(1) << (t % 64);
  for (const auto& p : s.layers) {
    const Mask m{p, n};
    next = R;
    cf::OmpExceptions omp_errors;  // exceptions never leave the region (cf/core/omp_exception.hpp)
#pragma omp parallel for schedule(dynamic, 64)
    for (Index t = 0; t < n; ++t)
      omp_errors.run([&] {
        for (const auto& iv : sources(m, t))
          for (Index src = iv.lo; src <= iv.hi; ++src)
            for (Index k = 0; k <= t / 64; ++k) next[t * W + k] |= R[src * W + k];
      });
    omp_errors.rethrow();
    R.swap(next);
  }
  return R;
}

template <class F>
static double seconds(F&& f, int reps = 3) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

int report() {
  std::printf("| pattern | n | L | interval closure (s) | bitset closure (s) | ratio | max |R_L(t)| |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (PatternKind k : {PatternKind::Swa, PatternKind::Pbb}) {
    Pattern p;
    p.kind = k;
    p.b = 128;
    p.w = 128;
    for (Index n : {Index(4096), Index(8192), Index(65536)}) {
      const Schedule s = uniform_schedule(p, 32);
      Index maxsize = 0;
      const double ti = seconds([&] {
        const Closure c = closure(s, n);
        maxsize = 0;
        for (Index t = 0; t < n; ++t) maxsize = std::max(maxsize, c.size(t));
      });
      double tb = -1;
      if (n <= 65536)
        tb = seconds(
            [&] {
              volatile auto r = bitset_closure(s, n).size();
              (void)r;
            },
            1);
      if (tb > 0)
        std::printf("| %s | %lld | 32 | %.4f | %.3f | %.0fx | %lld |\n", describe(p).c_str(), (long long)n, ti, tb,
                    tb / ti, (long long)maxsize);
      else
        std::printf("| %s | %lld | 32 | %.4f | (n^2 bits: not run) | - | %lld |\n", describe(p).c_str(), (long long)n,
                    ti, (long long)maxsize);
      std::fflush(stdout);
    }
  }
  return 0;
}

// Command line: --help describes the report; unknown options and arguments are refused (exit 2).
int main(int argc, char** argv) {
  CLI::App app{"Benchmark: structural dependency closure R_L(t), interval closure vs bitset closure", "bench_closure"};
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] { rc = report(); });
  return code != 0 ? code : rc;
}
