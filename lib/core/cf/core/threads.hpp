#pragma once
// Thread policy shared by every tool (`--threads N`, docs/conventions.md "Threads"). OpenMP (libgomp)
// and OpenBLAS each keep a pool whose idle threads busy-wait; on a machine whose cores are taken by
// other processes, a pool sized to the core count collapses (30 training steps: 33 s with the
// core-count default against 0.6 s with one thread, issue 9). The default therefore counts the
// cores that are free NOW: the runnable tasks of the whole machine are sampled from /proc and the
// pool gets max(1, cores - other runnable tasks) threads. An explicit --threads N is used as given.
#include <string>

namespace cf {

/// Resolved thread count and how it was chosen.
struct ThreadChoice {
  int threads = 1;               ///< OpenMP and OpenBLAS threads in use
  int cores = 1;                 ///< online processors (omp_get_num_procs)
  double busy_others = 0;        ///< mean runnable tasks of other processes seen when measuring (default only)
  bool measured = false;         ///< true for the default (requested == 0)
  std::string describe() const;  ///< e.g. "1 (default: 2 cores, 2.0 busy)"
};

/// The default for `requested == 0`: cores minus other runnable tasks (sampled a few times over
/// ~20 ms from /proc/loadavg's running count), at least 1. Honours OMP_NUM_THREADS when set.
ThreadChoice default_threads();

/// Apply the policy: `requested` > 0 sets exactly that many OpenMP and OpenBLAS threads; 0 uses
/// default_threads(). Dynamic adjustment is switched off so results are reproducible per count.
/// Throws cf::InvalidArgument for requested < 0.
ThreadChoice configure_threads(int requested);

}  // namespace cf
