#pragma once
// The report of the `coverage` tool (Boundary repair (Yang); docs/coverage.md): score accounting, the coverage
// map C(d, r), closure sizes, coverage comparison (Prop. 4), runway counts (Runway (Lee & Clark) Def. 3.1),
// probe bounds (Prop. 3, Theorem 2), accuracy diagnostics (Eq. 33) and brute-force verification,
// each as a table plus a JSON section. The app only parses options into a CoverageRequest.
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "cf/core/output.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/graph/coverage.hpp"
#include "cf/graph/mask.hpp"
#include "cf/graph/schedule.hpp"

namespace cf::graph {

/// Everything one coverage report is computed from (already parsed; checked by coverage_report).
struct CoverageRequest {
  Pattern main;                    ///< the pattern analysed (b, w, e resolved)
  std::optional<Pattern> compare;  ///< second pattern (Prop. 4), same b, w, e
  Schedule schedule;               ///< per-layer patterns; empty = single layer
  Index n = 1024;                  ///< sequence length, 1 <= n <= 2^26 in the tool
  std::string fusion = "branch";   ///< headline accounting: "branch" | "union"
  bool closure_map = false;        ///< coverage map from the L-layer closure (needs a schedule)
  std::optional<Index> block;      ///< target block J of the closure map [default: last full block]
  Index d_max = 256;               ///< largest distance of the coverage map, >= 0
  /// The plot's d range follows the closure's reach (closure maps only; the tool sets it when
  /// --d-max is not given): a 32-layer SWA closure reaches d = 4064, far beyond the default
  /// d_max = 2b, whose map would be one solid square. The report keeps d_max.
  bool plot_range_from_reach = false;
  std::optional<std::pair<Index, Index>> runway;  ///< (s, d) of a runway count, 0 <= s < d < n
  std::optional<ProbeSet> probes;                 ///< probe distribution (Prop. 3 bounds, needs K >= 2)
  std::string probes_source;                      ///< file name, for the report
  int K = 0;                                      ///< classes of the K-way copy probes
  std::map<std::string, double> accuracy;         ///< keys model, block (required), swa; values in [0, 1]
  bool verify = false;                            ///< brute-force checks of closed forms, closure and scores
};

/// A finished report plus what the tool draws and whether verification failed.
struct CoverageOutcome {
  output::Report report;
  CoverageMatrix map;  ///< C(d, r), rows d = 0..d_max, columns r = 0..b-1
  /// What the plot draws: `map`, or with plot_range_from_reach the closure map over d = 0 .. a
  /// little past the reach (the largest t - u over the block's targets), at most J b.
  CoverageMatrix plot_map;
  Index reach = -1;                           ///< that reach (-1 when not computed)
  std::string map_title;                      ///< plot title of the map
  std::optional<CoverageMatrix> compare_map;  ///< C(d, r) of the --compare pattern (closed form), if any
  bool verify_failed = false;
};

/// Largest coverage matrix the tool prints or serialises, (d_max + 1) * b entries.
constexpr Index kMaxCoverageEntries = Index(1) << 22;

/// Compute every section of the report. Throws cf::InvalidArgument on inconsistent input (the
/// message names the option: --d-max, --block, --K, ...).
CoverageOutcome coverage_report(const CoverageRequest& req);

/// Parse --accuracy "model=A,block=A[,swa=A]" (values finite, in [0, 1]; model and block required).
std::map<std::string, double> parse_accuracy(const std::string& text);

/// Parse --runways "s,d" (two whole numbers, 0 <= s < d < n is checked by coverage_report).
std::pair<Index, Index> parse_runway(const std::string& text);

/// Dense 0/1 mask as CSV, row = target t, column = source s (what numpy.loadtxt reads); n <= 4096.
std::string dense_mask_csv(const Mask& m);

}  // namespace cf::graph
