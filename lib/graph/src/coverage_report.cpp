#include "cf/graph/coverage_report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/graph/reachability.hpp"
#include "cf/graph/runway.hpp"
#include "cf/graph/scores.hpp"

namespace cf::graph {

using output::fmt;
using output::fmt_int;

namespace {

std::string ascii_map(const CoverageMatrix& C, Index b) {
  // One character per cell group: '#' all covered, '.' none, '+' partly.
  const Index rs = std::max<Index>({Index(1), b / 16, (C.rows() + 47) / 48}),
              cs = std::max<Index>(1, (C.cols() + 63) / 64);
  std::ostringstream os;
  os << "Coverage map C(d, r): rows d (top = 0, " << rs << " per line), columns r = 0.." << b - 1 << " (" << cs
     << " per char); '#' covered, '.' not, '+' partly\n";
  for (Index d0 = 0; d0 < C.rows(); d0 += rs) {
    char buf[32];
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

Pattern with_kind(const Pattern& base, PatternKind k) {
  Pattern p = base;
  p.kind = k;
  return p;
}

// Checks that need the whole request (each message names the option).
void check_request(const CoverageRequest& q) {
  validate(q.main, q.n);
  if (!q.schedule.layers.empty()) validate(q.schedule, q.n);
  if (q.compare) validate(*q.compare, q.n);
  const Index b = q.main.b;
  require(q.d_max >= 0, "--d-max must be >= 0 (got ", q.d_max, ")");
  // Division, not (d_max + 1) * b: no overflow for any d_max (UBSan found one here).
  require(q.d_max < kMaxCoverageEntries && b <= kMaxCoverageEntries / (q.d_max + 1),
          "coverage matrix (d_max+1) x b = ", q.d_max, "+1 x ", b, " is too large to print (limit ",
          kMaxCoverageEntries, " entries): lower --d-max");
  require(!q.closure_map || !q.schedule.layers.empty(), "--coverage closure needs --layers L or --schedule LIST");
  if (q.runway)
    require(q.runway->first >= 0 && q.runway->first < q.runway->second && q.runway->second < q.n,
            "--runways s,d must satisfy 0 <= s < d < n = ", q.n, " (got ", q.runway->first, ",", q.runway->second, ")");
  if (q.probes) require(q.K >= 2, "--probes needs --K (the number of classes, >= 2) for the accuracy bounds");
  if (!q.accuracy.empty())
    require(q.accuracy.count("model") && q.accuracy.count("block"), "--accuracy needs at least model= and block=");
}

struct Context {
  const CoverageRequest& q;
  Pattern base;
  Mask m;
  std::int64_t br = 0, un = 0;
  std::optional<Closure> clo;
  output::Report& rep;
};

void add_scores(Context& c) {
  const CoverageRequest& q = c.q;
  const Pattern& base = c.base;
  const Mask swa_m{with_kind(base, PatternKind::Swa), q.n}, full_m{with_kind(base, PatternKind::Full), q.n};
  validate(swa_m.pattern, q.n);
  const double swa_branch = double(scores_branch(swa_m)), full_branch = double(scores_branch(full_m));
  const double swa_union = double(scores_union(swa_m)), full_union = double(scores_union(full_m));
  std::vector<Pattern> rows_p = {with_kind(base, PatternKind::Block), with_kind(base, PatternKind::Swa)};
  for (const Pattern& p : {q.main, q.compare.value_or(q.main)})
    if (std::none_of(rows_p.begin(), rows_p.end(), [&](const Pattern& x) { return x.kind == p.kind; }))
      rows_p.push_back(p);
  if (std::none_of(rows_p.begin(), rows_p.end(), [](const Pattern& x) { return x.kind == PatternKind::Full; }))
    rows_p.push_back(with_kind(base, PatternKind::Full));
  output::Table st;
  st.title = str("Attention scores per head at n = ", fmt_int(q.n), " (b = ", base.b, ", w = ", base.w,
                 ", e = ", base.e, "); fusion = ", q.fusion);
  st.header = {"pattern", "branch", "union", "write-back", "branch/SWA", "union/SWA", "branch/Full"};
  nlohmann::json all_scores = nlohmann::json::object();
  for (const Pattern& p : rows_p) {
    bool ok = true;
    try {
      validate(p, q.n);
    } catch (const InvalidArgument&) {
      ok = false;  // e.g. reference bridge rows with an odd w: skip the row
    }
    if (!ok) continue;
    const Mask pm{p, q.n};
    const auto br = scores_branch(pm), un = scores_union(pm), wb = write_back(pm);
    st.add_row({output::marked(describe(p), p.kind == q.main.kind), fmt_int(br), fmt_int(un), fmt_int(wb),
                output::ratio(br / swa_branch), output::ratio(un / swa_union), output::ratio(br / full_branch)});
    all_scores[pattern_name(p.kind)] = {{"branch", br}, {"union", un}, {"write_back", wb}};
  }
  c.rep.tables.push_back(st);
  c.br = scores_branch(c.m), c.un = scores_union(c.m);
  auto& J = c.rep.body;
  J["scores"] = {{"branch", c.br},
                 {"union", c.un},
                 {"per_head", q.fusion == "branch" ? c.br : c.un},
                 {"ratio_to_swa", {{"branch", c.br / swa_branch}, {"union", c.un / swa_union}}},
                 {"ratio_to_full", {{"branch", c.br / full_branch}, {"union", c.un / full_union}}},
                 {"patterns", all_scores}};
  J["write_back"] = write_back(c.m);

  const Schedule& sched = q.schedule;
  if (!sched.layers.empty()) {
    const ScheduleScores ss = scores_schedule(sched, q.n);
    J["scores"]["schedule"] = {{"layers", describe(sched)},
                               {"branch", ss.branch},
                               {"union", ss.unions},
                               {"branch_per_layer", ss.branch_per_layer},
                               {"union_per_layer", ss.union_per_layer}};
    output::Table t;
    t.title = str("Schedule ", describe(sched), ": scores summed over ", sched.layers.size(), " layers");
    t.header = {"layers", "branch", "union"};
    t.add_row({fmt_int(static_cast<long long>(sched.layers.size())), fmt_int(ss.branch), fmt_int(ss.unions)});
    c.rep.tables.push_back(t);
  }
}

CoverageMatrix add_coverage_map(Context& c) {
  const CoverageRequest& q = c.q;
  const Index b = q.main.b, nb = num_blocks(c.m);
  CoverageMatrix C;
  Index Jblk = -1;
  if (q.closure_map) {
    // a closure map covers the b phases of one whole block: a partial block's phases past n would
    // read as "not covered" in every row (full attention showed 0.5), so only whole blocks are mapped
    require(q.n >= b, "--coverage closure maps a whole block of b = ", b, " phases, but n = ", q.n,
            " < b: raise --n to at least b or lower --b");
    // default: the last whole block (block >= 1, which has a predecessor, once n >= 2b)
    Jblk = q.block ? *q.block : q.n / b - 1;
    require(Jblk >= 0 && Jblk < nb, "--block must satisfy 0 <= J < ceil(n/b) = ", nb, " (got ", Jblk, ")");
    require((Jblk + 1) * b <= q.n, "--block ", Jblk, " is partial (positions ", Jblk * b, "..", (Jblk + 1) * b - 1,
            ", but n = ", q.n, "): choose a whole block, 0 <= J <= ", q.n / b - 1);
    // sources at d > J b would lie before position 0: they do not exist (not "uncovered")
    require(q.d_max <= Jblk * b, "--d-max ", q.d_max, " reaches before position 0 from block ", Jblk,
            " (sources exist only for d <= J b = ", Jblk * b,
            "): lower --d-max or choose a later --block / larger --n");
    C = coverage_matrix_closure(*c.clo, b, Jblk, q.d_max);
  } else {
    C = coverage_matrix_closed_form(q.main, q.d_max);
  }
  const auto frac = phase_fraction(C);
  const std::string mode = q.closure_map ? "closure" : "direct";
  c.rep.body["coverage"] = {
      {"mode", mode},           {"d_max", q.d_max},    {"b", b}, {"matrix", matrix_json(C)}, {"phase_fraction", frac},
      {"rows", "d = 0..d_max"}, {"cols", "r = 0..b-1"}};
  if (q.closure_map) c.rep.body["coverage"]["block"] = Jblk;

  std::optional<CoverageMatrix> Cc;
  if (q.compare) Cc = coverage_matrix_closed_form(*q.compare, q.d_max);
  output::Table ft;
  ft.title = str("Reachable-phase fraction by distance d (",
                 q.closure_map ? "L-layer closure" : "single-layer direct edges", "); Prop. 1: Block reaches (b-d)/b");
  ft.header = {"d", describe(q.main)};
  if (q.compare) ft.header.push_back(describe(*q.compare));
  ft.header.push_back("block (b-d)/b");
  const Index step = std::max<Index>(1, b / 8);
  for (Index d = 0; d <= q.d_max; d += step) {
    std::vector<std::string> row = {fmt_int(d), fmt(frac[d], 4)};
    if (Cc) row.push_back(fmt(phase_fraction(*Cc)[d], 4));
    row.push_back(fmt(d < b ? double(b - d) / b : 0.0, 4));
    ft.add_row(row);
  }
  c.rep.tables.push_back(ft);
  c.rep.notes.push_back(ascii_map(C, b));
  return C;
}

void add_closure_sizes(Context& c) {
  const CoverageRequest& q = c.q;
  const Schedule& sched = q.schedule;
  const auto sizes = closure_sizes(*c.clo);
  c.rep.body["closure"] = {{"layers", sched.layers.size()}, {"schedule", describe(sched)}, {"sizes", sizes}};
  output::Table t;
  t.title = str("Structural dependency sets |R_L(t)| after ", sched.layers.size(), " layers (", describe(sched), ")");
  t.header = {"t", "|R_L(t)|", "earliest source"};
  const Index b = q.main.b;
  for (Index tt : {Index(0), b - 1, b, b + 1, q.n / 2, q.n - 1}) {
    if (tt < 0 || tt >= q.n) continue;
    t.add_row({fmt_int(tt), fmt_int(sizes[tt]), fmt_int(c.clo->set(tt).front().lo)});
  }
  c.rep.tables.push_back(t);
}

void add_comparison(Context& c) {
  const CoverageRequest& q = c.q;
  const Pattern& main = q.main;
  const Pattern& cmp = *q.compare;
  const auto nr = compare_coverage(main, cmp, q.d_max);
  auto wit = [](const std::vector<std::pair<Index, Index>>& w) {
    nlohmann::json a = nlohmann::json::array();
    for (auto& [d, r] : w) a.push_back({{"d", d}, {"r", r}});
    return a;
  };
  c.rep.body["compare"] = {{"pattern", describe(cmp)},
                           {"only_pattern", nr.only_a},
                           {"only_compare", nr.only_b},
                           {"both", nr.both},
                           {"nested_pattern_in_compare", nr.nested_a_in_b()},
                           {"nested_compare_in_pattern", nr.nested_b_in_a()},
                           {"witnesses_pattern_only", wit(nr.witnesses_a)},
                           {"witnesses_compare_only", wit(nr.witnesses_b)}};
  output::Table t;
  t.title = str("Coverage sets compared over d <= ", q.d_max, " (Prop. 4: non-nested when neither contains the other)");
  t.header = {"cells", "count", "first witnesses (d, r)"};
  auto ws = [](const std::vector<std::pair<Index, Index>>& w) {
    std::string s;
    for (auto& [d, r] : w) s += str("(", d, ",", r, ") ");
    return s.empty() ? std::string("-") : s;
  };
  t.add_row({"only " + describe(main), fmt_int(nr.only_a), ws(nr.witnesses_a)});
  t.add_row({"only " + describe(cmp), fmt_int(nr.only_b), ws(nr.witnesses_b)});
  t.add_row({"both", fmt_int(nr.both), "-"});
  c.rep.tables.push_back(t);
  c.rep.notes.push_back(nr.only_a && nr.only_b ? "=> the two coverage sets are NOT nested"
                        : nr.only_a == 0       ? "=> " + describe(main) + " coverage is contained in " + describe(cmp)
                                               : "=> " + describe(cmp) + " coverage is contained in " + describe(main));
}

void add_runways(Context& c) {
  const auto [rs, rd] = *c.q.runway;
  const RunwayCount rc = runway_count(c.m, rs, rd, true, 512);
  nlohmann::json by = nlohmann::json::array();
  for (const auto& x : rc.by_length) by.push_back(x.str());
  c.rep.body["runways"] = {{"s", rs},
                           {"d", rd},
                           {"direct_edge", rc.direct_edge},
                           {"runway", rc.runway.str()},
                           {"log2_runway", rc.log2_runway},
                           {"paths", rc.paths.str()},
                           {"by_length", by}};
  output::Table t;
  t.title = str("Runway of (s=", rs, ", d=", rd, ") in one ", describe(c.q.main),
                " layer: paths of length >= 2 (Runway (Lee & Clark) Def. 3.1)");
  t.header = {"direct edge", "runway paths", "log2"};
  t.add_row({rc.direct_edge ? "yes" : "no", big_str(rc.runway), fmt(rc.log2_runway, 6)});
  c.rep.tables.push_back(t);
}

void add_probes(Context& c) {
  const CoverageRequest& q = c.q;
  const ProbeSet& probes = *q.probes;
  double pi;
  std::string how;
  if (!probes.phase.empty()) {
    pi = covered_fraction(q.main, probes.phase);
    how = "phase cells (d, r), closed-form single-layer coverage";
  } else if (c.clo) {
    pi = covered_fraction(*c.clo, probes.pairs);
    how = str("(u, t) pairs, ", q.schedule.layers.size(), "-layer closure");
  } else {
    pi = covered_fraction(c.m, probes.pairs);
    how = "(u, t) pairs, single-layer edges";
  }
  const AccuracyBound bnd = coverage_limited_bound(pi, q.K), copy = boundary_copy_bound(q.K);
  c.rep.body["probes"] = {{"file", q.probes_source},
                          {"count", probes.phase.size() + probes.pairs.size()},
                          {"kind", how},
                          {"pi", pi},
                          {"K", q.K},
                          {"accuracy_max", bnd.accuracy_max},
                          {"cross_entropy_min", bnd.cross_entropy_min},
                          {"fixed_block_accuracy_max", copy.accuracy_max},
                          {"fixed_block_cross_entropy_min", copy.cross_entropy_min}};
  output::Table t;
  t.title = str("Probe distribution ", q.probes_source, " (", how, "), K = ", q.K, " (Prop. 3, Theorem 2)");
  t.header = {"pi_D", "accuracy <=", "cross-entropy >= (nats)", "uncovered-only accuracy <= 1/K"};
  t.add_row({fmt(pi, 4), fmt(bnd.accuracy_max, 4), fmt(bnd.cross_entropy_min, 6), fmt(copy.accuracy_max, 4)});
  c.rep.tables.push_back(t);
}

void add_accuracy(Context& c) {
  const CoverageRequest& q = c.q;
  const auto& acc = q.accuracy;
  const Mask blk{with_kind(c.base, PatternKind::Block), q.n};
  const double s_m = double(q.fusion == "branch" ? c.br : c.un), s_b = double(scores_branch(blk));
  nlohmann::json aj = {{"model", acc.at("model")}, {"block", acc.at("block")}};
  output::Table t;
  t.title =
      "Accuracy diagnostics (Boundary repair (Yang) Eq. 33): U_D per added score, rho_D share of the SWA gap recovered";
  t.header = {"quantity", "value"};
  if (s_m != s_b) {
    aj["U_D"] = cost_normalised_gain(acc.at("model"), acc.at("block"), s_m, s_b);
    t.add_row({"U_D (per added score, " + q.fusion + " accounting)", fmt(aj["U_D"].get<double>(), 4)});
  }
  if (acc.count("swa")) {
    aj["swa"] = acc.at("swa");
    aj["rho_D"] = swa_gap_recovery(acc.at("model"), acc.at("block"), acc.at("swa"));
    t.add_row({"rho_D", fmt(aj["rho_D"].get<double>(), 4)});
  }
  c.rep.body["accuracy"] = aj;
  c.rep.tables.push_back(t);
}

// Returns true when a check fails.
bool add_verification(Context& c) {
  const CoverageRequest& q = c.q;
  bool failed = false;
  output::Table t;
  t.title = "Verification against brute force (edge sets built from the set definitions)";
  t.header = {"check", "pairs", "mismatches", "result"};
  nlohmann::json vj = nlohmann::json::array();
  // Closed forms against edges for every target of a prefix (edges into t depend on positions <= t).
  const Index nv = std::min<Index>(q.n, 4096);
  std::vector<Pattern> vp = {q.main};
  if (q.compare) vp.push_back(*q.compare);
  for (const Pattern& p : vp) {
    const CoverageCheck cc = verify_coverage_closed_form(make_mask(p, nv), q.d_max);
    t.add_row({"C_" + pattern_name(p.kind) + " closed form vs edges (n=" + std::to_string(nv) + ")",
               fmt_int(cc.checked), fmt_int(cc.mismatches), cc.ok() ? "ok" : "MISMATCH"});
    vj.push_back(
        {{"check", "closed_form_" + pattern_name(p.kind)}, {"pairs", cc.checked}, {"mismatches", cc.mismatches}});
    failed |= !cc.ok();
  }
  const Schedule vs = q.schedule.layers.empty() ? uniform_schedule(q.main, 1) : q.schedule;
  const ClosureCheck kc = verify_closure(vs, q.n, 1024);
  t.add_row({"closure " + describe(vs) + " vs brute force (n=" + std::to_string(kc.n_checked) + ")", fmt_int(kc.pairs),
             fmt_int(kc.mismatches), kc.ok() ? "ok" : "MISMATCH"});
  vj.push_back({{"check", "closure"}, {"pairs", kc.pairs}, {"mismatches", kc.mismatches}});
  failed |= !kc.ok();
  // Score accounting against counted edges.
  if (q.n <= 4096) {
    std::int64_t edges = 0;
    for (Index tt = 0; tt < q.n; ++tt)
      for (Index s = 0; s <= tt; ++s) edges += has_edge_brute_force(c.m, s, tt);
    const bool ok = edges == c.un;
    t.add_row({"union scores vs counted edges", fmt_int(edges), ok ? "0" : "1", ok ? "ok" : "MISMATCH"});
    vj.push_back({{"check", "union_scores"}, {"pairs", edges}, {"mismatches", ok ? 0 : 1}});
    failed |= !ok;
  }
  c.rep.body["verify"] = {{"ok", !failed}, {"checks", vj}};
  c.rep.tables.push_back(t);
  return failed;
}

}  // namespace

CoverageOutcome coverage_report(const CoverageRequest& q) {
  check_request(q);
  CoverageOutcome out;
  Context c{q, q.main, make_mask(q.main, q.n), 0, 0, std::nullopt, out.report};
  nlohmann::json params = {{"pattern", pattern_name(q.main.kind)},
                           {"n", q.n},
                           {"b", q.main.b},
                           {"w", q.main.w},
                           {"e", q.main.e},
                           {"h", q.main.h()},
                           {"fusion", q.fusion},
                           {"d_max", q.d_max},
                           {"coverage", q.closure_map ? "closure" : "direct"}};
  if (!q.schedule.layers.empty()) params["schedule"] = describe(q.schedule);
  if (q.compare) params["compare"] = pattern_name(q.compare->kind);
  out.report.meta = output::metadata("coverage", params);
  out.report.body["pattern"] = describe(q.main);

  add_scores(c);
  if (!q.schedule.layers.empty()) c.clo = closure(q.schedule, q.n);
  out.map = add_coverage_map(c);
  out.plot_map = out.map;
  if (q.closure_map && q.plot_range_from_reach && c.clo) {
    const Index b = q.main.b, J = q.block ? *q.block : q.n / b - 1;
    Index reach = 0;  // the farthest source any target of block J reaches (R_L(t) is sorted intervals)
    for (Index t = J * b; t < (J + 1) * b && t < q.n; ++t) reach = std::max(reach, t - c.clo->set(t).front().lo);
    out.reach = reach;
    // a margin past the reach shows where coverage ends; never before position 0, never too large
    Index d_plot = std::min(J * b, reach + std::max<Index>(b / 2, reach / 8));
    d_plot = std::min(d_plot, kMaxCoverageEntries / b - 1);
    if (d_plot != q.d_max) out.plot_map = coverage_matrix_closure(*c.clo, b, J, d_plot);
  }
  if (q.compare) out.compare_map = coverage_matrix_closed_form(*q.compare, q.d_max);
  if (c.clo) add_closure_sizes(c);
  if (q.compare) add_comparison(c);
  if (q.runway) add_runways(c);
  if (q.probes) add_probes(c);
  if (!q.accuracy.empty()) add_accuracy(c);
  if (q.verify) out.verify_failed = add_verification(c);
  out.map_title = str("Coverage C(d, r): ", describe(q.main),
                      q.closure_map ? str(", ", q.schedule.layers.size(), "-layer closure") : "", " (n = ", q.n, ")");
  return out;
}

std::map<std::string, double> parse_accuracy(const std::string& text) {
  std::map<std::string, double> acc;
  std::stringstream ss(text);
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    const auto eq = kv.find('=');
    require(eq != std::string::npos, "--accuracy expects 'model=A,block=A,swa=A', got '", kv, "'");
    const std::string k = kv.substr(0, eq), v_text = kv.substr(eq + 1);
    require(k == "model" || k == "block" || k == "swa", "--accuracy keys are model, block, swa (got '", k, "')");
    char* end = nullptr;
    const double v = std::strtod(v_text.c_str(), &end);
    require(!v_text.empty() && end == v_text.c_str() + v_text.size(), "--accuracy: '", kv, "' is not key=number");
    require(std::isfinite(v) && v >= 0 && v <= 1, "--accuracy values must lie in [0, 1] (got ", k, "=", v_text, ")");
    acc[k] = v;
  }
  require(acc.count("model") && acc.count("block"), "--accuracy needs at least model= and block=");
  return acc;
}

std::pair<Index, Index> parse_runway(const std::string& text) {
  const auto comma = text.find(',');
  auto whole = [&](const std::string& s, Index* v) {
    if (s.empty() || s.find_first_not_of("0123456789", s[0] == '-' ? 1 : 0) != std::string::npos) return false;
    errno = 0;
    *v = std::strtoll(s.c_str(), nullptr, 10);
    return errno != ERANGE;
  };
  Index s = 0, d = 0;
  require(comma != std::string::npos && whole(text.substr(0, comma), &s) && whole(text.substr(comma + 1), &d),
          "--runways expects 's,d' (two positions), got '", text, "'");
  return {s, d};
}

std::string dense_mask_csv(const Mask& m) {
  const auto A = dense_mask(m, 4096);
  const Index n = m.n;
  std::string csv;
  csv.reserve(static_cast<size_t>(2 * n * n));
  for (Index t = 0; t < n; ++t) {
    for (Index s = 0; s < n; ++s) {
      csv += char('0' + A(t, s));
      csv += s + 1 < n ? ',' : '\n';
    }
  }
  return csv;
}

}  // namespace cf::graph
