// rollout — residual-aware attention rollout and position-bias theory of seed 004, plus the
// infinite-depth dichotomy (Theorem 5.4) and monotonicity checks. Thin app: options, set-up and a
// report of lib/rollout results (docs/conventions.md, docs/rollout.md).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <unistd.h>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/plot.hpp"
#include "cf/influence/agreement_table.hpp"
#include "cf/influence/profile_io.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/jacobian_bound.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

using namespace cf;
using namespace cf::rollout;
using output::fmt;

namespace {

struct Options {
  std::string model = "bloom", alpha = "measured", mask = "causal", slopes = "preset", content = "measured";
  std::string content_scale = "raw", path = "auto", kernel_file, influence, matrix, alpha_kind = "token-mean";
  std::string head_weights;
  std::string kernels = "auto";  // capture models: auto | measured | file
  std::string plot_scale = "linear";
  std::string capture_text = "kjv";  // checkpoint models: the text captured in-process
  int capture_seqs = 4;
  // --influence with a checkpoint (issue 10): measured in process (auto) or read from a file
  std::string kernel_source = "auto", influence_target = "probability";
  int influence_windows = 64;
  // jacobian
  double C = 1.0;
  long target = -1;
  long n = 0;  // 0 = mode default
  bool falcon_scale = false;
  // dichotomy
  long depth = 100000;
  std::string deep_alpha = "const:0.5", deep_alpha2 = "power:0.5,2";
  double eps = 0;
  // verify
  int seeds = 8;
  app::CommonOptions common;
};

bool is_file_model(const std::string& m) {
  return m.find('/') != std::string::npos || (m.size() > 3 && m.substr(m.size() - 3) == ".h5");
}

bool is_checkpoint_file(const std::string& path) {
  if (!io::is_hdf5_file(path)) return false;
  const io::File f = io::File::open(path);
  return f.has_attr("format") && f.attr_string("format") == "causalflow-checkpoint";
}

/// A checkpoint given as --model is captured in-process (cf/nn/capture.hpp, as the `capture` tool
/// does) into a temporary file that lives as long as this object; the rollout then reads it as a
/// capture: measured alpha and measured kernels of the trained model.
struct TemporaryCapture {
  std::string path;
  TemporaryCapture(const std::string& checkpoint, const std::string& text, long n, int n_seq) {
    const nn::Model<float> model = nn::load_model(checkpoint);
    const int T = n > 0 ? static_cast<int>(n) : std::min(256, model.config.block_size);
    require(T <= model.config.block_size, "--n = ", T, " exceeds the checkpoint's block_size = ",
            model.config.block_size, " (a checkpoint is captured with T = n)");
    const auto windows = nn::capture_windows(nn::tokenize_text_for(model.config, text), T, n_seq);
    path = (std::filesystem::temp_directory_path() /
            ("cf_rollout_capture_" + std::to_string(::getpid()) + ".h5")).string();
    nn::CaptureOptions co;
    co.store_qk = false;
    co.source = text;
    nn::capture_model(model, windows, path, co);
  }
  ~TemporaryCapture() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

/// Everything the modes need: the structured model (if any), kernels from a file (if any), alpha.
struct Setup {
  std::string model_name;
  bool structured = false;
  AlibiModel base;                  // slopes, mask, no content
  Eigen::MatrixXd delta;            // content for variant (c); empty = none
  std::vector<RowMatrix> kernels;   // from --kernel-file or measured in a capture
  std::string kernel_source = "kernel file";
  Eigen::VectorXd alpha;
  int L = 0;
  long n = 0;
  nlohmann::json params;
};

Setup make_setup(const Options& o, long default_n) {
  Setup s;
  const Mask mask = parse_mask(o.mask);
  const AlphaSpec spec = parse_alpha_spec(o.alpha);
  require(o.n >= 0, "--n must be >= 1, got ", o.n);
  s.n = o.n > 0 ? o.n : default_n;
  s.params = {{"model", o.model}, {"alpha", o.alpha}, {"mask", mask.name()}, {"content", o.content}};
  require(o.kernels != "file" || !o.kernel_file.empty(), "--kernels file needs --kernel-file FILE");
  require(o.kernels != "measured" || o.kernel_file.empty(),
          "--kernels measured takes the kernels from the capture: drop --kernel-file (or use --kernels file)");
  if (!o.kernel_file.empty()) {
    s.kernels = read_kernel_file(o.kernel_file);
    const long kn = s.kernels[0].rows();
    require(o.n == 0 || o.n == kn, "--n ", o.n, " differs from the kernel file's n = ", kn);
    s.n = kn;
    require(mask.window == 0, "--mask applies to ALiBi kernels only; a kernel file carries its own mask");
  }
  Eigen::VectorXd measured;
  if (is_file_model(o.model)) {
    require(std::filesystem::exists(o.model), "--model: file '", o.model, "' does not exist; known presets: ",
            [] { std::string k; for (auto& p : preset_names()) k += p + " "; return k; }(), "(alias bloom)");
    s.model_name = o.model;
    std::optional<TemporaryCapture> tmp;  // a checkpoint: capture it here, read it as a capture
    if (is_checkpoint_file(o.model)) {
      tmp.emplace(o.model, o.capture_text, o.n, o.capture_seqs);
      s.params["captured"] = {{"text", o.capture_text}, {"sequences", o.capture_seqs}};
    }
    const std::string cap = tmp ? tmp->path : o.model;
    require_capture_file(cap);
    if (s.kernels.empty()) {
      // measured kernels: head-mean attention probabilities of the capture, n fixed to its T
      require(mask.window == 0, "--mask applies to ALiBi kernels only; measured kernels carry the model's own mask");
      s.kernels = read_capture_kernels(cap);
      const long kn = s.kernels[0].rows();
      require(o.n == 0 || o.n == kn, "--n ", o.n, " differs from the capture's sequence length T = ", kn,
              " (measured kernels fix n = T; omit --n)");
      s.n = kn;
      s.params["kernels"] = "measured (capture head mean)";
      s.kernel_source = "measured kernels";
    } else {
      s.params["kernels"] = "file";
    }
    if (spec.kind == AlphaSpec::Kind::Measured)
      measured = read_capture_alpha(cap, o.alpha_kind == "frobenius" ? "/alpha_frobenius" : "/alpha_token_mean");
    s.params["alpha_kind"] = o.alpha_kind;
    s.L = spec.kind == AlphaSpec::Kind::Measured ? static_cast<int>(measured.size())
                                                 : static_cast<int>(s.kernels.size());
  } else {
    const Preset p = load_preset(o.model);
    s.model_name = p.name;
    s.L = p.layers;
    measured = p.alpha_measured;
    if (s.kernels.empty()) {
      s.structured = true;
      s.base.mask = mask;
      s.base.slopes = o.slopes == "preset" ? p.slopes : alibi_slopes(o.slopes, p.heads);
      const double dscale = o.falcon_scale ? 1.0 / std::sqrt(static_cast<double>(p.d_head)) : 1.0;
      for (double& m : s.base.slopes) m *= dscale;
      if (!o.head_weights.empty()) {
        Eigen::VectorXd hw = read_alpha_file(o.head_weights);  // same number-list format
        require(hw.size() == p.heads, "--head-weights has ", hw.size(), " numbers but the model has H = ", p.heads);
        s.base.head_weights.assign(hw.data(), hw.data() + hw.size());
        model_head_weights(s.base);  // validates: non-negative, positive sum
        s.params["head_weights"] = o.head_weights;
      }
      s.params["slopes"] = o.slopes == "preset" ? "preset (" + p.slope_recipe + ")" : o.slopes;
      s.params["alibi_divided_by_sqrt_d_head"] = o.falcon_scale;
      s.params["heads"] = p.heads;
      const double cscale = o.content_scale == "sqrt" ? 1.0 / std::sqrt(static_cast<double>(p.d_head)) : 1.0;
      if (o.content == "measured") {
        s.delta = p.content_delta * cscale;
      } else if (o.content == "mean") {
        s.delta = Eigen::MatrixXd::Constant(1, 1, p.content_mean * cscale);
      } else if (o.content != "none") {
        const auto comma = o.content.find(',');
        require(comma != std::string::npos, "--content: expected none | measured | mean | c,delta, got '", o.content, "'");
        char* end = nullptr;
        const std::string d = o.content.substr(comma + 1);
        const double delta = std::strtod(d.c_str(), &end);
        require(!d.empty() && *end == '\0' && std::isfinite(delta), "--content c,delta: delta '", d, "' is not a number");
        s.delta = Eigen::MatrixXd::Constant(1, 1, delta * cscale);  // c cancels in the softmax
      }
      s.params["content_scale"] = o.content_scale;
    }
  }
  if (!s.kernels.empty() && s.kernels.size() == 1 && s.L > 1) s.kernels.assign(s.L, s.kernels[0]);
  if (!s.kernels.empty())
    require(static_cast<int>(s.kernels.size()) == s.L, "--kernel-file has ", s.kernels.size(),
            " layers but the model has L = ", s.L);
  s.alpha = resolve_alpha(spec, s.L, measured);
  require(s.n >= 1, "--n must be >= 1, got ", s.n);
  s.params["n"] = s.n;
  s.params["layers"] = s.L;
  return s;
}

Eigen::VectorXd compute(const Setup& s, const Options& o, const Eigen::VectorXd& alpha, bool content) {
  if (!s.structured) return rollout_last_row_dense(s.kernels, alpha);
  AlibiModel m = s.base;
  if (content) m.delta = s.delta;
  if (o.path == "dense") {
    require(s.n <= kDenseMaxN, "--path dense needs --n <= ", kDenseMaxN, ", got ", s.n);
    return rollout_last_row_alibi_dense(m, alpha, s.n);
  }
  return rollout_last_row_alibi(m, alpha, s.n);
}

/// `--model CHECKPOINT --influence auto|FILE`: the seed 004 Tables 2-5 comparison on the model's own
/// windows (cf/influence/agreement_table.hpp; docs/influence.md).
void run_influence_agreement(const Options& o) {
  const nn::Model<float> model = nn::load_model(o.model);
  const int n = o.n > 0 ? static_cast<int>(o.n) : std::min(256, model.config.block_size);
  require(n <= model.config.block_size, "--n = ", n, " exceeds the checkpoint's block_size = ", model.config.block_size);
  const auto w = influence::influence_windows(nn::tokenize_text_for(model.config, o.capture_text), n, o.influence_windows);
  const bool alibi_ok = model.config.pos == nn::PosKind::Alibi;
  const auto src = influence::parse_kernel_source(o.kernel_source == "auto" ? (alibi_ok ? "alibi" : "measured") : o.kernel_source);
  influence::require_kernel_source(model.config, src);  // before the long work
  Eigen::VectorXd infl;
  std::string isrc;
  if (o.influence != "auto") {
    infl = influence::read_profile(o.influence);
    require(infl.size() == n, "--influence has ", infl.size(), " positions but n = ", n);
    isrc = "file " + o.influence;
  }
  const influence::ModelMeasurements m = influence::measure_model(model, w.tokens);
  if (o.influence == "auto") {
    infl = influence::measure_influence(model, w.tokens, influence::parse_target(o.influence_target)).profile;
    isrc = "measured in process (Eq. 6, target " + o.influence_target + ", " + std::to_string(o.influence_windows) +
           " windows of " + o.capture_text + ")";
  }
  const auto ag = influence::rollout_agreement(model, m, src, infl, o.alpha_kind == "frobenius");
  output::Report rep = influence::agreement_report(ag, infl, o.model, isrc);
  rep.meta = output::metadata("rollout", {{"model", o.model}, {"n", n}, {"influence", o.influence},
                                          {"kernel_source", influence::kernel_source_name(src)},
                                          {"windows", o.influence_windows}, {"text", o.capture_text},
                                          {"alpha_kind", o.alpha_kind}, {"window_starts", w.starts}});
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) plot::save(influence::agreement_plot(ag, infl, o.model), o.common.plot);
}

void run_rollout(const Options& o) {
  if (!o.common.plot.empty()) plot::check_plot_path(o.common.plot);
  if (!o.influence.empty() && is_file_model(o.model) && std::filesystem::exists(o.model) && is_checkpoint_file(o.model)) {
    require(o.alpha == "measured", "--influence with a checkpoint compares against the measured alpha: use --alpha measured");
    return run_influence_agreement(o);
  }
  require(o.influence != "auto", "--influence auto measures the influence of a checkpoint: give --model CHECKPOINT.h5");
  require(o.kernel_source == "auto", "--kernel-source applies to --model CHECKPOINT with --influence");
  const Setup s = make_setup(o, 256);
  if (!s.structured)
    require(s.n <= kDenseMaxN, "n = ", s.n, " is too large for the dense path (n <= ", kDenseMaxN,
            ") and kernels from a file or capture have no structured path");
  Eigen::VectorXd influence;
  if (!o.influence.empty()) {
    influence = cf::influence::read_profile(o.influence);  // number list, or influence --out CSV/JSON
    require(influence.size() == s.n, "--influence has ", influence.size(), " positions but n = ", s.n);
  }
  struct Variant { std::string key, label; Eigen::VectorXd p; double seconds; };
  std::vector<Variant> vs;
  auto timed = [&](const std::string& key, const std::string& label, const Eigen::VectorXd& a, bool content) {
    const auto t0 = std::chrono::steady_clock::now();
    Eigen::VectorXd p = compute(s, o, a, content);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    vs.push_back({key, label, std::move(p), sec});
  };
  timed("attention_only", "(a) attention-only", Eigen::VectorXd::Ones(s.L), false);
  timed("residual", "(b) residual-aware", s.alpha, false);
  const bool has_content = s.structured && s.delta.size() > 0;
  if (has_content) timed("residual_content", "(c) residual + content", s.alpha, true);

  output::Report rep;
  nlohmann::json params = s.params;
  params["path"] = s.structured ? (o.path == "dense" ? "dense" : "structured O(L H n)") : "dense (" + s.kernel_source + ")";
  rep.meta = output::metadata("rollout", params);
  output::Table t;
  t.title = "Last-row rollout p_j = P(L)[n-1, j], " + s.model_name + ", n = " + std::to_string(s.n) + ", L = " +
            std::to_string(s.L) + " (seed 004, Eq. 3)";
  t.header = {"variant", "p_0", "p_n-1", "argmin", "min", "primacy", "recency", "seconds"};
  if (influence.size()) {
    t.header.push_back("spearman");
    t.header.push_back("W1/(n-1)");
  }
  nlohmann::json variants = nlohmann::json::object(), summary = nlohmann::json::object();
  for (const auto& v : vs) {
    const auto sm = summarize(v.p);
    std::vector<std::string> row = {v.label, fmt(sm.first, 4), fmt(sm.last, 4), std::to_string(sm.argmin),
                                    fmt(sm.min, 4), fmt(sm.primacy, 4), fmt(sm.recency, 4), fmt(v.seconds, 3)};
    nlohmann::json js = {{"p_first", sm.first}, {"p_last", sm.last}, {"argmin", sm.argmin}, {"min", sm.min},
                         {"primacy_mass", sm.primacy}, {"recency_mass", sm.recency}, {"seconds", v.seconds}};
    if (influence.size()) {
      const double rho = spearman(v.p, influence), w1 = wasserstein1_normalised(v.p, influence);
      row.push_back(fmt(rho, 4));
      row.push_back(fmt(w1, 4));
      js["spearman"] = rho;
      js["w1_normalised"] = w1;
    }
    t.add_row(row);
    summary[v.key] = js;
    variants[v.key] = std::vector<double>(v.p.data(), v.p.data() + v.p.size());
  }
  rep.tables.push_back(t);
  rep.body = {{"summary", summary}, {"variants", variants}};
  rep.notes.push_back("primacy / recency = mass of the first / last ceil(n/10) positions");
  if (!has_content) rep.notes.push_back("variant (c) omitted: no content model (--content none, kernel file or capture)");
  if (app::resolve_format(o.common) == output::Format::Csv) {
    output::Table d;
    d.title = "distributions";
    d.header = {"position"};
    for (const auto& v : vs) d.header.push_back(v.key);
    for (long j = 0; j < s.n; ++j) {
      std::vector<std::string> row = {std::to_string(j)};
      for (const auto& v : vs) row.push_back(fmt(v.p(j), 10));
      d.add_row(row);
    }
    rep.tables.push_back(d);
  }
  if (!o.matrix.empty()) {
    require(s.n <= 2048, "--matrix writes the full n x n rollout; n <= 2048 required, got ", s.n);
    AlibiModel m = s.base;
    const RowMatrix P = s.structured
                            ? rollout_matrix_dense([&](int l) { return alibi_kernel_dense(m, l, s.n); }, s.alpha, s.n)
                            : rollout_matrix_dense([&](int l) { return s.kernels[l]; }, s.alpha, s.n);
    std::ostringstream os;
    os.precision(12);
    for (long i = 0; i < s.n; ++i)
      for (long j = 0; j < s.n; ++j) os << P(i, j) << (j + 1 < s.n ? "," : "\n");
    write_file_atomic(o.matrix, os.str());
    rep.notes.push_back("full rollout matrix P(L) of variant (b) written to " + o.matrix);
  }
  app::emit(rep, o.common);
  if (!o.common.plot.empty()) {
    plot::LinePlot lp;
    lp.title = "Rollout of the last position, " + s.model_name + " (n = " + std::to_string(s.n) + ")";
    lp.xlabel = "input position j";
    lp.log_y = o.plot_scale == "log";
    lp.ylabel = lp.log_y ? "p_j (influence on the next-token position, log scale)"
                         : "p_j (influence on the next-token position)";
    if (!lp.log_y && vs.size() > 1) {
      // Linear, as the published figures: (a) collapses onto token 0 (p_0 near 1) and would flatten
      // (b), (c) to the axis, so the range follows the residual variants and (a) is clipped.
      double top = 0;
      for (std::size_t k = 1; k < vs.size(); ++k) top = std::max(top, vs[k].p.maxCoeff());
      if (influence.size()) top = std::max(top, influence.maxCoeff());
      lp.y_min = 0;
      lp.y_max = 1.1 * top;
      lp.title += ", (a) clipped";
    }
    for (const auto& v : vs) {
      plot::Series se{v.label, {}, {}};
      for (long j = 0; j < s.n; ++j) se.x.push_back(j), se.y.push_back(v.p(j));
      lp.series.push_back(se);
    }
    if (influence.size()) {
      plot::Series se{"measured influence", {}, {}};
      for (long j = 0; j < s.n; ++j) se.x.push_back(j), se.y.push_back(influence(j));
      lp.series.push_back(se);
    }
    plot::save(lp, o.common.plot);
  }
}

std::vector<RowMatrix> model_kernels(const Setup& s, bool content) {
  if (!s.structured) return s.kernels;
  require(s.n <= 512, "this mode builds dense kernels: --n <= 512 required, got ", s.n);
  AlibiModel m = s.base;
  if (content) m.delta = s.delta;
  std::vector<RowMatrix> ks;
  const int distinct = content && m.delta.rows() > 1 ? s.L : 1;
  for (int l = 0; l < distinct; ++l) ks.push_back(alibi_kernel_dense(m, l, s.n));
  while (static_cast<int>(ks.size()) < s.L) ks.push_back(ks[0]);
  return ks;
}

void run_monotonicity(const Options& o) {
  const Setup s = make_setup(o, 64);
  output::Report rep;
  rep.meta = output::metadata("rollout monotonicity", s.params);
  output::Table t;
  t.title = "Stochastic monotonicity of Abar(l) (seed 004, Assumption 4.1 / Definition A.1), n = " + std::to_string(s.n) +
            ", tolerance 1e-10";
  t.header = {"kernel", "layer", "triples", "violation rate", "mean gap", "expected shortfall", "max gap"};
  nlohmann::json rows = nlohmann::json::array();
  auto add = [&](const std::string& what, const std::vector<RowMatrix>& ks, bool per_layer) {
    for (int l = 0; l < (per_layer ? s.L : 1); ++l) {
      const auto st = monotonicity_stats(ks[l]);
      t.add_row({what, per_layer ? std::to_string(l + 1) : "all", output::fmt_int(st.triples), fmt(st.violation_rate, 4),
                 fmt(st.mean_gap, 4), fmt(st.expected_shortfall, 4), fmt(st.max_gap, 4)});
      rows.push_back({{"kernel", what}, {"layer", per_layer ? l + 1 : 0}, {"triples", st.triples},
                      {"violation_rate", st.violation_rate}, {"mean_gap", st.mean_gap},
                      {"expected_shortfall", st.expected_shortfall}, {"max_gap", st.max_gap}});
    }
  };
  const auto plain = model_kernels(s, false);
  add(s.structured ? "ALiBi, no content" : s.kernel_source, plain, !s.structured);
  if (s.structured && s.delta.size() > 0) add("ALiBi + content", model_kernels(s, true), s.delta.rows() > 1);
  rep.tables.push_back(t);
  rep.body = {{"kernels", rows}};
  app::emit(rep, o.common);
}

std::vector<RowMatrix> random_monotone_kernels(std::mt19937_64& rng, int L, long n) {
  // Mixtures of geometric (ALiBi) heads are stochastically monotone: each head is, and prefix
  // masses average. Random slopes and weights per layer.
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<RowMatrix> ks;
  for (int l = 0; l < L; ++l) {
    AlibiModel m;
    for (int h = 0; h < 3; ++h) m.slopes.push_back(std::pow(10.0, -2 + 2.3 * U(rng))), m.head_weights.push_back(U(rng) + 0.05);
    ks.push_back(alibi_kernel_dense(m, 0, n));
  }
  return ks;
}

void run_verify(const Options& o) {
  Setup s = make_setup(o, 48);
  require(s.structured, "verify needs a preset model (ALiBi structure)");
  output::Report rep;
  rep.meta = output::metadata("rollout verify", s.params);
  output::Table t;
  t.title = "Finite-depth forces (seed 004, Props. 4.2-4.5): max violation of the claimed inequality, n = " +
            std::to_string(s.n) + " (ok when <= 1e-12)";
  t.header = {"check", "kernels", "hypotheses", "max violation", "ok"};
  nlohmann::json rows = nlohmann::json::array();
  bool all_ok = true;
  auto add = [&](const std::string& what, const std::string& kern, const PropositionCheck& c) {
    const bool ok = !c.hypotheses_hold || c.max_violation <= 1e-12;
    all_ok = all_ok && ok;
    t.add_row({what, kern, c.hypotheses_hold ? "hold" : "fail (not claimed)", fmt(c.max_violation, 3), ok ? "ok" : "VIOLATED"});
    rows.push_back({{"check", what}, {"kernels", kern}, {"hypotheses_hold", c.hypotheses_hold},
                    {"max_violation", c.max_violation}, {"ok", ok}});
  };
  const auto plain = model_kernels(s, false);
  const Eigen::VectorXd a = s.alpha;
  add("Prop. 4.2 primacy drift", s.model_name, check_primacy_drift(plain, a));
  add("Prop. 4.3 residual => recency", s.model_name, check_residual_recency(plain, 0.5 * a, a));
  {
    AlibiModel flat = s.base;
    for (double& m : flat.slopes) m = 0;
    std::vector<RowMatrix> nob(s.L, alibi_kernel_dense(flat, 0, s.n));
    add("Prop. 4.4 ALiBi bias => recency", s.model_name, check_bias_recency(plain, nob, a));
  }
  for (int sign : {+1, -1}) {
    AlibiModel m = s.base;
    m.delta = Eigen::MatrixXd::Constant(1, 1, 2.0 * sign);
    std::vector<RowMatrix> wc(s.L, alibi_kernel_dense(m, 0, s.n));
    add(sign > 0 ? "Prop. 4.5 delta = +2 => recency" : "Prop. 4.5 delta = -2 => primacy", s.model_name,
        check_diagonal_content(wc, plain, a, sign));
  }
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> U(0, 1);
  for (int seed = 0; seed < o.seeds; ++seed) {
    const int L = 6;
    const auto ks = random_monotone_kernels(rng, L, s.n);
    Eigen::VectorXd al(L), al2(L);
    for (int l = 0; l < L; ++l) al(l) = U(rng), al2(l) = al(l) + (1 - al(l)) * U(rng);
    const std::string kern = "random monotone #" + std::to_string(seed + 1);
    add("Prop. 4.2 primacy drift", kern, check_primacy_drift(ks, al));
    add("Prop. 4.3 residual => recency", kern, check_residual_recency(ks, al, al2));
  }
  {  // structured vs dense agreement on the preset
    AlibiModel m = s.base;
    m.delta = s.delta;
    const Eigen::VectorXd f = rollout_last_row_alibi(m, a, s.n), d = rollout_last_row_alibi_dense(m, a, s.n);
    PropositionCheck c;
    c.max_violation = (f - d).cwiseAbs().maxCoeff() / d.cwiseAbs().maxCoeff();
    add("structured vs dense path (relative)", s.model_name + " + content", c);
  }
  rep.tables.push_back(t);
  rep.body = {{"checks", rows}, {"all_ok", all_ok}};
  app::emit(rep, o.common);
  if (!all_ok) throw Error("verify: a proposition was violated beyond 1e-12 (see the table)");
}

void run_dichotomy(const Options& o) {
  require(o.depth >= 1 && o.depth <= 1000000, "--depth must lie in [1, 1000000], got ", o.depth);
  Setup s = make_setup(o, 8);
  require(s.n <= 64, "dichotomy follows one row in 50-digit arithmetic: --n <= 64 required, got ", s.n);
  const RowMatrix K = model_kernels(s, false)[0];
  output::Report rep;
  rep.meta = output::metadata("rollout dichotomy", s.params);
  output::Table t;
  t.title = "Infinite-depth dichotomy (seed 004, Theorem 5.4), last row i = n-1, layer-1 kernel of " + s.model_name +
            ", n = " + std::to_string(s.n) + ", 50-digit arithmetic";
  t.header = {"schedule", "depth", "sum alpha", "P[i,i]", ">= bound (i)", "1 - P[i,0]", "<= bound (ii)", "holds"};
  nlohmann::json rows = nlohmann::json::array();
  bool all = true;
  for (const std::string& text : {o.deep_alpha, o.deep_alpha2}) {
    const AlphaSpec sp = parse_alpha_spec(text);
    require(sp.kind == AlphaSpec::Kind::Constant || sp.kind == AlphaSpec::Kind::Power,
            "dichotomy schedules must be const:X or power:A0,BETA, got '", text, "'");
    auto alpha = [&](long l) { return sp.kind == AlphaSpec::Kind::Constant ? sp.value : sp.value / std::pow(l + 1.0, sp.beta); };
    for (long d = 10; ; d = std::min(d * 10, o.depth)) {
      const auto r = dichotomy(K, alpha, d, s.n - 1, o.eps);
      const bool holds = r.holds_i && r.holds_ii;
      all = all && holds;
      t.add_row({text, output::fmt_int(d), fmt(r.sum_alpha, 6), r.self_mass, r.bound_i, r.off_zero_mass, r.bound_ii,
                 holds ? "yes" : "NO"});
      rows.push_back({{"schedule", text}, {"depth", d}, {"eps", r.eps}, {"sum_alpha", r.sum_alpha},
                      {"self_mass", r.self_mass}, {"bound_i", r.bound_i}, {"off_zero_mass", r.off_zero_mass},
                      {"bound_ii", r.bound_ii}, {"log10_off_zero_mass", r.log10_off_zero}, {"holds", holds}});
      if (d >= o.depth) break;
    }
  }
  rep.tables.push_back(t);
  rep.body = {{"rows", rows}};
  rep.notes.push_back("eps = smallest admissible kernel weight (Lemma 5.3) unless --eps is given; (i) P[i,i] >= "
                      "prod(1-(1-eps)alpha_l) matters when sum alpha < inf, (ii) 1-P[i,0] <= exp(-eps sum alpha) "
                      "-> 0 when sum alpha = inf (values far below 1e-308 are exact here)");
  app::emit(rep, o.common);
  if (!all) throw Error("dichotomy: a bound of Theorem 5.4 failed (see the table)");
}

void run_jacobian(const Options& o) {
  Setup s = make_setup(o, 16);
  const auto ks = model_kernels(s, true);
  const auto b = jacobian_bound(ks, o.C);
  const long d = o.target >= 0 ? o.target : s.n - 1;
  require(d < s.n, "--target must be < n = ", s.n, ", got ", d);
  output::Report rep;
  nlohmann::json params = s.params;
  params["C"] = o.C;
  params["target"] = d;
  rep.meta = output::metadata("rollout jacobian", params);
  output::Table t;
  t.title = "Jacobian bound (seed 000, Theorem 3.3): C^r [(I + A(r)) ... (I + A(1))]_{d,s}, d = " + std::to_string(d) +
            ", r = " + std::to_string(ks.size()) + " layers, C = " + fmt(o.C);
  t.header = {"s", "bound", "self term", "gate x runway", "gate share"};
  nlohmann::json rows = nlohmann::json::array();
  for (long src = 0; src <= d; ++src) {
    const double tot = b.bound(d, src), self = b.self_term(d, src), gate = b.gate_term(d, src);
    t.add_row({std::to_string(src), fmt(tot, 6), fmt(self, 6), fmt(gate, 6), fmt(tot > 0 ? gate / tot : 0, 4)});
    rows.push_back({{"s", src}, {"bound", tot}, {"self_term", self}, {"gate_term", gate}});
  }
  rep.tables.push_back(t);
  rep.body = {{"rows", rows}};
  rep.notes.push_back("kernels: the model's Abar(l) (content included) or --kernel-file; entries can grow like 2^r");
  app::emit(rep, o.common);
}

void add_model_options(CLI::App& app, Options& o) {
  app.add_option("--head-weights", o.head_weights, "File with H non-negative head weights (default: uniform mean over heads)");
  app.add_option("--model", o.model, "Preset (bloom-176b|bloom|bloom-7b1|mpt-7b|mpt-30b|falcon-rw-7b), a capture .h5 file, or a checkpoint .h5 (captured in-process on --capture-text)")
      ->capture_default_str();
  app.add_option("--n", o.n, "Sequence length n [default: 256; verify/monotonicity 48/64; dichotomy 8]")
      ->check(CLI::Range(1L, 1L << 26));
  app.add_option("--alpha", o.alpha, "Residual schedule: measured | const:X | power:A0,BETA (A0/(l+1)^BETA) | file:PATH")
      ->capture_default_str();
  app.add_option("--plot-scale", o.plot_scale,
                 "Plot y axis: linear (as the published figures; range of (b), (c), with (a) clipped) | log (every curve)")
      ->check(CLI::IsMember({"linear", "log"}))
      ->capture_default_str();
  app.add_option("--alpha-kind", o.alpha_kind, "Measured alpha of a capture file: token-mean (published) | frobenius (Eq. 1)")
      ->check(CLI::IsMember({"token-mean", "frobenius"}))
      ->capture_default_str();
  app.add_option("--mask", o.mask, "Mask: causal | swa:W (W keys, self included)")->capture_default_str();
  app.add_option("--slopes", o.slopes, "ALiBi slopes: preset (as shipped) | simple (2^(-8h/H)) | hf (BLOOM recipe)")
      ->check(CLI::IsMember({"preset", "simple", "hf"}))
      ->capture_default_str();
  app.add_flag("--falcon-scale", o.falcon_scale, "Divide ALiBi slopes by sqrt(d_head) (Falcon)");
  app.add_option("--content", o.content, "Content for variant (c): measured (per layer and head) | mean | none | c,delta")
      ->capture_default_str();
  app.add_option("--content-scale", o.content_scale, "Content scores: raw q.k (as published) | sqrt (divided by sqrt(d_head))")
      ->check(CLI::IsMember({"raw", "sqrt"}))
      ->capture_default_str();
  app.add_option("--kernel-file", o.kernel_file, "Measured kernels: n rows of n numbers (one layer) or L*n rows; dense path");
  app.add_option("--capture-text", o.capture_text,
                 "Checkpoint models: text captured in-process for the measured alpha and kernels (file, brown or kjv)")
      ->capture_default_str();
  app.add_option("--capture-seqs", o.capture_seqs, "Checkpoint models: number of captured sequences of n tokens")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--kernels", o.kernels,
                 "Kernels of a capture model: auto (--kernel-file if given, else measured) | measured (uniform head "
                 "mean of the capture's attention probabilities, averaged over its sequences; n = T) | file")
      ->check(CLI::IsMember({"auto", "measured", "file"}))
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"rollout: residual-aware attention rollout of seed 004 (position bias: U-shaped priors, primacy and "
               "recency forces, infinite-depth collapse) and the Jacobian bound of seed 000. Modes: default rollout, "
               "'monotonicity', 'verify', 'dichotomy', 'jacobian'.",
               "rollout"};
  app.fallthrough();
  add_model_options(app, o);
  app.add_option("--path", o.path, "Computation: auto (structured O(L H n) when possible) | dense")
      ->check(CLI::IsMember({"auto", "dense"}))
      ->capture_default_str();
  app.add_option("--influence", o.influence,
                 "Measured influence: a profile file (n numbers, or influence --out CSV/JSON), or auto (--model "
                 "CHECKPOINT: measured in process); Spearman and W1/(n-1) per variant");
  app.add_option("--kernel-source", o.kernel_source,
                 "With --model CHECKPOINT --influence: alibi (content-free ALiBi kernels; (c) adds the content measured "
                 "from the model) | measured (head-mean attention; (c) not defined) | auto (alibi for ALiBi checkpoints)")
      ->check(CLI::IsMember({"auto", "alibi", "measured"}))->capture_default_str();
  app.add_option("--influence-windows", o.influence_windows, "Windows of --capture-text for --influence auto and the measured kernels")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--influence-target", o.influence_target, "--influence auto: probability | log-probability | logit")
      ->check(CLI::IsMember({"probability", "log-probability", "logit"}))->capture_default_str();
  app.add_option("--matrix", o.matrix, "Also write the full rollout matrix P(L) of variant (b) as CSV (n <= 2048)");
  app::add_common_options(app, o.common);
  auto* mono = app.add_subcommand("monotonicity", "Stochastic-monotonicity statistics of the model's kernels");
  auto* verify = app.add_subcommand("verify", "Demonstrate Props. 4.2-4.5 on the preset and random monotone kernels");
  verify->add_option("--seeds", o.seeds, "Number of random monotone kernel families")->capture_default_str()->check(CLI::Range(0, 1000));
  auto* dich = app.add_subcommand("dichotomy", "Theorem 5.4 at depths 10..--depth in 50-digit arithmetic");
  dich->add_option("--depth", o.depth, "Largest depth (layers)")->capture_default_str()->check(CLI::Range(1L, 1000000L));
  dich->add_option("--schedule", o.deep_alpha, "Non-summable schedule (const:X or power:A0,BETA with BETA <= 1)")->capture_default_str();
  dich->add_option("--schedule2", o.deep_alpha2, "Summable schedule (power:A0,BETA with BETA > 1)")->capture_default_str();
  dich->add_option("--eps", o.eps, "Lemma 5.3 epsilon [default: smallest kernel weight]");
  auto* jac = app.add_subcommand("jacobian", "Seed 000 Theorem 3.3 bound for one target over all sources");
  jac->add_option("--C", o.C, "Per-layer constant C > 0")->capture_default_str()->check(CLI::PositiveNumber);
  jac->add_option("--target", o.target, "Target position d [default: n-1]");
  for (auto* sub : {mono, verify, dich, jac}) sub->fallthrough();
  app.require_subcommand(0, 1);
  app.footer(
      "Examples:\n"
      "  rollout --model bloom --alpha measured --plot bloom.svg\n"
      "  rollout --model bloom --n 1048576 --content none --format json --out p.json\n"
      "  rollout --model mpt-7b --alpha power:0.5,1.2 --mask swa:64 --format csv\n"
      "  rollout --model bloom --influence influence.txt\n"
      "  rollout --model run/best.h5 --alpha measured --influence auto --n 128   # seed 004 Tables 2-5 layout\n"
      "  rollout --model run/capture.h5 --alpha measured               # measured alpha and kernels\n"
      "  rollout --model run/best.h5 --alpha measured --n 128          # a checkpoint: captured on KJV text first\n"
      "  rollout --model run/capture.h5 --kernel-file kernels.txt --alpha measured\n"
      "  rollout verify --model bloom --n 48\n"
      "  rollout monotonicity --model mpt-30b --n 64\n"
      "  rollout dichotomy --model bloom --n 8 --depth 1000000\n"
      "  rollout jacobian --model bloom-7b1 --n 16 --C 1");
  return app::run(app, argc, argv, [&] {
    if (*mono) return run_monotonicity(o);
    if (*verify) return run_verify(o);
    if (*dich) return run_dichotomy(o);
    if (*jac) return run_jacobian(o);
    run_rollout(o);
  });
}
