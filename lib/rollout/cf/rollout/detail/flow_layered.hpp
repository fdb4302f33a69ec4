#pragma once
// Max-flow specialised to the layered causal graph of attention flow (cf/rollout/flow.hpp,
// FlowAlgorithm::Layered; docs/rollout.md "Attention flow"). Internal to lib/rollout.
//
// Every source-sink path of the layered graph has exactly L edges, so the first level graph of
// Dinic's algorithm is the graph itself: the first blocking flow needs no breadth-first search
// and, found by depth-first search with current-arc pointers, touches only the arcs it tries (a
// node's out-arcs are one contiguous column of a packed triangle). Further phases (residual BFS
// + blocking flow) run only while the sink is still reachable in the residual graph; the last
// search's reachable set is the min-cut certificate. Residual capacities live in a per-solver
// copy of the capacities (one array read per arc inspection); only touched arcs are reset between
// sources.
#include <cstdint>
#include <vector>

#include "cf/rollout/flow.hpp"

namespace cf::rollout::detail {

using NodeSet = std::vector<std::vector<char>>;  // [layer][position]

/// alive[l][i] = node (l, i) can reach the sink (L, t) (layer L: the sink only).
NodeSet alive_nodes(const std::vector<RowMatrix>& R, long t);

/// Capacities of the layered graph for one target t, shared (read-only) by all sources: arc
/// (l-1, k) -> (l, i), k <= i <= t, is cap[(l-1) tri + col[k] + i - k] = R_l[i, k] (column k of
/// R_l contiguous: the out-arcs of node (l-1, k)).
struct LayeredGraph {
  int L = 0;
  long m = 0;                     ///< positions 0..m-1; the sink is (L, m - 1)
  long n = 0;                     ///< positions of the kernels (n >= m; positions >= m cannot reach the sink)
  std::int64_t tri = 0;           ///< arcs per layer, m (m + 1) / 2
  std::vector<std::int64_t> col;  ///< m + 1 column offsets inside a layer
  std::vector<double> cap;        ///< L * tri capacities
  NodeSet alive;                  ///< alive_nodes(R, m - 1)
  std::int64_t arc(int l, long k, long i) const { return (l - 1) * tri + col[k] + (i - k); }
};

/// The graph of R for target t (R checked by the caller).
LayeredGraph make_layered_graph(const std::vector<RowMatrix>& R, long t);

/// One solver per thread: its flow array spans the whole graph (zeroed once) and is reset along
/// the list of touched arcs after each source.
class LayeredSolver {
 public:
  explicit LayeredSolver(const LayeredGraph& g);
  /// Max-flow from (0, s) to the sink, with SingleFlow::phases and arcs_scanned; with
  /// `certificate` also source_side and cut_capacity (the minimum cut the final search closed).
  SingleFlow solve(long s, bool certificate);

 private:
  struct Step {     // one arc of the current DFS path
    long from, to;  // node ids l * m + i
    std::int64_t arc;
    bool forward;  // forward arc (residual cap - flow) or reverse arc (residual flow)
  };
  long id(int l, long i) const { return l * g_.m + i; }
  double residual(const Step& st) const { return st.forward ? res_[st.arc] : g_.cap[st.arc] - res_[st.arc]; }
  bool carries(std::int64_t a) const { return res_[a] < g_.cap[a]; }  // the arc carries flow
  bool next_arc(long u, Step& st);
  long next_open(int l, long p);  // first position >= p of layer l still in the level graph (m: none)
  void block(long u);             // u leaves the level graph
  double blocking_flow(long s);
  bool levels(long s);  // residual BFS from the source; true when the sink is reached
  enum class Closed { None, Source, Sink };
  Closed closed_side(long s);
  void push(const Step& st, double delta, bool saturate);
  void need_lists();  // fills in_flow_ / out_flow_ from touched_ the first time a search needs them
  void reset(long s);
  double certificate(long s, Closed side, SingleFlow& out) const;

  const LayeredGraph& g_;
  long sink_;
  std::vector<double> res_;  // residual capacity per arc (the capacity outside `touched_`)
  std::vector<char> seen_;   // per arc: in `touched_`
  std::vector<std::int64_t> touched_;
  std::vector<std::vector<long>> in_flow_;   // node (l, i): tails k of arcs (l-1, k) -> (l, i) that carried flow
  std::vector<std::vector<long>> out_flow_;  // node (l, i): heads p of arcs (l, i) -> (l+1, p) that carried flow
  bool lists_ = false;                       // in_flow_ / out_flow_ are filled (and kept up to date)
  std::vector<char> in_s_, in_t_;            // closed_side: reached from the source / reaching the sink
  std::vector<int> level_;                   // BFS level, -1 = outside the level graph
  std::vector<long> cur_;                    // current arc: position i (forward) or m + index into in_flow_
  std::vector<long> open_;                   // per layer, m + 1 entries: union-find "next open position"
  int dsink_ = 0;                            // level of the sink in the current level graph
  long open_source_ = 0, open_sink_ = 0;     // unsaturated arcs out of the source / into the sink
  std::vector<Step> path_;
  std::vector<long> queue_, tqueue_;
  long phases_ = 0;        // blocking flows run for the current source
  std::int64_t arcs_ = 0;  // arc inspections (DFS advances and searches) for the current source
};

}  // namespace cf::rollout::detail
