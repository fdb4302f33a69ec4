#pragma once
// Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers") on exactly
// the residual-mixed kernels of rollout variant (b) (Position bias (Herasimchyk et al.), Eqs. 1-3):
//   R_l = (1 - alpha_l) I + alpha_l Abar(l),  l = 1..L   (alpha_l = 0.5 gives the original paper's
//   0.5 A + 0.5 I).
// Layered graph convention (docs/rollout.md, "Attention flow"): nodes (l, i) for layers l = 0..L
// and positions i = 0..n-1; an edge (l-1, j) -> (l, i) for every j <= i with R_l[i, j] > 0 and
// capacity R_l[i, j]. The flow of input position j to target position t is the maximum flow from
// the source (0, j) to the sink (L, t) (t = n - 1 by default: the next-token position).
// Max-flow by a solver specialised to the layered DAG (default; Dinic's algorithm whose first level
// graph is the graph itself, searched lazily: cf/rollout/detail/flow_layered.hpp), or by
// Boost.Graph (push-relabel, Boykov-Kolmogorov) on a graph pruned to the nodes that lie on some
// source-sink path, one graph per source. Sources in parallel (OpenMP). docs/rollout.md
// "Attention flow" records the measurements behind the default.
#include <Eigen/Dense>
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

/// R_l = (1 - alpha_l) I + alpha_l kernels[l] for l = 0..L-1 (kernels.size() == alpha.size() == L,
/// or one kernel used at every layer); every kernel n x n, alpha_l in [0, 1]. Throws
/// cf::InvalidArgument on a shape mismatch or alpha outside [0, 1].
std::vector<RowMatrix> residual_mixed_kernels(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha);

/// Max-flow solver (docs/rollout.md reports the measurements that picked the default).
enum class FlowAlgorithm {
  Layered,          ///< Dinic specialised to the layered DAG, lazy first blocking flow ("layered", default)
  PushRelabel,      ///< Boost's push-relabel, phase 1 (maximum preflow) only ("push-relabel": the
                    ///< faster Boost solver, 3-5x faster than BK on ALiBi kernels)
  BoykovKolmogorov  ///< boost::boykov_kolmogorov_max_flow ("bk")
};

/// The solvers' names, in the order rollout flow --help lists them.
inline constexpr EnumTable kFlowAlgorithms{std::array{
    EnumEntry<FlowAlgorithm>{FlowAlgorithm::Layered, "layered"},
    EnumEntry<FlowAlgorithm>{FlowAlgorithm::PushRelabel, "push-relabel"},
    EnumEntry<FlowAlgorithm>{FlowAlgorithm::BoykovKolmogorov, "bk"},
}};

/// "layered" | "push-relabel" | "bk"; throws cf::InvalidArgument naming `option` otherwise.
FlowAlgorithm parse_flow_algorithm(const std::string& name, const std::string& option = "--algorithm");
/// "layered" | "push-relabel" | "bk".
std::string flow_algorithm_name(FlowAlgorithm a);

/// One maximum flow from (0, source) to (L, target).
struct SingleFlow {
  double value = 0;         ///< the maximum flow value
  double cut_capacity = 0;  ///< capacity of the certificate cut (see source_side)
  long nodes = 0;  ///< nodes of the graph solved (source and sink included): pruned (Boost) or positions >= j (layered)
  long edges = 0;  ///< its edges (reverse arcs not counted)
  long phases = 0;                ///< layered solver: blocking flows (Dinic phases)
  std::int64_t arcs_scanned = 0;  ///< layered solver: arc inspections (searches and advances)
  /// Certificate (filled when asked): source_side[l][i] = 1 when node (l, i) lies on the source
  /// side S of a minimum cut: the nodes that cannot reach the sink in the final residual graph
  /// (Boost solvers; the layered solver uses this form or S = the nodes the source reaches,
  /// whichever of its two searches closed first), including every node that cannot reach the sink
  /// at all (dead ends: adding them to S cuts no edge, so the cut of S in the FULL layered graph is
  /// the cut in the graph solved). L + 1 rows of n.
  std::vector<std::vector<char>> source_side;
};

/// Maximum flow from (0, source) to (L, target) on the layered graph of R (L matrices n x n,
/// non-negative, finite; entries above the diagonal are ignored: causal). 0 <= source <= target < n
/// (a source after the target has flow 0 and is refused here). With `certificate`, source_side is
/// filled and cut_capacity = the sum of R over the edges leaving S (equal to value up to round-off).
SingleFlow max_flow_single(const std::vector<RowMatrix>& R, long source, long target,
                           FlowAlgorithm algorithm = FlowAlgorithm::Layered, bool certificate = false);

/// Options of attention_flow.
struct FlowOptions {
  long target = -1;  ///< sink position t in [0, n); -1 = n - 1
  FlowAlgorithm algorithm = FlowAlgorithm::Layered;
  bool certificate = true;    ///< compute each source's min-cut capacity (a residual search; cheap)
  std::vector<long> sources;  ///< sources to compute (each in [0, t]); empty = all of 0..t
};

/// Flows of every source to one target.
struct FlowResult {
  long target = 0;
  Eigen::VectorXd flow;               ///< n raw max-flow values; 0 for positions after the target (and skipped sources)
  Eigen::VectorXd profile;            ///< flow / sum(flow) (all zero if the sum is 0)
  Eigen::VectorXd cut;                ///< n min-cut capacities (certificate; NaN where not computed)
  double max_cut_gap = 0;             ///< max over sources of |cut - flow| / max(flow, 1e-300) (certificate)
  long max_nodes = 0, max_edges = 0;  ///< largest graph solved (SingleFlow::nodes, edges)
  long max_phases = 0;                ///< layered solver: most Dinic phases of one source
  std::int64_t arcs_scanned = 0;      ///< layered solver: arc inspections over all sources
  double seconds = 0;                 ///< wall time
};

/// Max-flow from each source (0, j) to (L, t) (FlowOptions), sources in parallel (OpenMP, largest
/// graphs first). R as in max_flow_single. Throws cf::InvalidArgument for a bad target/source,
/// ragged or non-square kernels, negative or non-finite entries.
FlowResult attention_flow(const std::vector<RowMatrix>& R, const FlowOptions& options = {});

/// Flow matrix for all targets: F[t, j] = max-flow from (0, j) to (L, t) for j <= t, 0 above the
/// diagonal; n (n + 1) / 2 max-flows (parallel). n <= 512 (O(L n^5) work in the worst case).
RowMatrix attention_flow_matrix(const std::vector<RowMatrix>& R, FlowAlgorithm algorithm = FlowAlgorithm::Layered);

/// Upper bound on the flow of source j to target t that holds for every layered graph: the
/// smaller of the two trivial cuts, the source's out-capacity sum_{i in [j, t]} R_1[i, j] (L > 1;
/// R_1[t, j] when L = 1) and the sink's in-capacity from reachable nodes sum_{k in [j, t]} R_L[t, k]
/// (<= 1 for row-stochastic R). Used by tests and as a check in reports.
double flow_upper_bound(const std::vector<RowMatrix>& R, long source, long target);

}  // namespace cf::rollout
