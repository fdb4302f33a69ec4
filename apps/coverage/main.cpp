// coverage — mask-graph reachability and the phase-conditioned coverage functions of seed 002.
// Thin app: options, set-up, and a report of lib/graph results (docs/conventions.md).
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/graph/coverage.hpp"
#include "cf/graph/reachability.hpp"
#include "cf/graph/runway.hpp"
#include "cf/graph/scores.hpp"

using namespace cf;
using namespace cf::graph;
using output::fmt;
using output::fmt_int;

namespace {

// Largest n the tool accepts: union accounting visits every target once.
constexpr Index kMaxN = Index(1) << 26;
// Largest coverage matrix the tool prints or serialises, (d_max + 1) * b entries.
constexpr Index kMaxMatrix = Index(1) << 22;

struct Options {
  std::string pattern, schedule, compare, fusion = "branch", coverage_mode = "direct", runways;
  std::string probes, accuracy, export_mask;
  int K = 0;
  Index n = 1024, b = 128, w = -1, e = -1, d_max = -1, block = -1;
  int layers = 0;
  bool verify = false;
  app::CommonOptions common;
};

std::string ascii_map(const CoverageMatrix& C, Index b) {
  // One character per cell group: '#' all covered, '.' none, '+' partly.
  const Index rs = std::max<Index>({Index(1), b / 16, (C.rows() + 47) / 48}), cs = std::max<Index>(1, (C.cols() + 63) / 64);
  std::ostringstream os;
  os << "Coverage map C(d, r): rows d (top = 0, " << rs << " per line), columns r = 0.." << b - 1 << " ("
     << cs << " per char); '#' covered, '.' not, '+' partly\n";
  for (Index d0 = 0; d0 < C.rows(); d0 += rs) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "  d=%5lld ", static_cast<long long>(d0));
    os << buf;
    for (Index r0 = 0; r0 < C.cols(); r0 += cs) {
      int on = 0, all = 0;
      for (Index d = d0; d < std::min(C.rows(), d0 + rs); ++d)
        for (Index r = r0; r < std::min(C.cols(), r0 + cs); ++r) on += C(d, r), ++all;
      os << (on == all ? '#' : on == 0 ? '.' : '+');
    }
    os << "\n";
  }
  return os.str();
}

nlohmann::json matrix_json(const CoverageMatrix& C) {
  nlohmann::json rows = nlohmann::json::array();
  for (Index d = 0; d < C.rows(); ++d) {
    std::vector<int> row(C.cols());
    for (Index r = 0; r < C.cols(); ++r) row[r] = C(d, r);
    rows.push_back(row);
  }
  return rows;
}

std::string big_str(const BigInt& x) {
  std::string s = x.str();
  if (s.size() <= 30) return s;
  return s.substr(0, 1) + "." + s.substr(1, 5) + "e+" + std::to_string(s.size() - 1);
}

void run(const Options& o) {
  // ---- resolve and validate parameters --------------------------------------------------
  require(o.n >= 1, "--n must be >= 1 (got ", o.n, ")");
  require(o.n <= kMaxN, "--n must be <= ", kMaxN, " (union accounting visits every position; got ", o.n, ")");
  require(o.b >= 1, "--b must be >= 1 (got ", o.b, ")");
  Pattern base;
  base.b = o.b;
  base.w = o.w < 0 ? o.b : o.w;
  base.e = o.e < 0 ? std::max<Index>(1, o.b / 2) : o.e;
  require(!o.pattern.empty() || !o.schedule.empty(), "give --pattern P or --schedule LIST");
  Schedule sched;
  if (!o.schedule.empty()) sched = parse_schedule(o.schedule, base);
  Pattern main = base;
  main.kind = o.pattern.empty() ? sched.layers.front().kind : parse_pattern_kind(o.pattern);
  if (o.layers > 0) sched = uniform_schedule(main, o.layers);
  validate(main, o.n);
  if (!sched.layers.empty()) validate(sched, o.n);
  const Index d_max = o.d_max < 0 ? 2 * o.b : o.d_max;
  require((d_max + 1) * o.b <= kMaxMatrix, "coverage matrix (d_max+1) x b = ", d_max + 1, " x ", o.b,
          " is too large to print (limit ", kMaxMatrix, " entries): lower --d-max");
  const bool use_closure = o.coverage_mode == "closure";
  require(!use_closure || !sched.layers.empty(), "--coverage closure needs --layers L or --schedule LIST");
  std::optional<Pattern> cmp;
  if (!o.compare.empty()) {
    cmp = base;
    cmp->kind = parse_pattern_kind(o.compare);
    validate(*cmp, o.n);
  }
  Index rs = -1, rd = -1;
  if (!o.runways.empty()) {
    char comma;
    std::istringstream is(o.runways);
    long long a, c;
    require(static_cast<bool>(is >> a >> comma >> c) && comma == ',' && is.peek() == EOF,
            "--runways expects 's,d' (two positions), got '", o.runways, "'");
    rs = a, rd = c;
  }
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.export_mask, "--export-mask");
  std::optional<ProbeSet> probes;
  if (!o.probes.empty()) {
    require(o.K >= 2, "--probes needs --K (the number of classes, >= 2) for the accuracy bounds");
    probes = parse_probe_csv(read_file(o.probes), o.probes);
  }
  std::map<std::string, double> acc;
  if (!o.accuracy.empty()) {
    std::stringstream ss(o.accuracy);
    std::string kv;
    while (std::getline(ss, kv, ',')) {
      const auto eq = kv.find('=');
      require(eq != std::string::npos, "--accuracy expects 'model=A,block=A,swa=A', got '", kv, "'");
      const std::string k = kv.substr(0, eq);
      require(k == "model" || k == "block" || k == "swa", "--accuracy keys are model, block, swa (got '", k, "')");
      double v;
      try {
        v = std::stod(kv.substr(eq + 1));
      } catch (const std::exception&) {
        throw InvalidArgument(str("--accuracy: '", kv, "' is not key=number"));
      }
      require(v >= 0 && v <= 1, "--accuracy values must lie in [0, 1] (got ", k, "=", v, ")");
      acc[k] = v;
    }
    require(acc.count("model") && acc.count("block"), "--accuracy needs at least model= and block=");
  }

  const Mask m = make_mask(main, o.n);
  const Index nb = num_blocks(m);

  nlohmann::json params = {{"pattern", pattern_name(main.kind)}, {"n", o.n}, {"b", base.b}, {"w", base.w},
                           {"e", base.e}, {"h", base.h()}, {"fusion", o.fusion}, {"d_max", d_max},
                           {"coverage", o.coverage_mode}};
  if (!sched.layers.empty()) params["schedule"] = describe(sched);
  if (cmp) params["compare"] = pattern_name(cmp->kind);

  output::Report rep;
  rep.meta = output::metadata("coverage", params);
  auto& J = rep.body;
  J["pattern"] = describe(main);

  // ---- score accounting ----------------------------------------------------------------
  auto ref = [&](PatternKind k) {
    Pattern p = base;
    p.kind = k;
    return p;
  };
  const Mask swa_m{ref(PatternKind::Swa), o.n}, full_m{ref(PatternKind::Full), o.n};
  validate(swa_m.pattern, o.n);
  const double swa_branch = double(scores_branch(swa_m)), full_branch = double(scores_branch(full_m));
  const double swa_union = double(scores_union(swa_m)), full_union = double(scores_union(full_m));
  std::vector<Pattern> rows_p = {ref(PatternKind::Block), ref(PatternKind::Swa)};
  for (const Pattern& p : {main, cmp.value_or(main)})
    if (std::none_of(rows_p.begin(), rows_p.end(), [&](const Pattern& q) { return q.kind == p.kind; })) rows_p.push_back(p);
  if (std::none_of(rows_p.begin(), rows_p.end(), [](const Pattern& q) { return q.kind == PatternKind::Full; }))
    rows_p.push_back(ref(PatternKind::Full));
  output::Table st;
  st.title = str("Attention scores per head at n = ", fmt_int(o.n), " (b = ", base.b, ", w = ", base.w, ", e = ",
                 base.e, "); fusion = ", o.fusion);
  st.header = {"pattern", "branch", "union", "write-back", "branch/SWA", "union/SWA", "branch/Full"};
  nlohmann::json all_scores = nlohmann::json::object();
  for (const Pattern& p : rows_p) {
    bool ok = true;
    try {
      validate(p, o.n);
    } catch (const InvalidArgument&) {
      ok = false;  // e.g. reference bridge rows with an odd w: skip the row
    }
    if (!ok) continue;
    const Mask pm{p, o.n};
    const auto br = scores_branch(pm), un = scores_union(pm), wb = write_back(pm);
    st.add_row({output::marked(describe(p), p.kind == main.kind), fmt_int(br), fmt_int(un), fmt_int(wb),
                output::ratio(br / swa_branch), output::ratio(un / swa_union), output::ratio(br / full_branch)});
    all_scores[pattern_name(p.kind)] = {{"branch", br}, {"union", un}, {"write_back", wb}};
  }
  rep.tables.push_back(st);
  const auto br = scores_branch(m), un = scores_union(m);
  J["scores"] = {{"branch", br},
                 {"union", un},
                 {"per_head", o.fusion == "branch" ? br : un},
                 {"ratio_to_swa", {{"branch", br / swa_branch}, {"union", un / swa_union}}},
                 {"ratio_to_full", {{"branch", br / full_branch}, {"union", un / full_union}}},
                 {"patterns", all_scores}};
  J["write_back"] = write_back(m);

  if (!sched.layers.empty()) {
    const ScheduleScores ss = scores_schedule(sched, o.n);
    J["scores"]["schedule"] = {{"layers", describe(sched)},
                               {"branch", ss.branch},
                               {"union", ss.unions},
                               {"branch_per_layer", ss.branch_per_layer},
                               {"union_per_layer", ss.union_per_layer}};
    output::Table t;
    t.title = str("Schedule ", describe(sched), ": scores summed over ", sched.layers.size(), " layers");
    t.header = {"layers", "branch", "union"};
    t.add_row({std::to_string(sched.layers.size()), fmt_int(ss.branch), fmt_int(ss.unions)});
    rep.tables.push_back(t);
  }

  // ---- coverage map ---------------------------------------------------------------------
  std::optional<Closure> clo;
  if (!sched.layers.empty()) clo = closure(sched, o.n);
  CoverageMatrix C;
  Index Jblk = -1;
  if (use_closure) {
    Jblk = o.block >= 0 ? o.block : std::max<Index>(1, std::min(nb - 1, o.n / o.b - 1));
    require(Jblk >= 0 && Jblk < nb, "--block must satisfy 0 <= J < ceil(n/b) = ", nb, " (got ", Jblk, ")");
    C = coverage_matrix_closure(*clo, o.b, Jblk, d_max);
  } else {
    C = coverage_matrix_closed_form(main, d_max);
  }
  const auto frac = phase_fraction(C);
  J["coverage"] = {{"mode", o.coverage_mode}, {"d_max", d_max}, {"b", o.b}, {"matrix", matrix_json(C)},
                   {"phase_fraction", frac}, {"rows", "d = 0..d_max"}, {"cols", "r = 0..b-1"}};
  if (use_closure) J["coverage"]["block"] = Jblk;

  std::optional<CoverageMatrix> Cc;
  if (cmp) Cc = coverage_matrix_closed_form(*cmp, d_max);
  output::Table ft;
  ft.title = str("Reachable-phase fraction by distance d (", use_closure ? "L-layer closure" : "single-layer direct edges",
                 "); Prop. 1: Block reaches (b-d)/b");
  ft.header = {"d", describe(main)};
  if (cmp) ft.header.push_back(describe(*cmp));
  ft.header.push_back("block (b-d)/b");
  const Index step = std::max<Index>(1, o.b / 8);
  for (Index d = 0; d <= d_max; d += step) {
    std::vector<std::string> row = {std::to_string(d), fmt(frac[d], 4)};
    if (Cc) row.push_back(fmt(phase_fraction(*Cc)[d], 4));
    row.push_back(fmt(d < o.b ? double(o.b - d) / o.b : 0.0, 4));
    ft.add_row(row);
  }
  rep.tables.push_back(ft);
  rep.notes.push_back(ascii_map(C, o.b));

  // ---- closure sizes ----------------------------------------------------------------------
  if (clo) {
    const auto sizes = closure_sizes(*clo);
    J["closure"] = {{"layers", sched.layers.size()}, {"schedule", describe(sched)}, {"sizes", sizes}};
    output::Table t;
    t.title = str("Structural dependency sets |R_L(t)| after ", sched.layers.size(), " layers (", describe(sched), ")");
    t.header = {"t", "|R_L(t)|", "earliest source"};
    for (Index tt : {Index(0), o.b - 1, o.b, o.b + 1, o.n / 2, o.n - 1}) {
      if (tt < 0 || tt >= o.n) continue;
      t.add_row({std::to_string(tt), fmt_int(sizes[tt]), std::to_string(clo->set(tt).front().lo)});
    }
    rep.tables.push_back(t);
  }

  // ---- comparison (Prop. 4) ------------------------------------------------------------
  if (cmp) {
    const auto nr = compare_coverage(main, *cmp, d_max);
    auto wit = [](const std::vector<std::pair<Index, Index>>& w) {
      nlohmann::json a = nlohmann::json::array();
      for (auto& [d, r] : w) a.push_back({{"d", d}, {"r", r}});
      return a;
    };
    J["compare"] = {{"pattern", describe(*cmp)}, {"only_pattern", nr.only_a}, {"only_compare", nr.only_b},
                    {"both", nr.both}, {"nested_pattern_in_compare", nr.nested_a_in_b()},
                    {"nested_compare_in_pattern", nr.nested_b_in_a()}, {"witnesses_pattern_only", wit(nr.witnesses_a)},
                    {"witnesses_compare_only", wit(nr.witnesses_b)}};
    output::Table t;
    t.title = str("Coverage sets compared over d <= ", d_max, " (Prop. 4: non-nested when neither contains the other)");
    t.header = {"cells", "count", "first witnesses (d, r)"};
    auto ws = [](const std::vector<std::pair<Index, Index>>& w) {
      std::string s;
      for (auto& [d, r] : w) s += str("(", d, ",", r, ") ");
      return s.empty() ? std::string("-") : s;
    };
    t.add_row({"only " + describe(main), fmt_int(nr.only_a), ws(nr.witnesses_a)});
    t.add_row({"only " + describe(*cmp), fmt_int(nr.only_b), ws(nr.witnesses_b)});
    t.add_row({"both", fmt_int(nr.both), "-"});
    rep.tables.push_back(t);
    rep.notes.push_back(nr.only_a && nr.only_b ? "=> the two coverage sets are NOT nested"
                        : nr.only_a == 0       ? "=> " + describe(main) + " coverage is contained in " + describe(*cmp)
                                               : "=> " + describe(*cmp) + " coverage is contained in " + describe(main));
  }

  // ---- runways -----------------------------------------------------------------------------
  if (rs >= 0 || rd >= 0) {
    const RunwayCount rc = runway_count(m, rs, rd, true, 512);
    nlohmann::json by = nlohmann::json::array();
    for (const auto& x : rc.by_length) by.push_back(x.str());
    J["runways"] = {{"s", rs}, {"d", rd}, {"direct_edge", rc.direct_edge}, {"runway", rc.runway.str()},
                    {"log2_runway", rc.log2_runway}, {"paths", rc.paths.str()}, {"by_length", by}};
    output::Table t;
    t.title = str("Runway of (s=", rs, ", d=", rd, ") in one ", describe(main), " layer: paths of length >= 2 (seed 000 Def. 3.1)");
    t.header = {"direct edge", "runway paths", "log2"};
    t.add_row({rc.direct_edge ? "yes" : "no", big_str(rc.runway), fmt(rc.log2_runway, 6)});
    rep.tables.push_back(t);
  }

  // ---- probe distribution: pi_D and the bounds of Prop. 3 ---------------------------------
  if (probes) {
    double pi;
    std::string how;
    if (!probes->phase.empty()) {
      pi = covered_fraction(main, probes->phase);
      how = "phase cells (d, r), closed-form single-layer coverage";
    } else if (clo) {
      pi = covered_fraction(*clo, probes->pairs);
      how = str("(u, t) pairs, ", sched.layers.size(), "-layer closure");
    } else {
      pi = covered_fraction(m, probes->pairs);
      how = "(u, t) pairs, single-layer edges";
    }
    const AccuracyBound bnd = coverage_limited_bound(pi, o.K), copy = boundary_copy_bound(o.K);
    J["probes"] = {{"file", o.probes}, {"count", probes->phase.size() + probes->pairs.size()}, {"kind", how},
                   {"pi", pi}, {"K", o.K}, {"accuracy_max", bnd.accuracy_max},
                   {"cross_entropy_min", bnd.cross_entropy_min},
                   {"fixed_block_accuracy_max", copy.accuracy_max}, {"fixed_block_cross_entropy_min", copy.cross_entropy_min}};
    output::Table t;
    t.title = str("Probe distribution ", o.probes, " (", how, "), K = ", o.K, " (Prop. 3, Theorem 2)");
    t.header = {"pi_D", "accuracy <=", "cross-entropy >= (nats)", "uncovered-only accuracy <= 1/K"};
    t.add_row({fmt(pi, 6), fmt(bnd.accuracy_max, 6), fmt(bnd.cross_entropy_min, 6), fmt(copy.accuracy_max, 6)});
    rep.tables.push_back(t);
  }
  if (!acc.empty()) {
    const Mask blk{ref(PatternKind::Block), o.n};
    const double s_m = double(o.fusion == "branch" ? br : un), s_b = double(scores_branch(blk));
    nlohmann::json aj = {{"model", acc["model"]}, {"block", acc["block"]}};
    output::Table t;
    t.title = "Accuracy diagnostics (seed 002 Eq. 33): U_D per added score, rho_D share of the SWA gap recovered";
    t.header = {"quantity", "value"};
    if (s_m != s_b) {
      aj["U_D"] = cost_normalised_gain(acc["model"], acc["block"], s_m, s_b);
      t.add_row({"U_D (per added score, " + o.fusion + " accounting)", fmt(aj["U_D"].get<double>(), 6)});
    }
    if (acc.count("swa")) {
      aj["swa"] = acc["swa"];
      aj["rho_D"] = swa_gap_recovery(acc["model"], acc["block"], acc["swa"]);
      t.add_row({"rho_D", fmt(aj["rho_D"].get<double>(), 6)});
    }
    J["accuracy"] = aj;
    rep.tables.push_back(t);
  }

  // ---- verification ------------------------------------------------------------------------
  bool verify_failed = false;
  if (o.verify) {
    output::Table t;
    t.title = "Verification against brute force (edge sets built from the set definitions)";
    t.header = {"check", "pairs", "mismatches", "result"};
    nlohmann::json vj = nlohmann::json::array();
    // Closed forms against edges for every target of a prefix (edges into t depend on positions <= t).
    const Index nv = std::min<Index>(o.n, 4096);
    std::vector<Pattern> vp = {main};
    if (cmp) vp.push_back(*cmp);
    for (const Pattern& p : vp) {
      const CoverageCheck cc = verify_coverage_closed_form(make_mask(p, nv), d_max);
      t.add_row({"C_" + pattern_name(p.kind) + " closed form vs edges (n=" + std::to_string(nv) + ")",
                 fmt_int(cc.checked), fmt_int(cc.mismatches), cc.ok() ? "ok" : "MISMATCH"});
      vj.push_back({{"check", "closed_form_" + pattern_name(p.kind)}, {"pairs", cc.checked}, {"mismatches", cc.mismatches}});
      verify_failed |= !cc.ok();
    }
    const Schedule vs = sched.layers.empty() ? uniform_schedule(main, 1) : sched;
    const ClosureCheck kc = verify_closure(vs, o.n, 1024);
    t.add_row({"closure " + describe(vs) + " vs brute force (n=" + std::to_string(kc.n_checked) + ")", fmt_int(kc.pairs),
               fmt_int(kc.mismatches), kc.ok() ? "ok" : "MISMATCH"});
    vj.push_back({{"check", "closure"}, {"pairs", kc.pairs}, {"mismatches", kc.mismatches}});
    verify_failed |= !kc.ok();
    // Score accounting against counted edges.
    if (o.n <= 4096) {
      std::int64_t edges = 0;
      for (Index tt = 0; tt < o.n; ++tt)
        for (Index s = 0; s <= tt; ++s) edges += has_edge_brute_force(m, s, tt);
      const bool ok = edges == un;
      t.add_row({"union scores vs counted edges", fmt_int(edges), ok ? "0" : "1", ok ? "ok" : "MISMATCH"});
      vj.push_back({{"check", "union_scores"}, {"pairs", edges}, {"mismatches", ok ? 0 : 1}});
      verify_failed |= !ok;
    }
    J["verify"] = {{"ok", !verify_failed}, {"checks", vj}};
    rep.tables.push_back(t);
  }

  if (!o.export_mask.empty()) {
    // Dense 0/1 mask, row = target t, column = source s (row-major, what numpy.loadtxt reads).
    const auto A = dense_mask(m, 4096);
    std::string csv;
    csv.reserve(static_cast<size_t>(2 * o.n * o.n));
    for (Index t = 0; t < o.n; ++t) {
      for (Index s = 0; s < o.n; ++s) {
        csv += char('0' + A(t, s));
        csv += s + 1 < o.n ? ',' : '\n';
      }
    }
    write_file_atomic(o.export_mask, csv);
  }
  if (!o.common.plot.empty()) {
    plot::Heatmap h;
    h.title = str("Coverage C(d, r): ", describe(main), use_closure ? str(", ", sched.layers.size(), "-layer closure") : "",
                  " (n = ", o.n, ")");
    h.xlabel = "target phase r (t = jb + r)";
    h.ylabel = "backward distance d (source u = t - d)";
    h.y_up = true;
    if (Cc) {  // --compare: which pattern covers each cell
      h.title = str("Coverage C(d, r): ", describe(main), " vs ", describe(*cmp), " (n = ", o.n, ")");
      h.values = (C.cast<double>() + 2.0 * Cc->cast<double>());
      h.categories = {"neither", "only " + describe(main), "only " + describe(*cmp), "both"};
      h.value_label = "covered by";
    } else {
      h.values = C.cast<double>();
      h.categories = {"not covered", "covered"};
      h.value_label = "";
    }
    plot::save(h, o.common.plot);
  }
  app::emit(rep, o.common);
  if (verify_failed) throw Error("verification failed: a closed form disagrees with brute force (see the table)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"coverage: mask-graph reachability, phase-conditioned coverage C(d, r), score accounting and "
               "runway counts for block-sparse attention and its boundary repairs (seed 002, SPEC §1).",
               "coverage"};
  app.add_option("--pattern", o.pattern, "Mask pattern: full | block | swa | bridge | pbb | se-bridge");
  app.add_option("--n", o.n, "Sequence length n")->capture_default_str();
  app.add_option("--b", o.b, "Block size b")->capture_default_str();
  app.add_option("--w", o.w, "Window width w (swa; bridge/pbb width, h = w/2) [default: b]");
  app.add_option("--e", o.e, "SE-Bridge extension e [default: b/2]");
  auto* layers = app.add_option("--layers", o.layers, "Closure depth L (same pattern at every layer)")->check(CLI::Range(1, 1000000));
  auto* sched = app.add_option("--schedule", o.schedule, "Per-layer patterns, e.g. 'pbb,pbb,pbb,full' or 'swa*3,full'");
  layers->excludes(sched);
  sched->excludes(layers);
  app.add_option("--fusion", o.fusion, "Bridge fusion for the headline score count: branch | union")
      ->check(CLI::IsMember({"branch", "union"}))
      ->capture_default_str();
  app.add_option("--compare", o.compare, "Second pattern: coverage fractions side by side and non-nestedness witnesses");
  app.add_option("--d-max", o.d_max, "Largest distance d in the coverage map [default: 2b]");
  app.add_option("--coverage", o.coverage_mode, "Coverage map from single-layer direct edges or the L-layer closure")
      ->check(CLI::IsMember({"direct", "closure"}))
      ->capture_default_str();
  app.add_option("--block", o.block, "Target block J for --coverage closure [default: last full block]");
  app.add_flag("--verify", o.verify, "Check closed forms, closure and score counts against brute force; exit 1 on mismatch");
  app.add_option("--runways", o.runways, "Count runway paths from s to d: 's,d'");
  app.add_option("--probes", o.probes, "Probe distribution CSV with header 'd,r[,weight]' or 'u,t[,weight]': pi_D and Prop. 3 bounds");
  app.add_option("--K", o.K, "Number of classes of the K-way copy probes (with --probes)")->check(CLI::Range(2, 1 << 30));
  app.add_option("--accuracy", o.accuracy, "Measured accuracies 'model=A,block=A[,swa=A]': U_D and rho_D");
  app.add_option("--export-mask", o.export_mask, "Write the dense 0/1 mask (row t, column s) as CSV; n <= 4096");
  app::add_common_options(app, o.common);
  app.footer(
      "Examples:\n"
      "  coverage --pattern se-bridge --b 128                 # paper geometry, n = 1024\n"
      "  coverage --pattern pbb --compare swa --format json --out pbb.json\n"
      "  coverage --schedule pbb,pbb,pbb,full --n 8192 --b 128   # 3:1 union accounting\n"
      "  coverage --pattern swa --w 128 --layers 32 --n 65536 --coverage closure\n"
      "  coverage --pattern se-bridge --verify --plot se.svg\n"
      "  coverage --pattern full --runways 0,40\n"
      "  coverage --pattern pbb --probes probes.csv --K 8 --accuracy model=0.61,block=0.42,swa=0.70\n"
      "Exit codes: 0 ok, 1 runtime failure or --verify mismatch, 2 invalid input.");
  return app::run(app, argc, argv, [&] { run(o); });
}
