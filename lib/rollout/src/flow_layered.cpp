// Max-flow specialised to the layered causal graph (cf/rollout/detail/flow_layered.hpp).
#include "cf/rollout/detail/flow_layered.hpp"

#include <algorithm>
#include <limits>

#include "cf/core/error.hpp"

namespace cf::rollout::detail {

NodeSet alive_nodes(const std::vector<RowMatrix>& R, long t) {
  const int L = static_cast<int>(R.size());
  const long n = R[0].rows();
  NodeSet alive(L + 1, std::vector<char>(n, 0));
  alive[L][t] = 1;
  for (int l = L; l >= 1; --l)
    for (long k = 0; k <= t; ++k)
      for (long i = k; i <= t; ++i)
        if (alive[l][i] && R[l - 1](i, k) > 0) {
          alive[l - 1][k] = 1;
          break;
        }
  return alive;
}

LayeredGraph make_layered_graph(const std::vector<RowMatrix>& R, long t) {
  LayeredGraph g;
  g.L = static_cast<int>(R.size());
  g.m = t + 1;
  g.n = R[0].rows();
  g.tri = g.m * (g.m + 1) / 2;
  g.col.resize(g.m + 1);
  g.col[0] = 0;
  for (long k = 0; k < g.m; ++k) g.col[k + 1] = g.col[k] + (g.m - k);
  g.cap.resize(static_cast<std::size_t>(g.L) * g.tri);
  for (int l = 1; l <= g.L; ++l)
    for (long k = 0; k < g.m; ++k)
      for (long i = k; i < g.m; ++i) g.cap[g.arc(l, k, i)] = R[l - 1](i, k);
  g.alive = alive_nodes(R, t);
  return g;
}

LayeredSolver::LayeredSolver(const LayeredGraph& g)
    : g_(g),
      sink_(g.L * g.m + g.m - 1),
      res_(g.cap),
      seen_(g.cap.size(), 0),
      in_flow_((g.L + 1) * g.m),
      out_flow_((g.L + 1) * g.m),
      in_s_((g.L + 1) * g.m, 0),
      in_t_((g.L + 1) * g.m, 0),
      level_((g.L + 1) * g.m, -1),
      cur_((g.L + 1) * g.m, 0),
      open_((g.L + 1) * (g.m + 1), 0) {}

// Blocked nodes stay blocked for the rest of a phase, so "the next open position" is a union-find
// with path halving: a column scan skips a run of blocked heads in amortised constant time
// instead of one inspection each (most heads of a late layer block early in a phase).
long LayeredSolver::next_open(int l, long p) {
  long* a = &open_[l * (g_.m + 1)];
  while (a[p] != p) {
    a[p] = a[a[p]];
    p = a[p];
  }
  return p;
}

void LayeredSolver::block(long u) {
  level_[u] = -1;
  open_[(u / g_.m) * (g_.m + 1) + u % g_.m] = u % g_.m + 1;
}

void LayeredSolver::reset(long s) {
  for (std::int64_t a : touched_) res_[a] = g_.cap[a], seen_[a] = 0;
  touched_.clear();
  if (lists_)
    for (long v = 0; v < static_cast<long>(in_flow_.size()); ++v) in_flow_[v].clear(), out_flow_[v].clear();
  lists_ = false;
  phases_ = 0, arcs_ = 0;
  // the first level graph is the layered graph itself: level = layer on every live node
  for (int l = 0; l <= g_.L; ++l)
    for (long p = 0; p < g_.m; ++p) level_[id(l, p)] = (p >= s && g_.alive[l][p]) ? l : -1;
  level_[id(0, s)] = 0;
  for (long p = 0; p < g_.m; ++p)
    if (p != s) level_[id(0, p)] = -1;
  dsink_ = g_.L;
  open_source_ = open_sink_ = 0;
  for (long p = s; p < g_.m; ++p) {
    open_source_ += level_[id(1, p)] >= 0 && g_.cap[g_.arc(1, s, p)] > 0;
    open_sink_ += level_[id(g_.L - 1, p)] >= 0 && g_.cap[g_.arc(g_.L, p, g_.m - 1)] > 0;
  }
}

// The next admissible arc out of u (to a node one level further, with residual capacity),
// starting at u's current arc, which is left pointing at the arc found.
bool LayeredSolver::next_arc(long u, Step& st) {
  const long m = g_.m;
  const int l = static_cast<int>(u / m);
  const long i = u % m;
  const int want = level_[u] + 1;
  auto admissible = [&](long v) { return level_[v] == want && (want < dsink_ || v == sink_); };
  long& c = cur_[u];
  if (c < m && l < g_.L) {
    if (l + 1 == g_.L) c = std::max(c, m - 1);  // the last layer holds the sink only
    const std::int64_t base = g_.arc(l + 1, i, i) - i;
    for (c = next_open(l + 1, c); c < m; c = next_open(l + 1, c + 1)) {
      ++arcs_;
      const long v = id(l + 1, c);
      if (admissible(v) && res_[base + c] > 0) {
        st = {u, v, base + c, true};
        return true;
      }
    }
  }
  if (c < m) c = m;
  const auto& in = in_flow_[u];
  for (; c - m < static_cast<long>(in.size()); ++c) {
    ++arcs_;
    const long k = in[c - m];
    const long v = id(l - 1, k);
    const std::int64_t a = g_.arc(l, k, i);
    if (admissible(v) && carries(a)) {
      st = {u, v, a, false};
      return true;
    }
  }
  return false;
}

void LayeredSolver::push(const Step& st, double delta, bool saturate) {
  if (st.forward) {
    if (!seen_[st.arc]) {
      seen_[st.arc] = 1;
      touched_.push_back(st.arc);
      if (lists_) in_flow_[st.to].push_back(st.from % g_.m), out_flow_[st.from].push_back(st.to % g_.m);
    }
    // a saturated arc gets residual exactly 0, a fully cancelled one exactly its capacity
    res_[st.arc] = saturate ? 0.0 : res_[st.arc] - delta;
    // (the source's and the sink's arcs are never cancelled: no level graph has an arc back into
    // the source or out of the sink)
    if (saturate) open_source_ -= st.from / g_.m == 0, open_sink_ -= st.to == sink_;
  } else {
    res_[st.arc] = saturate ? g_.cap[st.arc] : res_[st.arc] + delta;
  }
}

// The arcs that carried flow per node, decoded from touched_: only reverse arcs need them (later
// phases and searches past the first node), and the first blocking flow, where most arcs get
// their flow, does not, so it skips their upkeep.
void LayeredSolver::need_lists() {
  if (lists_) return;
  lists_ = true;
  for (std::int64_t a : touched_) {
    const int l = static_cast<int>(a / g_.tri) + 1;  // layer of the head
    const std::int64_t off = a % g_.tri;
    const long k = static_cast<long>(std::upper_bound(g_.col.begin(), g_.col.begin() + g_.m, off) - g_.col.begin()) - 1;
    const long i = k + static_cast<long>(off - g_.col[k]);
    in_flow_[id(l, i)].push_back(k);
    out_flow_[id(l - 1, k)].push_back(i);
  }
}

// Dinic's blocking flow on the current level graph: depth-first search with current arcs; a node
// without admissible arcs leaves the level graph (level -1).
double LayeredSolver::blocking_flow(long s) {
  for (int l = 0; l <= g_.L; ++l) {
    long* a = &open_[l * (g_.m + 1)];
    for (long p = s; p < g_.m; ++p) {
      cur_[id(l, p)] = p;
      a[p] = level_[id(l, p)] >= 0 ? p : p + 1;
    }
    a[g_.m] = g_.m;
  }
  double total = 0;
  path_.clear();
  const long src = id(0, s);
  long u = src;
  for (;;) {
    if (u == sink_) {
      double delta = std::numeric_limits<double>::infinity();
      for (const Step& st : path_) delta = std::min(delta, residual(st));
      std::size_t first = path_.size();
      for (std::size_t k = 0; k < path_.size(); ++k) {
        const bool sat = residual(path_[k]) == delta;
        push(path_[k], delta, sat);
        if (sat && first == path_.size()) first = k;
      }
      total += delta;
      // all arcs of a trivial cut saturated: nothing more can pass (the search would only prove it)
      if (open_source_ == 0 || open_sink_ == 0) break;
      u = path_[first].from;  // resume from the tail of the first saturated arc
      path_.resize(first);
      continue;
    }
    Step st;
    if (next_arc(u, st)) {
      path_.push_back(st);
      u = st.to;
      continue;
    }
    block(u);
    if (path_.empty()) break;
    u = path_.back().from;
    path_.pop_back();
  }
  ++phases_;
  return total;
}

// Residual breadth-first search from the source; levels of the reached nodes (-1 elsewhere).
// Stops as soon as the sink is labelled (deeper nodes cannot lie on a shortest path).
bool LayeredSolver::levels(long s) {
  need_lists();
  const long m = g_.m;
  for (int l = 0; l <= g_.L; ++l)
    for (long p = s; p < m; ++p) level_[id(l, p)] = -1;
  queue_.clear();
  const long src = id(0, s);
  level_[src] = 0;
  queue_.push_back(src);
  for (std::size_t q = 0; q < queue_.size(); ++q) {
    const long u = queue_[q];
    const int l = static_cast<int>(u / m);
    const long i = u % m;
    const int d = level_[u] + 1;
    if (l < g_.L) {
      const std::int64_t base = g_.arc(l + 1, i, i) - i;
      const auto& alive = g_.alive[l + 1];
      for (long p = (l + 1 == g_.L ? m - 1 : i); p < m; ++p) {
        ++arcs_;
        const long v = id(l + 1, p);
        if (level_[v] < 0 && alive[p] && res_[base + p] > 0) {
          level_[v] = d;
          if (v == sink_) return dsink_ = d, true;
          queue_.push_back(v);
        }
      }
    }
    for (long k : in_flow_[u]) {
      ++arcs_;
      const long v = id(l - 1, k);
      if (level_[v] < 0 && carries(g_.arc(l, k, i))) level_[v] = d, queue_.push_back(v);
    }
  }
  return false;
}

// Is the flow maximum? Two residual searches advance in turn, the one with fewer arc inspections
// next: from the source along residual arcs (in_s_) and towards the sink against them (in_t_).
// The first to run out of nodes without meeting the other closes a minimum cut (Source: S = what
// the source reaches; Sink: T = what reaches the sink); a meeting is an augmenting path (None).
// A cut next to either end, the common case, is thus found after a search of its own size only.
LayeredSolver::Closed LayeredSolver::closed_side(long s) {
  const long m = g_.m;
  for (int l = 0; l <= g_.L; ++l)
    for (long p = s; p < m; ++p) in_s_[id(l, p)] = in_t_[id(l, p)] = 0;
  queue_.assign(1, id(0, s));
  tqueue_.assign(1, sink_);
  in_s_[id(0, s)] = in_t_[sink_] = 1;
  std::size_t qs = 0, qt = 0;
  std::int64_t work_s = 0, work_t = 0;
  auto done = [&](Closed c) {
    arcs_ += work_s + work_t;
    return c;
  };
  while (qs < queue_.size() && qt < tqueue_.size()) {
    if (work_s <= work_t) {  // expand one node reached from the source
      const long u = queue_[qs++];
      const int l = static_cast<int>(u / m);
      const long i = u % m;
      if (l < g_.L) {
        const std::int64_t base = g_.arc(l + 1, i, i) - i;
        const auto& alive = g_.alive[l + 1];
        for (long p = (l + 1 == g_.L ? m - 1 : i); p < m; ++p, ++work_s) {
          const long v = id(l + 1, p);
          if (!in_s_[v] && alive[p] && res_[base + p] > 0) {
            if (in_t_[v]) return done(Closed::None);
            in_s_[v] = 1, queue_.push_back(v);
          }
        }
      }
      if (l > 0) need_lists();
      for (long k : in_flow_[u]) {
        ++work_s;
        const long v = id(l - 1, k);
        if (!in_s_[v] && carries(g_.arc(l, k, i))) {
          if (in_t_[v]) return done(Closed::None);
          in_s_[v] = 1, queue_.push_back(v);
        }
      }
    } else {  // expand one node that reaches the sink: its residual in-arcs
      const long v = tqueue_[qt++];
      const int l = static_cast<int>(v / m);
      const long i = v % m;
      if (l >= 1) {
        for (long k = s, kmax = l == 1 ? s : i; k <= kmax; ++k, ++work_t) {  // layer 0: the source only
          const long u = id(l - 1, k);
          const std::int64_t a = g_.arc(l, k, i);
          if (!in_t_[u] && res_[a] > 0) {
            if (in_s_[u]) return done(Closed::None);
            in_t_[u] = 1, tqueue_.push_back(u);
          }
        }
      }
      if (l < g_.L) need_lists();
      for (long p : out_flow_[v]) {
        ++work_t;
        const long u = id(l + 1, p);
        if (!in_t_[u] && carries(g_.arc(l + 1, i, p))) {
          if (in_s_[u]) return done(Closed::None);
          in_t_[u] = 1, tqueue_.push_back(u);
        }
      }
    }
  }
  return done(qs == queue_.size() ? Closed::Source : Closed::Sink);
}

// The minimum cut that closed_side found, as SingleFlow::source_side, and its capacity (the arcs
// leaving S, summed from the capacities). Source side closed: S = the nodes the source reaches
// plus every node that cannot reach the sink (adding those cuts no arc). Sink side closed: T =
// the nodes that reach the sink plus every node before the source position (no arc of S enters
// them: positions never decrease along an arc).
double LayeredSolver::certificate(long s, Closed side, SingleFlow& out) const {
  const long m = g_.m;
  auto& S = out.source_side;
  S.assign(g_.L + 1, std::vector<char>(g_.n, 0));
  for (int l = 1; l <= g_.L; ++l) std::fill(S[l].begin() + m, S[l].end(), 1);  // after the sink: dead
  for (int l = 1; l <= g_.L; ++l)
    for (long p = s; p < m; ++p)
      S[l][p] = side == Closed::Source ? (!g_.alive[l][p] || in_s_[id(l, p)]) : !in_t_[id(l, p)];
  if (side == Closed::Source)
    for (int l = 1; l <= g_.L; ++l)
      for (long p = 0; p < s; ++p) S[l][p] = !g_.alive[l][p];
  S[0][s] = 1;
  // the arcs leaving S, enumerated from the side that was searched (its nodes are in the queue)
  double cut = 0;
  if (side == Closed::Source) {
    for (long u : queue_) {
      const int l = static_cast<int>(u / m);
      const long k = u % m;
      if (l < g_.L)
        for (long i = k; i < m; ++i)
          if (!S[l + 1][i]) cut += g_.cap[g_.arc(l + 1, k, i)];
    }
  } else {
    for (long v : tqueue_) {
      const int l = static_cast<int>(v / m);
      const long i = v % m;
      if (l >= 1)
        for (long k = s, kmax = l == 1 ? s : i; k <= kmax; ++k)
          if (S[l - 1][k]) cut += g_.cap[g_.arc(l, k, i)];
    }
  }
  return cut;
}

SingleFlow LayeredSolver::solve(long s, bool want_certificate) {
  SingleFlow out;
  reset(s);
  Closed side = Closed::Source;
  if (g_.alive[0][s]) {
    out.value = blocking_flow(s);
    while ((side = closed_side(s)) == Closed::None) {
      // both searches use the same residual test, so the BFS finds the path they met on
      if (!levels(s)) throw Error("layered max-flow: the residual searches disagree (internal error)");
      out.value += blocking_flow(s);
    }
  } else {
    side = closed_side(s);  // nothing reaches the sink: S = the source's residual reach (all of it dead)
  }
  if (want_certificate) out.cut_capacity = certificate(s, side, out);
  out.phases = phases_;
  out.arcs_scanned = arcs_;
  // the graph this solver searches: positions s..t, layer 0 the source only, layer L the sink only
  const long w = g_.m - s;
  out.nodes = (g_.L - 1) * w + 2;
  out.edges = g_.L == 1 ? 1 : 2 * w + (g_.L - 2) * w * (w + 1) / 2;
  return out;
}

}  // namespace cf::rollout::detail
