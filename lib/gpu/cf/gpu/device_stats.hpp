#pragma once
// Counters of the device back ends' allocation and host-synchronisation points (issue 31) and of
// the device trainer's GEMMs (issue 30: an analysis backward runs no weight-gradient GEMM), so that
// CI can check on the emulated build what the CUDA build does per training step: the device trainer
// (lib/gpu/src/trainer_body.hpp) and the operations it calls (ops_body.hpp) count at the same source
// lines in both builds. Process-wide per back end; tests read differences of snapshots. Counting is
// a relaxed atomic add at points that are rare (allocations) or few per step (host waits, GEMMs):
// no cost worth measuring when nobody reads the counters. Plain types only: safe for nvcc.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cf/gpu/context.hpp"

namespace cf::gpu {

/// What one back end has done since the process started.
struct DeviceStats {
  /// Buffers allocated where the kernels run (device memory; host memory in the emulated build):
  /// the trainer's buffers, resident masks, attention scratch, pinned staging, Thrust's temporary
  /// storage, and their bytes.
  std::uint64_t allocations = 0, bytes = 0;
  /// Points where the host waits for the device: a copy to the host, a Thrust call returning a
  /// value to the host, a blocking upload, a wait before reusing the staging buffer.
  std::uint64_t host_syncs = 0;
  /// Matrix products of the device trainer through its precision policy (precision_body.hpp): the
  /// linear layers' forward, input-gradient and weight-gradient GEMMs (the bias sums not counted).
  std::uint64_t gemms = 0;
};

namespace detail {
struct StatsCounters {
  std::atomic<std::uint64_t> allocations{0}, bytes{0}, host_syncs{0}, gemms{0};
};
inline StatsCounters g_device_stats[2];
inline StatsCounters& stats_of(Backend b) { return g_device_stats[b == Backend::Cuda ? 1 : 0]; }
}  // namespace detail

/// A snapshot of back end b's counters.
inline DeviceStats device_stats(Backend b) {
  const detail::StatsCounters& c = detail::stats_of(b);
  return DeviceStats{c.allocations.load(std::memory_order_relaxed), c.bytes.load(std::memory_order_relaxed),
                     c.host_syncs.load(std::memory_order_relaxed), c.gemms.load(std::memory_order_relaxed)};
}

/// Called by back end b's allocation points.
inline void count_allocation(Backend b, std::size_t bytes) {
  detail::StatsCounters& c = detail::stats_of(b);
  c.allocations.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

/// Called where back end b's host waits for the device.
inline void count_host_sync(Backend b) { detail::stats_of(b).host_syncs.fetch_add(1, std::memory_order_relaxed); }

/// Called by back end b's device trainer per GEMM.
inline void count_gemm(Backend b) { detail::stats_of(b).gemms.fetch_add(1, std::memory_order_relaxed); }

}  // namespace cf::gpu
