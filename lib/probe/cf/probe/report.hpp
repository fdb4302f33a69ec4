#pragma once
// The `probe` tool's work (issue 11, docs/probe.md): evaluate one or two checkpoints on a task
// file's validation rows and build the report (tables, JSON body, plots), plus the paired
// comparison of two checkpoints on the same items.
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/output.hpp"
#include "cf/probe/evaluate.hpp"
#include "cf/probe/stats.hpp"

namespace cf::probe {

/// Options of `probe TASK`.
struct ProbeOptions {
  std::string task;                      ///< boundary-copy | passkey | ranking
  std::string data;                      ///< task file prefix (prepare-data --task)
  std::vector<std::string> checkpoints;  ///< one or two
  double alpha = 0.05;                   ///< family-wise level of the bound test (Bonferroni over phases)
  int batch = 32;                        ///< rows per forward pass
  int max_rows = 0;                      ///< 0 = all validation rows
  int resamples = 2000;                  ///< paired bootstrap resamples
  double level = 0.95;                   ///< bootstrap interval level
  std::uint64_t boot_seed = 1;
  int max_new = 8;     ///< passkey: greedy tokens decoded
  std::string plot;    ///< "" | FILE.svg | FILE.png (a second figure gets a suffix)
  bool quiet = false;  ///< no progress lines
  /// How each checkpoint is read: empty = its float32 host model (load_probe_model); apps/probe
  /// reads only config.json of a Hugging Face directory the device keeps in its stored dtype.
  LoadModel load;
  /// Where each checkpoint's forward passes run: empty = the CPU; apps/probe sets the device
  /// analysis model's for --device cuda|auto (docs/gpu.md). Built for every checkpoint before the
  /// first is evaluated, so a refusal comes before any work.
  MakeForward forward;
};

/// Result of a paired comparison of per-item 0/1 outcomes (first minus second).
struct PairedResult {
  std::int64_t n = 0;
  double acc_a = 0, acc_b = 0;
  McNemarResult mcnemar;
  BootstrapCi ci;
};

/// McNemar + paired bootstrap on two outcome lists of the same items.
PairedResult paired_compare(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, int resamples,
                            double level, std::uint64_t seed);

/// Run the probe and return the report. Throws cf::InvalidArgument for bad input (K < 2 in the
/// task, a context above a model's block size, an unreadable checkpoint or mask, two checkpoints
/// with different vocabularies for a paired comparison, a task file of another task).
output::Report run_probe(const ProbeOptions& o);

/// The range checks run_probe starts with (one or two checkpoints, --alpha and --level in (0, 1),
/// --resamples, --batch, --max-rows): the probe tool names a bad value before an option the task
/// ignores. Throws cf::InvalidArgument naming the option.
void check_probe_options(const ProbeOptions& o);

}  // namespace cf::probe
