// causalflow.graph: attention masks as graphs, schedules, closures R_L(t), coverage maps C(d, r),
// score counts and accuracy bounds of Boundary repair (Yang). Every function calls lib/graph
// (cf/graph/*.hpp); nothing is recomputed here.
#include <algorithm>
#include <optional>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/graph/coverage.hpp"
#include "cf/graph/coverage_report.hpp"
#include "cf/graph/mask.hpp"
#include "cf/graph/reachability.hpp"
#include "cf/graph/schedule.hpp"
#include "cf/graph/scores.hpp"
#include "convert.hpp"

namespace cfpy {

using namespace cf::graph;
using cf::require;

namespace {

// The `coverage` tool's limit on n (apps/coverage kMaxN): union accounting and closures visit every
// position, so larger n would run for minutes to hours instead of failing.
constexpr Index kMaxN = Index(1) << 26;
void check_n(Index n) {
  require(n >= 1, "n must be >= 1 (got ", n, ")");
  require(n <= kMaxN, "n must be <= ", kMaxN, " (union accounting visits every position; got ", n, ")");
}

// The CLI's defaults (apps/coverage): w = b, e = max(1, b/2).
Pattern make_pattern(const std::string& kind, Index b, std::optional<Index> w, std::optional<Index> e) {
  Pattern p;
  p.kind = parse_pattern_kind(kind);
  p.b = b;
  p.w = w.value_or(b);
  p.e = e.value_or(std::max<Index>(1, b / 2));
  validate(p, 1);  // parameter constraints that do not depend on n
  return p;
}

// A schedule from a Pattern (repeated `layers` times) or a list such as "pbb*3,full" sharing the
// parameters b, w, e of `base`.
Schedule to_schedule(const py::object& s, int layers, Index b, std::optional<Index> w, std::optional<Index> e) {
  require(layers >= 1, "layers must be >= 1 (got ", layers, ")");
  if (py::isinstance<Pattern>(s)) return uniform_schedule(s.cast<Pattern>(), layers);
  if (py::isinstance<py::str>(s)) {
    const Pattern base = make_pattern("full", b, w, e);
    Schedule sc = parse_schedule(s.cast<std::string>(), base);
    if (layers > 1) {
      require(sc.layers.size() == 1, "layers applies to a single pattern, not to the schedule '", s.cast<std::string>(),
              "'");
      sc = uniform_schedule(sc.layers.front(), layers);
    }
    return sc;
  }
  if (py::isinstance<py::list>(s) || py::isinstance<py::tuple>(s)) {
    Schedule sc;
    for (const auto& item : s) {
      require(py::isinstance<Pattern>(item), "schedule items must be causalflow.graph.Pattern objects");
      sc.layers.push_back(item.cast<Pattern>());
    }
    require(!sc.layers.empty(), "schedule must hold at least one layer");
    return sc;
  }
  throw cf::InvalidArgument("schedule must be a Pattern, a list of Patterns or a string such as 'pbb*3,full'");
}

// Intervals [lo, hi] as a (k, 2) int64 array without a copy (an Interval is two int64).
py::array_t<std::int64_t> intervals_to_numpy(std::vector<Interval>&& v) {
  static_assert(sizeof(Interval) == 2 * sizeof(std::int64_t), "Interval is two int64");
  auto* owner = new std::vector<Interval>(std::move(v));
  py::capsule base(owner, [](void* p) { delete static_cast<std::vector<Interval>*>(p); });
  const auto s = static_cast<py::ssize_t>(sizeof(std::int64_t));
  return py::array_t<std::int64_t>({static_cast<py::ssize_t>(owner->size()), py::ssize_t(2)}, {2 * s, s},
                                   reinterpret_cast<std::int64_t*>(owner->data()), base);
}

CoverageMatrix to_coverage_matrix(const py::handle& a) {
  auto arr = py::array_t<std::uint8_t, py::array::forcecast>::ensure(a);
  require(bool(arr) && arr.ndim() == 2, "C must be a 2-D 0/1 array (rows d, columns r)");
  auto u = arr.unchecked<2>();
  CoverageMatrix C(u.shape(0), u.shape(1));
  for (py::ssize_t i = 0; i < u.shape(0); ++i)
    for (py::ssize_t j = 0; j < u.shape(1); ++j) C(i, j) = u(i, j);
  return C;
}

py::dict bound_dict(const AccuracyBound& b) {
  py::dict d;
  d["accuracy_max"] = b.accuracy_max;
  d["cross_entropy_min"] = b.cross_entropy_min;
  return d;
}

std::vector<double> weights_or_ones(const std::optional<std::vector<double>>& w, std::size_t n) {
  if (!w) return std::vector<double>(n, 1.0);
  require(w->size() == n, "weight has ", w->size(), " entries but there are ", n, " probes");
  return *w;
}

}  // namespace

void bind_graph(py::module_& m) {
  m.doc() =
      "Attention masks as directed graphs over positions, per-layer schedules, the structural dependency "
      "sets R_L(t) (Boundary repair (Yang), Lemma 1), phase-conditioned coverage C(d, r) (Eqs. 18, 22-24), "
      "score accounting (Table 2) and the accuracy bounds (Theorem 2, Prop. 3, Eqs. 28 and 33).";

  py::class_<Pattern>(m, "Pattern",
                      "A mask family with its parameters (Boundary repair (Yang), Section 3).\n\n"
                      "Pattern(kind, b=128, w=None, e=None)\n\n"
                      "kind: 'full' | 'block' | 'swa' | 'bridge' | 'pbb' | 'se-bridge'; b: block size >= 1;\n"
                      "w: window width (swa) or bridge width (bridge/pbb: even, 2 <= w <= 2b), default b;\n"
                      "e: SE-Bridge extension, 1 <= e <= b, default max(1, b // 2).\n"
                      "Raises ValueError for an unknown kind or a violated constraint (as `coverage` exits 2).")
      .def(py::init(&make_pattern), py::arg("kind"), py::arg("b") = 128, py::arg("w") = py::none(),
           py::arg("e") = py::none())
      .def_property_readonly("kind", [](const Pattern& p) { return pattern_name(p.kind); })
      .def_readonly("b", &Pattern::b)
      .def_readonly("w", &Pattern::w)
      .def_readonly("e", &Pattern::e)
      .def_property_readonly("h", &Pattern::h, "Bridge half-width h = w // 2")
      .def(
          "validate", [](const Pattern& p, Index n) { validate(p, n); }, py::arg("n"),
          "Check the pattern against sequence length n (1 <= n <= 2^31); ValueError names the constraint.")
      .def("__repr__", [](const Pattern& p) { return "Pattern(" + describe(p) + ")"; })
      .def("__str__", [](const Pattern& p) { return describe(p); });

  m.def(
      "pattern_names",
      [] {
        std::vector<std::string> out;
        for (auto k : {PatternKind::Full, PatternKind::Block, PatternKind::Swa, PatternKind::Bridge, PatternKind::Pbb,
                       PatternKind::SeBridge})
          out.push_back(pattern_name(k));
        return out;
      },
      "Canonical pattern names: full, block, swa, bridge, pbb, se-bridge.");

  m.def(
      "schedule",
      [](const std::string& spec, Index b, std::optional<Index> w, std::optional<Index> e) {
        return to_schedule(py::str(spec), 1, b, w, e).layers;
      },
      py::arg("spec"), py::arg("b") = 128, py::arg("w") = py::none(), py::arg("e") = py::none(),
      "Parse a per-layer schedule such as 'pbb,pbb,pbb,full' or 'swa*3,full' (layer 1 first) into a list of\n"
      "Patterns sharing b, w, e (the `coverage --schedule` syntax).");

  m.def(
      "dense_mask",
      [](const Pattern& p, Index n) {
        CoverageMatrix A;
        {
          py::gil_scoped_release nogil;
          A = dense_mask(make_mask(p, n), 4096);
        }
        return to_numpy_eigen(std::move(A));
      },
      py::arg("pattern"), py::arg("n"),
      "Dense 0/1 mask A[t, s] = [(s, t) in E] (row = target t, column = source s), shape (n, n), uint8,\n"
      "n <= 4096 (what `coverage --export-mask` writes). Boundary repair (Yang), Section 3.");

  m.def(
      "sources",
      [](const Pattern& p, Index n, Index t) {
        const Mask mk = make_mask(p, n);
        require(t >= 0 && t < n, "t must satisfy 0 <= t < n = ", n, " (got ", t, ")");
        return intervals_to_numpy(sources(mk, t));
      },
      py::arg("pattern"), py::arg("n"), py::arg("t"),
      "Sources target t may read in one layer, as closed intervals: int64 array of shape (k, 2), rows [lo, hi].");

  m.def(
      "closure",
      [](const py::object& schedule, Index n, int layers, Index b, std::optional<Index> w, std::optional<Index> e) {
        check_n(n);
        const Schedule s = to_schedule(schedule, layers, b, w, e);
        Closure c;
        {
          py::gil_scoped_release nogil;
          c = closure(s, n);
        }
        py::dict d;
        d["offsets"] = to_numpy(std::move(c.offsets));
        d["intervals"] = intervals_to_numpy(std::move(c.intervals));
        return d;
      },
      py::arg("schedule"), py::arg("n"), py::arg("layers") = 1, py::arg("b") = 128, py::arg("w") = py::none(),
      py::arg("e") = py::none(),
      "Structural dependency sets R_L(t) of Boundary repair (Yang), Lemma 1:\n"
      "R_0(t) = {t}, R_{l+1}(t) = R_l(t) U union_{(s,t) in E(l+1)} R_l(s).\n\n"
      "schedule: a Pattern (repeated `layers` times), a list of Patterns or a string 'pbb*3,full' (with b, w, e).\n"
      "Returns {'offsets': int64 (n+1,), 'intervals': int64 (k, 2)}: R_L(t) is the union of the rows\n"
      "intervals[offsets[t]:offsets[t+1]] (closed [lo, hi]). Arrays are views of the C++ result (no copy).");

  m.def(
      "closure_sizes",
      [](const py::object& schedule, Index n, int layers, Index b, std::optional<Index> w, std::optional<Index> e) {
        check_n(n);
        const Schedule s = to_schedule(schedule, layers, b, w, e);
        std::vector<Index> sizes;
        {
          py::gil_scoped_release nogil;
          sizes = closure_sizes(closure(s, n));
        }
        return to_numpy(std::move(sizes));
      },
      py::arg("schedule"), py::arg("n"), py::arg("layers") = 1, py::arg("b") = 128, py::arg("w") = py::none(),
      py::arg("e") = py::none(),
      "|R_L(t)| for t = 0..n-1 as an int64 array of shape (n,) (Boundary repair (Yang), Lemma 1);\n"
      "the `closure.sizes` of `coverage --format json`.");

  m.def(
      "coverage_map",
      [](const Pattern& p, std::optional<Index> d_max) {
        CoverageMatrix C;
        {
          py::gil_scoped_release nogil;
          C = coverage_matrix_closed_form(p, d_max.value_or(2 * p.b));
        }
        return to_numpy_eigen(std::move(C));
      },
      py::arg("pattern"), py::arg("d_max") = py::none(),
      "Closed-form single-layer coverage C(d, r), rows d = 0..d_max (default 2b), columns r = 0..b-1, uint8 0/1,\n"
      "shape (d_max+1, b): Block [d <= r] (Eq. 18), SWA [d < w] (Eq. 22), PBB/Bridge (Eq. 23, Prop. 2),\n"
      "SE-Bridge (Eq. 24) of Boundary repair (Yang). A view of the C++ matrix (column-major, no copy).");

  m.def(
      "coverage_map_closure",
      [](const py::object& schedule, Index n, std::optional<Index> block, std::optional<Index> d_max, int layers,
         Index b, std::optional<Index> w, std::optional<Index> e) {
        check_n(n);
        const Schedule s = to_schedule(schedule, layers, b, w, e);
        const Index bb = s.layers.front().b;
        require(n >= bb, "a closure map covers a whole block of b = ", bb, " phases, but n = ", n, " < b");
        const Index J = block.value_or(n / bb - 1);
        const Index dm = d_max.value_or(std::min<Index>(2 * bb, J * bb));
        CoverageMatrix C;
        {
          py::gil_scoped_release nogil;
          C = coverage_matrix_closure(closure(s, n), bb, J, dm);
        }
        return to_numpy_eigen(std::move(C));
      },
      py::arg("schedule"), py::arg("n"), py::arg("block") = py::none(), py::arg("d_max") = py::none(),
      py::arg("layers") = 1, py::arg("b") = 128, py::arg("w") = py::none(), py::arg("e") = py::none(),
      "Coverage of block J's targets through the L-layer closure: C[d, r] = [t - d in R_L(t)], t = J b + r\n"
      "(`coverage --coverage closure`). block defaults to the last whole block n // b - 1, d_max to\n"
      "min(2b, J b). uint8 array of shape (d_max+1, b). Boundary repair (Yang), Lemma 1 and Section 3.5.");

  m.def(
      "phase_fraction", [](const py::handle& C) { return to_numpy(phase_fraction(to_coverage_matrix(C))); },
      py::arg("C"),
      "Fraction of phases r reaching distance d, per row of a coverage map (Prop. 1: (b - d)/b under Block);\n"
      "float64 array of shape (d_max+1,).");

  m.def(
      "scores",
      [](const Pattern& p, Index n) {
        check_n(n);
        const Mask mk = make_mask(p, n);
        std::int64_t br, un, wb;
        {
          py::gil_scoped_release nogil;
          br = scores_branch(mk), un = scores_union(mk), wb = write_back(mk);
        }
        py::dict d;
        d["branch"] = br;
        d["union"] = un;
        d["write_back"] = wb;
        return d;
      },
      py::arg("pattern"), py::arg("n"),
      "Attention scores per head (Boundary repair (Yang), Table 2 and Section 6.9), exact integers:\n"
      "{'branch': every softmax branch's causal triangle, 'union': distinct edges sum_t |sources(t)|,\n"
      "'write_back': positions receiving a bridge residual}.");

  m.def(
      "schedule_scores",
      [](const py::object& schedule, Index n, int layers, Index b, std::optional<Index> w, std::optional<Index> e) {
        check_n(n);
        const Schedule s = to_schedule(schedule, layers, b, w, e);
        ScheduleScores ss;
        {
          py::gil_scoped_release nogil;
          ss = scores_schedule(s, n);
        }
        py::dict d;
        d["branch"] = ss.branch;
        d["union"] = ss.unions;
        d["branch_per_layer"] = to_numpy(std::move(ss.branch_per_layer));
        d["union_per_layer"] = to_numpy(std::move(ss.union_per_layer));
        return d;
      },
      py::arg("schedule"), py::arg("n"), py::arg("layers") = 1, py::arg("b") = 128, py::arg("w") = py::none(),
      py::arg("e") = py::none(),
      "Score totals of a schedule (each layer's count summed, e.g. the 3:1 'pbb,pbb,pbb,full'):\n"
      "{'branch', 'union', 'branch_per_layer': int64 (L,), 'union_per_layer': int64 (L,)}.");

  m.def(
      "boundary_copy_bound", [](int K) { return bound_dict(boundary_copy_bound(K)); }, py::arg("K"),
      "Theorem 2 of Boundary repair (Yang), K-way boundary copy: a fixed-block model has accuracy <= 1/K and\n"
      "cross-entropy >= log K (nats). K >= 2. Returns {'accuracy_max', 'cross_entropy_min'}.");
  m.def(
      "coverage_limited_bound", [](double pi, int K) { return bound_dict(coverage_limited_bound(pi, K)); },
      py::arg("pi"), py::arg("K"),
      "Prop. 3 of Boundary repair (Yang): with a covered fraction pi in [0, 1], accuracy <= pi + (1 - pi)/K and\n"
      "cross-entropy >= (1 - pi) log K. Returns {'accuracy_max', 'cross_entropy_min'}.");

  m.def(
      "covered_fraction",
      [](const Pattern& p, const std::vector<Index>& d, const std::vector<Index>& r,
         std::optional<std::vector<double>> weight) {
        require(d.size() == r.size(), "d and r must have the same length (", d.size(), " vs ", r.size(), ")");
        const auto w = weights_or_ones(weight, d.size());
        std::vector<PhaseProbe> probes;
        for (std::size_t i = 0; i < d.size(); ++i) probes.push_back({d[i], r[i], w[i]});
        return covered_fraction(p, probes);
      },
      py::arg("pattern"), py::arg("d"), py::arg("r"), py::arg("weight") = py::none(),
      "pi_D of Boundary repair (Yang), Eq. 28, for phase probes (d, r) with optional weights under the\n"
      "pattern's closed-form single-layer coverage.");

  m.def(
      "covered_fraction_pairs",
      [](const py::object& schedule, Index n, const std::vector<Index>& u, const std::vector<Index>& t,
         std::optional<std::vector<double>> weight, int layers, Index b, std::optional<Index> w,
         std::optional<Index> e) {
        require(u.size() == t.size(), "u and t must have the same length (", u.size(), " vs ", t.size(), ")");
        const auto wt = weights_or_ones(weight, u.size());
        std::vector<PairProbe> probes;
        for (std::size_t i = 0; i < u.size(); ++i) probes.push_back({u[i], t[i], wt[i]});
        check_n(n);
        const Schedule s = to_schedule(schedule, layers, b, w, e);
        py::gil_scoped_release nogil;
        if (s.layers.size() == 1) return covered_fraction(make_mask(s.layers.front(), n), probes);
        return covered_fraction(closure(s, n), probes);
      },
      py::arg("schedule"), py::arg("n"), py::arg("u"), py::arg("t"), py::arg("weight") = py::none(),
      py::arg("layers") = 1, py::arg("b") = 128, py::arg("w") = py::none(), py::arg("e") = py::none(),
      "pi_D (Eq. 28) for (source u, target t) probes: under the single-layer edge set (one layer) or the\n"
      "L-layer closure u in R_L(t) (several layers).");

  m.def("cost_normalised_gain", &cost_normalised_gain, py::arg("acc_m"), py::arg("acc_block"), py::arg("scores_m"),
        py::arg("scores_block"),
        "U_D(M) = (Acc(M) - Acc(Block)) / (Scores(M) - Scores(Block)), Boundary repair (Yang), Eq. 33.");
  m.def("swa_gap_recovery", &swa_gap_recovery, py::arg("acc_m"), py::arg("acc_block"), py::arg("acc_swa"),
        "rho_D(M) = (Acc(M) - Acc(Block)) / (Acc(SWA) - Acc(Block)) (Boundary repair (Yang), Section 3.9).");

  m.def(
      "report",
      [](const std::string& pattern, Index n, Index b, std::optional<Index> w, std::optional<Index> e, int layers,
         const std::string& schedule, const std::string& compare, const std::string& fusion,
         const std::string& coverage, std::optional<Index> block, std::optional<Index> d_max,
         std::optional<std::pair<Index, Index>> runways, const std::string& probes, int K,
         std::optional<std::map<std::string, double>> accuracy, bool verify) {
        // Option resolution exactly as apps/coverage does it; the report itself is lib/graph's.
        check_n(n);
        require(!pattern.empty() || !schedule.empty(), "give pattern or schedule");
        Pattern base = make_pattern("full", b, w, e);
        CoverageRequest q;
        q.n = n;
        if (!schedule.empty()) q.schedule = parse_schedule(schedule, base);
        q.main = base;
        q.main.kind = pattern.empty() ? q.schedule.layers.front().kind : parse_pattern_kind(pattern);
        if (layers > 0) q.schedule = uniform_schedule(q.main, layers);
        if (!compare.empty()) {
          q.compare = base;
          q.compare->kind = parse_pattern_kind(compare);
        }
        require(fusion == "branch" || fusion == "union", "fusion must be 'branch' or 'union' (got '", fusion, "')");
        require(coverage == "direct" || coverage == "closure", "coverage must be 'direct' or 'closure' (got '",
                coverage, "')");
        q.fusion = fusion;
        q.closure_map = coverage == "closure";
        q.block = block;
        q.d_max = d_max.value_or(2 * b);
        if (q.closure_map && !d_max && n >= b) q.d_max = std::min<Index>(q.d_max, block.value_or(n / b - 1) * b);
        q.runway = runways;
        q.K = K;
        q.verify = verify;
        if (accuracy) q.accuracy = *accuracy;
        if (!probes.empty()) {
          require(K >= 2, "probes needs K (the number of classes, >= 2) for the accuracy bounds");
          cf::require_regular_input(probes, "probes");
          q.probes = parse_probe_csv(cf::read_file(probes), probes);
          q.probes_source = probes;
        }
        CoverageOutcome r;
        {
          py::gil_scoped_release nogil;
          r = coverage_report(q);
        }
        if (r.verify_failed) throw cf::Error("verification failed: a closed form disagrees with brute force");
        return from_json(r.report.body);
      },
      py::arg("pattern") = "", py::arg("n") = 1024, py::arg("b") = 128, py::arg("w") = py::none(),
      py::arg("e") = py::none(), py::arg("layers") = 0, py::arg("schedule") = "", py::arg("compare") = "",
      py::arg("fusion") = "branch", py::arg("coverage") = "direct", py::arg("block") = py::none(),
      py::arg("d_max") = py::none(), py::arg("runways") = py::none(), py::arg("probes") = "", py::arg("K") = 0,
      py::arg("accuracy") = py::none(), py::arg("verify") = false,
      "The body of `coverage --format json` as a dict (scores, coverage map, closure sizes, compare, runways,\n"
      "probes, accuracy, verify), with the tool's options as keyword arguments and its defaults\n"
      "(w = b, e = b // 2, d_max = 2b). Boundary repair (Yang), Sections 3 and 6.");
}

}  // namespace cfpy
