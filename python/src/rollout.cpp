// causalflow.rollout: residual-aware attention rollout of Position bias (Herasimchyk et al.) —
// presets, model configs, the three variants, context sweeps, monotonicity, the finite-depth
// propositions and the infinite-depth dichotomy — and the Jacobian bound of Runway (Lee & Clark).
// Every function calls lib/rollout (cf/rollout/*.hpp); the sources are resolved by
// cf::rollout::make_source exactly as the `rollout` tool resolves its options.
#include "cf/rollout/rollout.hpp"

#include <cmath>

#include "cf/core/error.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/jacobian_bound.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/model_config.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/sweep.hpp"
#include "cf/rollout/theory_report.hpp"
#include "cf/rollout/variants.hpp"
#include "convert.hpp"

namespace cfpy {

using namespace cf::rollout;
using cf::require;

namespace {

// The model options every rollout function shares (the `rollout` tool's --model ... --kernels).
struct SourceArgs {
  std::string model, model_config, dataset, alpha, alpha_kind, mask, slopes, content, content_scale, head_weights,
      kernel_file, kernels;
  bool falcon_scale = false;
};

#define CF_SOURCE_PARAMS                                                                                           \
  const std::string &model, const std::string &model_config, const std::string &dataset, const std::string &alpha, \
      const std::string &mask, const std::string &slopes, const std::string &content,                              \
      const std::string &content_scale, const std::string &head_weights, const std::string &kernel_file,           \
      const std::string &kernels, const std::string &alpha_kind, bool falcon_scale
#define CF_SOURCE_VALUES                                                                                              \
  SourceArgs {                                                                                                        \
    model, model_config, dataset, alpha, alpha_kind, mask, slopes, content, content_scale, head_weights, kernel_file, \
        kernels, falcon_scale                                                                                         \
  }
#define CF_SOURCE_ARGS                                                                                              \
  py::arg("model") = "bloom", py::arg("model_config") = "", py::arg("dataset") = "", py::arg("alpha") = "measured", \
  py::arg("mask") = "causal", py::arg("slopes") = "preset", py::arg("content") = "measured",                        \
  py::arg("content_scale") = "raw", py::arg("head_weights") = "", py::arg("kernel_file") = "",                      \
  py::arg("kernels") = "auto", py::arg("alpha_kind") = "token-mean", py::arg("falcon_scale") = false

constexpr const char* kSourceDoc =
    "\n\nModel keyword arguments (as the `rollout` tool's options; docs/rollout.md):\n"
    "  model: preset 'bloom-176b' | 'bloom' | 'bloom-7b1' | 'mpt-7b' | 'mpt-30b' | 'falcon-rw-7b', or a capture .h5\n"
    "         (a checkpoint must be captured first: causalflow.model.capture_file or the `capture` tool);\n"
    "  model_config: YAML/JSON model config (replaces model); dataset: 'fineweb-edu' | 'dclm' | 'wikipedia';\n"
    "  alpha: 'measured' | 'const:X' | 'power[0|1]:A0,BETA' | 'file:PATH'; mask: 'causal' | 'swa:W';\n"
    "  slopes: 'preset' | 'simple' | 'hf'; content: 'measured' | 'mean' | 'none' | 'c,delta';\n"
    "  content_scale: 'raw' | 'sqrt'; head_weights: file of H weights; kernel_file: dense kernels;\n"
    "  kernels: 'auto' | 'measured' | 'file' | 'alibi'; alpha_kind: 'token-mean' | 'frobenius';\n"
    "  falcon_scale: divide slopes by sqrt(d_head).";

RolloutSource make(const SourceArgs& a, long n, long default_n) {
  SourceOptions o;
  o.model = a.model;
  o.model_config = a.model_config;
  o.dataset = a.dataset;
  o.alpha = a.alpha;
  o.alpha_kind = a.alpha_kind;
  o.mask = a.mask;
  o.slopes = a.slopes;
  o.content = a.content;
  o.content_scale = a.content_scale;
  o.head_weights = a.head_weights;
  o.kernel_file = a.kernel_file;
  o.kernels = a.kernels;
  o.falcon_scale = a.falcon_scale;
  // the `rollout` tool's --n range (apps/rollout): 1..2^26; 0 = the model's default
  require(n >= 0 && n <= (1L << 26), "n must lie in [1, 67108864] (0 = the model's default), got ", n);
  o.n = n;
  if (o.model_config.empty() && is_model_file(o.model) && is_checkpoint_file(o.model))
    throw cf::InvalidArgument(cf::str("model '", o.model,
                                      "' is a checkpoint: capture it first (causalflow.model.capture_file or the "
                                      "`capture` tool) and pass the capture file"));
  return make_source(o, default_n);
}

py::dict preset_dict(const Preset& p) {
  py::dict d;
  d["name"] = p.name;
  d["layers"] = p.layers;
  d["heads"] = p.heads;
  d["d_head"] = p.d_head;
  d["slope_recipe"] = p.slope_recipe;
  d["slopes"] = to_numpy(std::vector<double>(p.slopes));
  d["dataset"] = p.dataset;
  d["alpha_measured"] = to_numpy_eigen(Eigen::VectorXd(p.alpha_measured));
  d["content_delta"] = to_numpy_eigen(RowMatrix(p.content_delta));
  d["content_mean"] = p.has_content_mean ? py::object(py::float_(p.content_mean)) : py::object(py::none());
  d["source"] = p.source;
  return d;
}

py::dict stats_dict(const MonotonicityStats& st) {
  py::dict d;
  d["triples"] = st.triples;
  d["violations"] = st.violations;
  d["violation_rate"] = st.violation_rate;
  d["mean_gap"] = st.mean_gap;
  d["expected_shortfall"] = st.expected_shortfall;
  d["max_gap"] = st.max_gap;
  d["monotone"] = st.monotone();
  return d;
}

std::vector<RowMatrix> to_kernels(const py::handle& ks, const std::string& what) {
  std::vector<RowMatrix> out;
  auto arr = py::array::ensure(ks);
  if (arr && arr.ndim() == 2) {
    out.push_back(to_row_matrix(ks, what));
  } else if (arr && arr.ndim() == 3) {
    for (py::ssize_t l = 0; l < arr.shape(0); ++l) out.push_back(to_row_matrix(arr[py::int_(l)], what));
  } else {
    PyErr_Clear();
    require(py::isinstance<py::sequence>(ks) && !py::isinstance<py::str>(ks), what,
            " must be an n x n array, an (L, n, n) array or a list of n x n arrays");
    for (const auto& k : ks) out.push_back(to_row_matrix(k, what));
  }
  require(!out.empty(), what, " must hold at least one kernel");
  return out;
}

}  // namespace

void bind_rollout(py::module_& m) {
  m.doc() =
      "Residual-aware attention rollout of Position bias (Herasimchyk et al.): R(l) = (1 - alpha_l) I + "
      "alpha_l Abar(l), P(L) = R(L) ... R(1), p_j = P(L)[n-1, j] (Eqs. 1-3); presets and model configs, the "
      "three variants, context sweeps, stochastic monotonicity (Assumption 4.1), Props. 4.2-4.5, the "
      "infinite-depth dichotomy (Theorem 5.4), and the Jacobian bound of Runway (Lee & Clark), Theorem 3.3.";

  m.def("preset_names", &preset_names, "Shipped presets: bloom-176b, bloom-7b1, mpt-7b, mpt-30b, falcon-rw-7b.");
  m.def("dataset_names", &dataset_names, "Datasets of the presets' measured schedules: fineweb-edu, dclm, wikipedia.");
  m.def(
      "load_preset",
      [](const std::string& name, const std::string& dataset) {
        Preset p = load_preset(name);
        if (!dataset.empty()) select_dataset(p, dataset);
        return preset_dict(p);
      },
      py::arg("name"), py::arg("dataset") = "",
      "A shipped model (Position bias (Herasimchyk et al.), reference data): {'name', 'layers' L, 'heads' H,\n"
      "'d_head', 'slope_recipe', 'slopes' (H,), 'dataset', 'alpha_measured' (L,), 'content_delta' (L, H),\n"
      "'content_mean', 'source'}. dataset '' = fineweb-edu.");

  m.def(
      "load_model_config",
      [](const std::string& path) {
        const ModelConfigFile c = load_model_config(path);
        py::dict d;
        d["path"] = c.path;
        d["name"] = c.name;
        d["sequence_length"] = c.sequence_length;
        d["layers"] = c.layers;
        d["heads"] = c.heads;
        d["temperature"] = c.temperature;
        d["slopes"] = c.model.slopes;
        d["layer_slopes"] = c.model.layer_slopes;
        d["head_weights"] = c.model.head_weights;
        d["mask"] = c.model.mask.name();
        d["content_delta"] = to_numpy_eigen(RowMatrix(c.model.delta));
        d["alpha"] = to_numpy_eigen(Eigen::VectorXd(c.alpha));
        d["schedule"] = c.schedule;
        d["content_broadcast"] = c.content_broadcast;
        d["has_content"] = c.has_content;
        return d;
      },
      py::arg("path"),
      "Read a rollout model config (YAML or JSON, the reference schema of Position bias (Herasimchyk et al.)):\n"
      "layers, heads, slopes, head weights, resolved residual schedule 'alpha' (L,), content 'content_delta'.");

  m.def("alibi_slopes", &alibi_slopes, py::arg("recipe"), py::arg("H"),
        "ALiBi slopes of H heads: recipe 'simple' m_h = 2^(-8h/H), h = 1..H, or 'hf' (BLOOM's build_alibi_tensor).");
  m.def(
      "alpha_power",
      [](int L, double a0, double beta, int origin) { return to_numpy_eigen(alpha_power(L, a0, beta, origin)); },
      py::arg("L"), py::arg("a0"), py::arg("beta"), py::arg("origin") = 0,
      "Power-decay residual schedule alpha_l = a0 / l^beta (origin 0) or a0 / (l+1)^beta (origin 1), l = 1..L.");

  m.def(
      "rollout",
      [](long n, bool dense, CF_SOURCE_PARAMS) {
        const SourceArgs a = CF_SOURCE_VALUES;
        RolloutSource s;
        std::vector<VariantProfile> vs;
        {
          py::gil_scoped_release nogil;
          s = make(a, n, 256);
          vs = rollout_variants(s, s.n, dense);
        }
        py::dict d;
        for (auto& v : vs) d[py::str(v.key)] = to_numpy_eigen(std::move(v.p));
        return d;
      },
      py::arg("n") = 0, py::arg("dense") = false, CF_SOURCE_ARGS,
      (std::string(
           "Last row of the residual-aware rollout, p_j = P(L)[n-1, j] with P(L) = R(L) ... R(1),\n"
           "R(l) = (1 - alpha_l) I + alpha_l Abar(l) (Position bias (Herasimchyk et al.), Eqs. 1-3, Section 6.2).\n\n"
           "n: sequence length (0 = the model's default, 256 for presets); dense: take the O(L H n^2) dense\n"
           "path instead of the structured O(L H n) one (n <= 8192).\n"
           "Returns a dict of float64 arrays of shape (n,), each summing to 1, in this order:\n"
           "'attention_only' (a) alpha = 1, no content; 'residual' (b) the model's alpha; and, when the model\n"
           "has a content prior, 'residual_content' (c). The arrays are views of the C++ results (no copy);\n"
           "the numbers equal the 'variants' of `rollout --format json`.") +
       kSourceDoc)
          .c_str());

  m.def(
      "summarize",
      [](const py::handle& p) {
        const DistributionSummary s = summarize(to_vector(p, "p"));
        py::dict d;
        d["p_first"] = s.first;
        d["p_last"] = s.last;
        d["argmin"] = s.argmin;
        d["min"] = s.min;
        d["primacy_mass"] = s.primacy;
        d["recency_mass"] = s.recency;
        return d;
      },
      py::arg("p"),
      "Summary of a distribution p over positions: p_0, p_(n-1), argmin, min, primacy / recency mass (first / last\n"
      "ceil(n/10) positions) — the columns of the `rollout` table.");

  m.def(
      "sweep",
      [](const py::object& n, const py::object& progress, CF_SOURCE_PARAMS) {
        const SourceArgs a = CF_SOURCE_VALUES;
        std::vector<long> ns;
        // a list goes through the same parser as the tool's '64,128,...' (range [1, 2^26], increasing,
        // at most 4096 lengths)
        std::string spec;
        if (py::isinstance<py::str>(n)) {
          spec = n.cast<std::string>();
        } else {
          for (long v : n.cast<std::vector<long>>()) spec += (spec.empty() ? "" : ",") + std::to_string(v);
        }
        require(!spec.empty(), "n must list at least one length");
        ns = parse_n_list(spec, "n");
        require(!ns.empty(), "n must list at least one length");
        RolloutSource s;
        {
          py::gil_scoped_release nogil;
          SourceArgs b = a;
          if (b.model_config.empty() && is_model_file(b.model) && b.kernels == "auto" && b.kernel_file.empty())
            b.kernels = "alibi";  // as `rollout sweep`: a capture's content-free ALiBi kernels (any n)
          s = make(b, 0, ns.front());
        }
        // One library call per length so that the callback can report progress between them; the rows are
        // regrouped variant-major as cf::rollout::sweep_context orders them.
        std::vector<std::vector<SweepRow>> per_n;
        for (std::size_t i = 0; i < ns.size(); ++i) {
          {
            py::gil_scoped_release nogil;
            per_n.push_back(sweep_context(s, {ns[i]}));
          }
          if (!progress.is_none()) progress(i + 1, ns.size());
        }
        std::vector<std::string> key;
        std::vector<long> nn, argmin;
        std::vector<double> first, last, primacy, recency, mn, secs;
        for (std::size_t v = 0; v < per_n.front().size(); ++v)
          for (const auto& rows : per_n) {
            const SweepRow& r = rows[v];
            key.push_back(r.key), nn.push_back(r.n), argmin.push_back(r.summary.argmin);
            first.push_back(r.summary.first), last.push_back(r.summary.last), primacy.push_back(r.summary.primacy);
            recency.push_back(r.summary.recency), mn.push_back(r.summary.min), secs.push_back(r.seconds);
          }
        py::dict d;
        d["variant"] = key;
        d["n"] = to_numpy(std::move(nn));
        d["p_first"] = to_numpy(std::move(first));
        d["p_last"] = to_numpy(std::move(last));
        d["primacy_mass"] = to_numpy(std::move(primacy));
        d["recency_mass"] = to_numpy(std::move(recency));
        d["argmin"] = to_numpy(std::move(argmin));
        d["min"] = to_numpy(std::move(mn));
        d["seconds"] = to_numpy(std::move(secs));
        return d;
      },
      py::arg("n") = "64,128,...,4096", py::arg("progress") = py::none(), CF_SOURCE_ARGS,
      (std::string(
           "Context-length sweep of the variants (Position bias (Herasimchyk et al.), Section 6.2) on the\n"
           "structured O(L H n) path: for each n the summary of every variant's last-row distribution.\n\n"
           "n: a list of lengths or the tool's syntax '64,128,...,65536'; progress: optional callable\n"
           "progress(done, total) called after each length.\n"
           "Returns columns (rows ordered by variant, then n, as the 'rows' of `rollout sweep --format json`):\n"
           "'variant' list[str], 'n' int64, 'p_first', 'p_last', 'primacy_mass', 'recency_mass' float64,\n"
           "'argmin' int64, 'min', 'seconds' float64.") +
       kSourceDoc)
          .c_str());

  m.def(
      "kernels",
      [](long n, bool with_content, CF_SOURCE_PARAMS) {
        const SourceArgs a = CF_SOURCE_VALUES;
        std::vector<RowMatrix> ks;
        {
          py::gil_scoped_release nogil;
          const RolloutSource s = make(a, n, 64);
          ks = source_kernels(s, with_content, 2048);
        }
        py::list out;
        for (auto& k : ks) out.append(to_numpy_eigen(std::move(k)));
        return out;
      },
      py::arg("n") = 0, py::arg("with_content") = false, CF_SOURCE_ARGS,
      (std::string("The expected kernels Abar(l) = sum_h w_h A(l, h) (Position bias (Herasimchyk et al.), Eq. 4) of\n"
                   "the model, one row-stochastic causal float64 array (n, n) per layer (n <= 2048; n = 0: 64), with\n"
                   "the content prior when with_content=True. Views of the C++ matrices (no copy).") +
       kSourceDoc)
          .c_str());

  m.def(
      "monotonicity_stats",
      [](const py::handle& K, double tol) {
        const RowMatrix k = to_row_matrix(K, "K");
        // O(n^3): beyond a few thousand rows this runs for hours (the tool builds kernels of n <= 512)
        require(k.rows() <= 2048, "monotonicity_stats is O(n^3): K must have n <= 2048 rows, got ", k.rows());
        MonotonicityStats st;
        {
          py::gil_scoped_release nogil;
          st = monotonicity_stats(k, tol);
        }
        return stats_dict(st);
      },
      py::arg("K"), py::arg("tol") = 1e-10,
      "Stochastic-monotonicity statistics of a row-stochastic kernel K (n, n) over all triples (i < i', k)\n"
      "(Position bias (Herasimchyk et al.), Assumption 4.1, Definition A.1): 'triples', 'violations',\n"
      "'violation_rate', 'mean_gap', 'expected_shortfall', 'max_gap', 'monotone'. O(n^3).");

  m.def(
      "prefix_mass", [](const py::handle& p) { return to_numpy_eigen(prefix_mass(to_vector(p, "p"))); }, py::arg("p"),
      "Prefix masses F(k) = sum_{j <= k} p_j of a distribution p (Definition A.1).");
  m.def(
      "stochastically_precedes",
      [](const py::handle& mu, const py::handle& nu, double tol) {
        return stochastically_precedes(to_vector(mu, "mu"), to_vector(nu, "nu"), tol);
      },
      py::arg("mu"), py::arg("nu"), py::arg("tol") = 1e-10,
      "Stochastic order mu <= nu ('mu is earlier'): every prefix mass of mu >= that of nu - tol (Definition A.1).");

  m.def(
      "verify",
      [](long n, int seeds, CF_SOURCE_PARAMS) {
        const SourceArgs a = CF_SOURCE_VALUES;
        VerifyOutcome v;
        {
          py::gil_scoped_release nogil;
          v = verify_report(make(a, n, 48), seeds);
        }
        return from_json(v.report.body);
      },
      py::arg("n") = 0, py::arg("seeds") = 8, CF_SOURCE_ARGS,
      (std::string("Props. 4.2-4.5 of Position bias (Herasimchyk et al.) (primacy drift, residual => recency,\n"
                   "bias => recency, diagonal content) on the model's kernels and on `seeds` random monotone stacks,\n"
                   "plus the structured vs dense rollout: the body of `rollout verify --format json`\n"
                   "({'checks': [...], 'all_ok': bool}); n = 0: 48.") +
       kSourceDoc)
          .c_str());

  m.def(
      "dichotomy",
      [](long depth, const std::string& schedule, const std::string& schedule2, double eps, long n, CF_SOURCE_PARAMS) {
        const SourceArgs a = CF_SOURCE_VALUES;
        require(depth >= 1 && depth <= 1000000, "depth must lie in [1, 1000000], got ", depth);
        require(std::isfinite(eps) && eps >= 0 && eps <= 1, "eps must lie in [0, 1] (0 = smallest kernel weight), got ",
                eps);
        std::vector<AlphaSpec> specs;
        for (const std::string& text : {schedule, schedule2}) {
          const AlphaSpec sp = parse_alpha_spec(text);
          require(sp.kind == AlphaSpec::Kind::Constant || sp.kind == AlphaSpec::Kind::Power,
                  "dichotomy schedules must be const:X or power[0|1]:A0,BETA, got '", text, "'");
          specs.push_back(sp);
        }
        DichotomyOutcome dc;
        {
          py::gil_scoped_release nogil;
          const RolloutSource s = make(a, n, 8);
          require(s.n <= 64, "dichotomy follows one row in 50-digit arithmetic: n <= 64 required, got ", s.n);
          dc = dichotomy_report(source_kernels(s, false)[0], specs, s.name, depth, eps);
        }
        return from_json(dc.report.body);
      },
      py::arg("depth") = 100000, py::arg("schedule") = "const:0.5", py::arg("schedule2") = "power:0.5,2",
      py::arg("eps") = 0.0, py::arg("n") = 0, CF_SOURCE_ARGS,
      (std::string("Infinite-depth dichotomy (Position bias (Herasimchyk et al.), Lemma 5.3, Theorem 5.4): row n-1 of\n"
                   "P(L) for depths 10, 100, ..., depth in 50-digit arithmetic beside the bounds (i) and (ii), for a\n"
                   "non-summable `schedule` and a summable `schedule2`: the body of `rollout dichotomy --format json`\n"
                   "({'rows': [...]}); n = 0: 8 (n <= 64).") +
       kSourceDoc)
          .c_str());

  m.def(
      "jacobian_bound",
      [](const py::handle& attention, double C) {
        const auto ks = to_kernels(attention, "attention");
        require(std::isfinite(C) && C > 0, "C must be a finite number > 0, got ", C);
        JacobianBound b;
        {
          py::gil_scoped_release nogil;
          b = jacobian_bound(ks, C);
        }
        py::dict d;
        d["bound"] = to_numpy_eigen(std::move(b.bound));
        d["self_term"] = to_numpy_eigen(std::move(b.self_term));
        d["gate_term"] = to_numpy_eigen(std::move(b.gate_term));
        return d;
      },
      py::arg("attention"), py::arg("C") = 1.0,
      "Jacobian bound of Runway (Lee & Clark), Theorem 3.3: C^r [(I + A(r)) ... (I + A(1))] for r attention\n"
      "matrices (an (n, n) array, an (r, n, n) array or a list; oldest first, lower triangular, row-stochastic).\n"
      "Returns {'bound', 'self_term', 'gate_term'}, each (n, n) with entry (d, s); bound = self_term + gate_term.");
}

}  // namespace cfpy
