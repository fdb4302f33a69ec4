// coverage — mask-graph reachability and the phase-conditioned coverage functions of Boundary repair (Yang).
// Thin app: an options struct, setup (CLI11 declarations with validators) and run (parse the
// options into a cf::graph::CoverageRequest, write the report of lib/graph; docs/conventions.md).
#include <optional>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/core/validators.hpp"
#include "cf/graph/coverage_report.hpp"

using namespace cf;
using namespace cf::graph;

namespace {

// Largest n the tool accepts: union accounting visits every target once.
constexpr Index kMaxN = Index(1) << 26;
// Largest b, w, e, d_max and J: anything larger than kMaxN means the same as kMaxN or is refused later.
constexpr long long kMaxParam = (1LL << 31) - 1;

struct Options {
  std::string pattern, schedule, compare, fusion = "branch", coverage_mode = "direct", runways;
  std::string probes, accuracy, export_mask;
  int K = 0;
  Index n = 1024, b = 128;
  std::optional<Index> w, e, d_max, block;  // unset: defaults derived from b (see setup)
  int layers = 0;
  bool verify = false;
  app::CommonOptions common;
};

bool uses_kind(const CoverageRequest& q, PatternKind k) {
  if (q.main.kind == k || (q.compare && q.compare->kind == k)) return true;
  for (const Pattern& p : q.schedule.layers)
    if (p.kind == k) return true;
  return false;
}

void run(const CLI::App& app, const Options& o) {
  require(o.n >= 1, "--n must be >= 1 (got ", o.n, ")");
  require(o.n <= kMaxN, "--n must be <= ", kMaxN, " (union accounting visits every position; got ", o.n, ")");
  require(o.b >= 1, "--b must be >= 1 (got ", o.b, ")");
  require(!o.pattern.empty() || !o.schedule.empty(), "give --pattern P or --schedule LIST");
  Pattern base;
  base.b = o.b;
  base.w = o.w.value_or(o.b);
  base.e = o.e.value_or(std::max<Index>(1, o.b / 2));

  CoverageRequest q;
  q.n = o.n;
  if (!o.schedule.empty()) q.schedule = parse_schedule(o.schedule, base);
  q.main = base;
  q.main.kind = o.pattern.empty() ? q.schedule.layers.front().kind : parse_pattern_kind(o.pattern);
  if (o.layers > 0) q.schedule = uniform_schedule(q.main, o.layers);
  if (!o.compare.empty()) {
    q.compare = base;
    q.compare->kind = parse_pattern_kind(o.compare);
  }
  q.fusion = o.fusion;
  q.closure_map = o.coverage_mode == "closure";
  q.block = o.block;
  q.d_max = o.d_max.value_or(2 * o.b);
  // a closure map of block J has sources only at d <= J b (position 0 is the first): the default
  // rows stop there (an explicit --d-max beyond it is refused by the library, naming the limit)
  if (q.closure_map && !o.d_max && o.n >= o.b)
    q.d_max = std::min<Index>(q.d_max, o.block.value_or(o.n / o.b - 1) * o.b);
  if (!o.runways.empty()) q.runway = parse_runway(o.runways);
  q.K = o.K;
  q.verify = o.verify;
  q.plot_range_from_reach = !o.d_max && !o.common.plot.empty();
  if (!o.accuracy.empty()) q.accuracy = parse_accuracy(o.accuracy);
  // Options the request ignores are refused rather than silently dropped.
  app::refuse_unless(app, "--block", q.closure_map, "--coverage closure");
  app::refuse_unless(app, "--K", !o.probes.empty(), "--probes FILE");
  app::refuse_unless(app, "--e", uses_kind(q, PatternKind::SeBridge),
                     "a se-bridge pattern (--pattern/--compare/--schedule)");
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  app::check_output(o.export_mask, "--export-mask");
  if (!o.probes.empty()) {
    require(o.K >= 2, "--probes needs --K (the number of classes, >= 2) for the accuracy bounds");
    require_regular_input(o.probes, "--probes");  // a FIFO would block read_file
    q.probes = parse_probe_csv(read_file(o.probes), o.probes);
    q.probes_source = o.probes;
  }
  const CoverageOutcome r = coverage_report(q);

  if (!o.export_mask.empty()) write_file_atomic(o.export_mask, dense_mask_csv(make_mask(q.main, q.n)));
  if (!o.common.plot.empty()) {
    plot::Heatmap h;
    h.title = r.map_title;
    h.xlabel = "target phase r (t = jb + r)";
    h.ylabel = "backward distance d (source u = t - d)";
    h.y_up = true;
    if (r.compare_map) {  // --compare: which pattern covers each cell
      h.title = str("Coverage C(d, r): ", describe(q.main), " vs ", describe(*q.compare), " (n = ", q.n, ")");
      h.values = (r.map.cast<double>() + 2.0 * r.compare_map->cast<double>());
      h.categories = {"neither", "only " + describe(q.main), "only " + describe(*q.compare), "both"};
      h.value_label = "covered by";
    } else {
      h.values = r.plot_map.cast<double>();
      h.categories = {"not covered", "covered"};
      h.value_label = "";
      if (r.reach >= 0)
        h.title += str(", d = 0..", r.plot_map.rows() - 1, " (reach ", r.reach, ")");  // --d-max overrides
    }
    plot::save(h, o.common.plot);
  }
  app::emit(r.report, o.common);
  if (r.verify_failed) throw Error("verification failed: a closed form disagrees with brute force (see the table)");
}

void setup(CLI::App& app, Options& o) {
  app.add_option("--pattern", o.pattern,
                 "Mask pattern: full | block | swa | bridge | pbb | se-bridge (any case; aliases: causal = full, "
                 "sliding or window = swa, se, sebridge or se_bridge = se-bridge)");
  app.add_option("--n", o.n, "Sequence length n")->check(app::integer())->capture_default_str();
  app.add_option("--b", o.b, "Block size b")->check(app::integer(1, kMaxParam))->capture_default_str();
  app.add_option("--w", o.w, "Window width w (swa; bridge/pbb width, h = w/2) [default: b]")
      ->check(app::integer(1, kMaxParam));
  app.add_option("--e", o.e, "SE-Bridge extension e, 1 <= e <= b [default: b/2]")->check(app::integer(1, kMaxParam));
  auto* layers = app.add_option("--layers", o.layers, "Closure depth L (same pattern at every layer)")
                     ->check(app::integer(1, 1000000));
  auto* sched = app.add_option("--schedule", o.schedule,
                               "Per-layer patterns, e.g. 'pbb,pbb,pbb,full' or 'swa*3,full' (names as --pattern)");
  layers->excludes(sched);
  sched->excludes(layers);
  app.add_option("--fusion", o.fusion, "Bridge fusion for the headline score count: branch | union")
      ->check(CLI::IsMember({"branch", "union"}))
      ->capture_default_str();
  app.add_option("--compare", o.compare,
                 "Second pattern (names as --pattern): coverage fractions side by side and non-nestedness witnesses");
  app.add_option("--d-max", o.d_max, "Largest distance d in the coverage map, >= 0 [default: 2b]")
      ->check(app::integer(0, kMaxParam));
  app.add_option("--coverage", o.coverage_mode, "Coverage map from single-layer direct edges or the L-layer closure")
      ->check(CLI::IsMember({"direct", "closure"}))
      ->capture_default_str();
  app.add_option("--block", o.block, "Target block J >= 0 for --coverage closure [default: last full block]")
      ->check(app::integer(0, kMaxParam));
  app.add_flag("--verify", o.verify,
               "Check closed forms, closure and score counts against brute force; exit 1 on mismatch");
  app.add_option("--runways", o.runways, "Count runway paths from s to d: 's,d' with 0 <= s < d < n");
  app.add_option("--probes", o.probes,
                 "Probe distribution CSV with header 'd,r[,weight]' or 'u,t[,weight]': pi_D and Prop. 3 bounds");
  app.add_option("--K", o.K, "Number of classes of the K-way copy probes (with --probes)")
      ->check(app::integer(2, 1 << 30));
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
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "coverage: mask-graph reachability, phase-conditioned coverage C(d, r), score accounting and "
      "runway counts for block-sparse attention and its boundary repairs (Boundary repair (Yang), docs/spec.md §1).",
      "coverage"};
  setup(app, o);
  return app::run(app, argc, argv, [&] { run(app, o); });
}
