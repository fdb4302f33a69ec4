// Attention flow: max-flow on the layered attention graph (cf/rollout/flow.hpp).
#include "cf/rollout/flow.hpp"

#include <algorithm>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/core/progress.hpp"
#include "cf/rollout/detail/flow_layered.hpp"

namespace cf::rollout {

namespace {

/// Arc properties of the residual graph (bundled; CSR graphs keep them in one array).
struct Arc {
  double cap = 0;  ///< capacity (0 for the reverse arc of an edge)
  double res = 0;  ///< residual capacity (set by the solver)
};
// Compressed sparse row graph with 32-bit vertex and arc indices: 4 + 16 bytes per arc plus the
// reverse-arc map (8 bytes), built from one sorted array without per-edge allocation (3.1x faster
// than an adjacency_list with per-edge property objects, docs/rollout.md "Attention flow").
using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, Arc, boost::no_property,
                                                 std::uint32_t, std::uint32_t>;
using Edge = boost::graph_traits<Graph>::edge_descriptor;
using detail::alive_nodes;
using detail::NodeSet;

void check_kernels(const std::vector<RowMatrix>& R) {
  require(!R.empty(), "attention flow: at least one layer required");
  const long n = R[0].rows();
  require(n >= 1, "attention flow: kernels must have n >= 1 rows");
  for (std::size_t l = 0; l < R.size(); ++l) {
    require(R[l].rows() == n && R[l].cols() == n, "attention flow: layer ", l + 1, " kernel is ", R[l].rows(), " x ",
            R[l].cols(), ", expected ", n, " x ", n);
    for (long i = 0; i < n; ++i)
      for (long j = 0; j <= i; ++j)
        require(std::isfinite(R[l](i, j)) && R[l](i, j) >= 0, "attention flow: layer ", l + 1, " entry [", i, ", ", j,
                "] = ", R[l](i, j), " must be finite and >= 0");
  }
}

/// One pruned layered graph (source j, sink t) and its max flow.
SingleFlow solve(const std::vector<RowMatrix>& R, long j, long t, const NodeSet& alive, FlowAlgorithm algorithm,
                 bool certificate) {
  const int L = static_cast<int>(R.size());
  const long n = R[0].rows();
  SingleFlow out;
  // Forward reachability from (0, j) intersected with `alive`: the nodes on some source-sink path.
  NodeSet keep(L + 1, std::vector<char>(n, 0));
  keep[0][j] = alive[0][j];
  for (int l = 1; l <= L; ++l)
    for (long i = j; i <= t; ++i) {
      if (!alive[l][i]) continue;
      for (long k = j; k <= i; ++k)
        if (keep[l - 1][k] && R[l - 1](i, k) > 0) {
          keep[l][i] = 1;
          break;
        }
    }
  if (certificate) {
    out.source_side.assign(L + 1, std::vector<char>(n, 0));
    for (int l = 1; l <= L; ++l)
      for (long i = 0; i < n; ++i) out.source_side[l][i] = !alive[l][i];  // dead ends join S
    out.source_side[0][j] = 1;
  }
  if (!keep[L][t]) return out;  // no source-sink path: flow 0, S = {source} + dead ends, cut 0
  // Node ids: layer by layer, positions ascending.
  std::vector<std::vector<long>> id(L + 1, std::vector<long>(n, -1));
  long nv = 0;
  for (int l = 0; l <= L; ++l)
    for (long i = j; i <= t; ++i)
      if (keep[l][i]) id[l][i] = nv++;
  // Arc slots, grouped by tail node (CSR order): each node's forward arcs (to layer l + 1), then
  // its reverse arcs (to layer l - 1). Pass 1 counts them, pass 2 fills both arcs of every edge
  // and pairs them (rev_slot).
  auto edge_cap = [&](int l, long i, long k) {  // edge (l-1, k) -> (l, i) of the pruned graph, or 0
    return keep[l - 1][k] && keep[l][i] ? R[l - 1](i, k) : 0.0;
  };
  std::vector<std::uint32_t> fwd_count(nv, 0), bwd_count(nv, 0);
  long ne = 0;
  for (int l = 1; l <= L; ++l)
    for (long i = j; i <= t; ++i)
      for (long k = j; k <= i; ++k)
        if (edge_cap(l, i, k) > 0) ++fwd_count[id[l - 1][k]], ++bwd_count[id[l][i]], ++ne;
  require(2 * ne < static_cast<long>(UINT32_MAX), "attention flow: graph too large (", ne, " edges)");
  std::vector<std::uint32_t> fwd_next(nv), bwd_next(nv);
  std::uint32_t pos = 0;
  for (long v = 0; v < nv; ++v) {
    fwd_next[v] = pos;
    pos += fwd_count[v];
    bwd_next[v] = pos;
    pos += bwd_count[v];
  }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> arcs(2 * ne);
  std::vector<Arc> props(2 * ne);
  std::vector<std::uint32_t> rev_slot(2 * ne);
  for (int l = 1; l <= L; ++l)
    for (long i = j; i <= t; ++i)
      for (long k = j; k <= i; ++k) {
        const double c = edge_cap(l, i, k);
        if (!(c > 0)) continue;
        const auto u = static_cast<std::uint32_t>(id[l - 1][k]), v = static_cast<std::uint32_t>(id[l][i]);
        const std::uint32_t a = fwd_next[u]++, b = bwd_next[v]++;
        arcs[a] = {u, v};
        arcs[b] = {v, u};
        props[a].cap = c;
        rev_slot[a] = b;
        rev_slot[b] = a;
      }
  Graph g(boost::edges_are_sorted, arcs.begin(), arcs.end(), props.begin(), static_cast<std::uint32_t>(nv));
  std::vector<Arc>().swap(props);
  std::vector<Edge> rev_edges(2 * ne);
  for (std::size_t a = 0; a < arcs.size(); ++a) rev_edges[a] = Edge(arcs[rev_slot[a]].first, rev_slot[a]);
  std::vector<std::pair<std::uint32_t, std::uint32_t>>().swap(arcs);
  std::vector<std::uint32_t>().swap(rev_slot);
  auto cap = boost::get(&Arc::cap, g);
  auto res = boost::get(&Arc::res, g);
  auto rev = boost::make_iterator_property_map(rev_edges.begin(), boost::get(boost::edge_index, g));
  out.nodes = nv;
  out.edges = ne;
  const long s = id[0][j], sink = id[L][t];
  if (algorithm == FlowAlgorithm::PushRelabel) {
    // Phase 1 only (a maximum preflow): its sink excess is the max-flow value and the residual
    // graph already separates a minimum cut, so the conversion to a flow (phase 2) is skipped.
    // boost::push_relabel_max_flow would run phase 2 and then assert exact flow conservation,
    // which doubles do not meet (the assertion fires in debug builds).
    boost::detail::push_relabel<Graph, decltype(cap), decltype(res), decltype(rev),
                                decltype(boost::get(boost::vertex_index, g)), double>
        algo(g, cap, res, rev, s, sink, boost::get(boost::vertex_index, g));
    out.value = algo.maximum_preflow();
  } else {
    std::vector<boost::default_color_type> color(nv);
    std::vector<long> dist(nv);
    std::vector<Edge> pred(nv);
    auto idx = boost::get(boost::vertex_index, g);
    out.value =
        boost::boykov_kolmogorov_max_flow(g, cap, res, rev, boost::make_iterator_property_map(pred.begin(), idx),
                                          boost::make_iterator_property_map(color.begin(), idx),
                                          boost::make_iterator_property_map(dist.begin(), idx), idx, s, sink);
  }
  if (!certificate) return out;
  // T = nodes that can still reach the sink in the final residual graph (arcs with residual > 0),
  // S = the rest: a minimum cut for a maximum flow (BK) and for a maximum preflow (push-relabel
  // phase 1) alike. Arc u -> v is found from v as the reverse of v's out-arc v -> u.
  std::vector<char> inT(nv, 0);
  std::deque<long> queue{sink};
  inT[sink] = 1;
  while (!queue.empty()) {
    const long v = queue.front();
    queue.pop_front();
    for (auto [e, end] = boost::out_edges(static_cast<std::uint32_t>(v), g); e != end; ++e) {
      const long u = static_cast<long>(boost::target(*e, g));
      if (!inT[u] && res[rev[*e]] > 0) inT[u] = 1, queue.push_back(u);
    }
  }
  std::vector<char> inS(nv);
  for (long v = 0; v < nv; ++v) inS[v] = !inT[v];
  double cut = 0;
  for (auto [e, end] = boost::edges(g); e != end; ++e)
    if (cap[*e] > 0 && inS[boost::source(*e, g)] && !inS[boost::target(*e, g)]) cut += cap[*e];
  out.cut_capacity = cut;
  for (int l = 0; l <= L; ++l)
    for (long i = j; i <= t; ++i)
      if (keep[l][i] && inS[id[l][i]]) out.source_side[l][i] = 1;
  return out;
}

long resolve_target(long target, long n) {
  const long t = target < 0 ? n - 1 : target;
  require(target >= -1 && t < n, "attention flow: target position must lie in [0, n) = [0, ", n, "), got ", target);
  return t;
}

}  // namespace

std::vector<RowMatrix> residual_mixed_kernels(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha) {
  const long L = alpha.size();
  require(L >= 1, "residual mixing: alpha needs at least one layer");
  require(static_cast<long>(kernels.size()) == L || kernels.size() == 1, "residual mixing: ", kernels.size(),
          " kernels for ", L, " alpha values (expected ", L, " or 1)");
  std::vector<RowMatrix> R;
  R.reserve(L);
  for (long l = 0; l < L; ++l) {
    const RowMatrix& K = kernels[kernels.size() == 1 ? 0 : l];
    require(K.rows() == K.cols() && K.rows() == kernels[0].rows(), "residual mixing: kernel ", l + 1, " is ", K.rows(),
            " x ", K.cols());
    require(std::isfinite(alpha(l)) && alpha(l) >= 0 && alpha(l) <= 1, "residual mixing: alpha_", l + 1, " = ",
            alpha(l), " must lie in [0, 1]");
    RowMatrix M = alpha(l) * K;
    M.diagonal().array() += 1 - alpha(l);
    R.push_back(std::move(M));
  }
  return R;
}

FlowAlgorithm parse_flow_algorithm(const std::string& name, const std::string& option) {
  if (const auto a = kFlowAlgorithms.find(name)) return *a;
  throw InvalidArgument(option + ": unknown max-flow algorithm '" + name + "' (expected " +
                        kFlowAlgorithms.list(" | ") + ")");
}

std::string flow_algorithm_name(FlowAlgorithm a) { return std::string(kFlowAlgorithms.name(a)); }

SingleFlow max_flow_single(const std::vector<RowMatrix>& R, long source, long target, FlowAlgorithm algorithm,
                           bool certificate) {
  check_kernels(R);
  const long n = R[0].rows();
  const long t = resolve_target(target, n);
  require(source >= 0 && source <= t, "attention flow: source position must lie in [0, target = ", t, "], got ",
          source);
  if (algorithm == FlowAlgorithm::Layered) {
    const detail::LayeredGraph g = detail::make_layered_graph(R, t);
    return detail::LayeredSolver(g).solve(source, certificate);
  }
  return solve(R, source, t, alive_nodes(R, t), algorithm, certificate);
}

FlowResult attention_flow(const std::vector<RowMatrix>& R, const FlowOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  check_kernels(R);
  const long n = R[0].rows();
  FlowResult fr;
  fr.target = resolve_target(o.target, n);
  const long t = fr.target;
  std::vector<long> sources = o.sources;
  if (sources.empty())
    for (long j = 0; j <= t; ++j) sources.push_back(j);
  for (long j : sources)
    require(j >= 0 && j <= t, "attention flow: source position must lie in [0, target = ", t, "], got ", j);
  std::sort(sources.begin(), sources.end());  // ascending j = largest graphs first (dynamic schedule)
  fr.flow = Eigen::VectorXd::Zero(n);
  fr.cut = Eigen::VectorXd::Constant(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<SingleFlow> sf(sources.size());
  // a progress line with ETA on a terminal, counted in edges, (t - j + 1)^2 per layer and source,
  // since the first sources hold the largest graphs
  auto work = [&](long j) { return static_cast<std::int64_t>(t - j + 1) * (t - j + 1); };
  std::int64_t total = 0;
  for (long j : sources) total += work(j);
  Progress progress("attention flow (edges of all sources)", total);
  if (o.algorithm == FlowAlgorithm::Layered) {
    const detail::LayeredGraph g = detail::make_layered_graph(R, t);  // shared by all sources
    OmpExceptions errors;
#pragma omp parallel
    {
      std::unique_ptr<detail::LayeredSolver> solver;  // one per thread: its residual array spans the graph
#pragma omp for schedule(dynamic, 1)
      for (long k = 0; k < static_cast<long>(sources.size()); ++k)
        errors.run([&] {
          if (!solver) solver = std::make_unique<detail::LayeredSolver>(g);
          sf[k] = solver->solve(sources[k], o.certificate);
          progress.advance(work(sources[k]));
        });
    }
    errors.rethrow();
  } else {
    const NodeSet alive = alive_nodes(R, t);
    OmpExceptions errors;
#pragma omp parallel for schedule(dynamic, 1)
    for (long k = 0; k < static_cast<long>(sources.size()); ++k)
      errors.run([&] {
        sf[k] = solve(R, sources[k], t, alive, o.algorithm, o.certificate);
        progress.advance(work(sources[k]));
      });
    errors.rethrow();
  }
  for (std::size_t k = 0; k < sources.size(); ++k) {
    const long j = sources[k];
    fr.flow(j) = sf[k].value;
    fr.max_nodes = std::max(fr.max_nodes, sf[k].nodes);
    fr.max_edges = std::max(fr.max_edges, sf[k].edges);
    fr.max_phases = std::max(fr.max_phases, sf[k].phases);
    fr.arcs_scanned += sf[k].arcs_scanned;
    if (o.certificate) {
      fr.cut(j) = sf[k].cut_capacity;
      const double gap = std::abs(sf[k].cut_capacity - sf[k].value) / std::max(sf[k].value, 1e-300);
      fr.max_cut_gap = std::max(fr.max_cut_gap, sf[k].value > 0 || sf[k].cut_capacity > 0 ? gap : 0.0);
    }
  }
  const double sum = fr.flow.sum();
  fr.profile = sum > 0 ? Eigen::VectorXd(fr.flow / sum) : Eigen::VectorXd(Eigen::VectorXd::Zero(n));
  fr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return fr;
}

RowMatrix attention_flow_matrix(const std::vector<RowMatrix>& R, FlowAlgorithm algorithm) {
  check_kernels(R);
  const long n = R[0].rows();
  require(n <= 512, "attention flow matrix: n <= 512 required (n (n + 1) / 2 max-flows), got ", n);
  RowMatrix F = RowMatrix::Zero(n, n);
  if (algorithm == FlowAlgorithm::Layered) {
    for (long t = n - 1; t >= 0; --t) {  // one graph per target, its sources in parallel
      const detail::LayeredGraph g = detail::make_layered_graph(R, t);
      OmpExceptions errors;
#pragma omp parallel
      {
        std::unique_ptr<detail::LayeredSolver> solver;
#pragma omp for schedule(dynamic, 1)
        for (long j = 0; j <= t; ++j)
          errors.run([&] {
            if (!solver) solver = std::make_unique<detail::LayeredSolver>(g);
            F(t, j) = solver->solve(j, false).value;
          });
      }
      errors.rethrow();
    }
    return F;
  }
  std::vector<NodeSet> alive(n);
  for (long t = 0; t < n; ++t) alive[t] = alive_nodes(R, t);
  std::vector<std::pair<long, long>> pairs;
  for (long t = n - 1; t >= 0; --t)
    for (long j = 0; j <= t; ++j) pairs.emplace_back(t, j);  // largest graphs first
  OmpExceptions errors;
#pragma omp parallel for schedule(dynamic, 1)
  for (long k = 0; k < static_cast<long>(pairs.size()); ++k)
    errors.run([&] {
      const auto [t, j] = pairs[k];
      F(t, j) = solve(R, j, t, alive[t], algorithm, false).value;
    });
  errors.rethrow();
  return F;
}

double flow_upper_bound(const std::vector<RowMatrix>& R, long source, long target) {
  check_kernels(R);
  const long n = R[0].rows();
  const long t = resolve_target(target, n);
  require(source >= 0 && source <= t, "flow bound: source must lie in [0, ", t, "], got ", source);
  const int L = static_cast<int>(R.size());
  if (L == 1) return R[0](t, source);
  double out = 0, in = 0;
  for (long i = source; i <= t; ++i) out += R[0](i, source);
  for (long k = source; k <= t; ++k) in += R[L - 1](t, k);
  return std::min(out, in);
}

}  // namespace cf::rollout
