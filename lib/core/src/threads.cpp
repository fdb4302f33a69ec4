#include "cf/core/threads.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "cf/core/error.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace cf {
namespace {

// Runnable scheduling entities of the whole machine, this thread included (/proc/loadavg field 4,
// "running/total"); -1 if unavailable.
int runnable_now() {
  std::ifstream f("/proc/loadavg");
  double a, b, c;
  int running = -1, total = 0;
  char slash;
  if (f >> a >> b >> c >> running >> slash >> total) return running;
  return -1;
}

}  // namespace

std::string ThreadChoice::describe() const {
  char buf[96];
  if (measured)
    std::snprintf(buf, sizeof buf, "%d (default: %d cores, %.1f busy with other work)", threads, cores, busy_others);
  else
    std::snprintf(buf, sizeof buf, "%d (--threads)", threads);
  return buf;
}

ThreadChoice default_threads() {
  ThreadChoice c;
  c.measured = true;
  c.cores = std::max(1, omp_get_num_procs());
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) {
      c.threads = n;
      c.measured = false;
      return c;
    }
  }
  constexpr int kSamples = 4;
  double sum = 0;
  int got = 0;
  for (int i = 0; i < kSamples; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int r = runnable_now();
    if (r >= 1) sum += r - 1, ++got;  // minus this thread
  }
  c.busy_others = got ? sum / got : 0.0;
  c.threads = std::max(1, std::min(c.cores, c.cores - static_cast<int>(std::lround(c.busy_others))));
  return c;
}

ThreadChoice configure_threads(int requested) {
  require(requested >= 0, "--threads must be >= 0 (0 = default), got ", requested);
  ThreadChoice c;
  if (requested == 0) {
    c = default_threads();
  } else {
    c.threads = requested;
    c.cores = std::max(1, omp_get_num_procs());
  }
  omp_set_dynamic(0);
  omp_set_num_threads(c.threads);
  openblas_set_num_threads(c.threads);
  return c;
}

}  // namespace cf
