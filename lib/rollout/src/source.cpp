// Resolution of a rollout source from the user's options (cf/rollout/source.hpp).
#include "cf/rollout/source.hpp"

#include <cmath>
#include <filesystem>

#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/rollout/model_config.hpp"
#include "cf/rollout/preset.hpp"

namespace cf::rollout {

namespace {

std::string known_presets() {
  std::string k;
  for (const auto& p : preset_names()) k += (k.empty() ? "" : ", ") + p;
  return k + " (alias bloom)";
}

double finite_number(const std::string& s, const std::string& what) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  require(!s.empty() && end && *end == '\0' && std::isfinite(v), what, ": '", s, "' is not a finite number");
  return v;
}

/// Content of variant (c) from --content for a structured model; `measured` is the model's own.
Eigen::MatrixXd resolve_content(const std::string& content, const Eigen::MatrixXd& measured, bool has_mean, double mean,
                                double scale, const std::string& mean_note) {
  if (content == "measured") return measured * scale;
  if (content == "none") return {};
  if (content == "mean") {
    require(has_mean, "--content mean: ", mean_note);
    return Eigen::MatrixXd::Constant(1, 1, mean * scale);
  }
  const auto comma = content.find(',');
  require(comma != std::string::npos, "--content: expected none | measured | mean | c,delta, got '", content, "'");
  finite_number(content.substr(0, comma), "--content c,delta: c");  // c cancels in the softmax
  const double delta = finite_number(content.substr(comma + 1), "--content c,delta: delta");
  return Eigen::MatrixXd::Constant(1, 1, delta * scale);
}

int capture_layers(const std::string& path) {
  const io::File f = io::File::open(path);
  if (!f.has_attr("config")) return -1;
  try {
    const auto cfg = cf::parse_json(f.attr_string("config"), "config attribute");
    return cfg.contains("n_layer") ? cfg["n_layer"].get<int>() : -1;
  } catch (const nlohmann::json::exception&) {
    return -1;
  }
}

}  // namespace

bool is_model_file(const std::string& model) {
  if (model.find('/') != std::string::npos) return true;
  if (!canonical_preset_name(model).empty()) return false;  // preset names win over same-named files
  std::error_code ec;
  if (std::filesystem::is_regular_file(model, ec) || std::filesystem::is_directory(model, ec)) return true;
  return model.size() > 3 && model.substr(model.size() - 3) == ".h5";
}

bool is_checkpoint_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return true;  // a Hugging Face directory (docs/hf.md)
  if (!io::is_hdf5_file(path)) return false;
  const io::File f = io::File::open(path);
  return f.has_attr("format") && f.attr_string("format") == "causalflow-checkpoint";
}

RolloutSource make_source(const SourceOptions& o, long default_n) {
  RolloutSource s;
  const Mask mask = parse_mask(o.mask);
  const AlphaSpec spec = parse_alpha_spec(o.alpha);
  require(o.n >= 0, "--n must be >= 1, got ", o.n);
  s.n = o.n > 0 ? o.n : default_n;
  s.params = {{"alpha", o.alpha}, {"mask", mask.name()}, {"content", o.content}};
  require(o.kernels != "file" || !o.kernel_file.empty(), "--kernels file needs --kernel-file FILE");
  require(o.kernels != "alibi" || o.kernel_file.empty(), "--kernels alibi builds the kernels: drop --kernel-file");
  require(o.kernels != "measured" || o.kernel_file.empty(),
          "--kernels measured takes the kernels from the capture: drop --kernel-file (or use --kernels file)");
  const bool file_model = o.model_config.empty() && is_model_file(o.model);
  const bool preset_model = o.model_config.empty() && !file_model;
  require(o.dataset.empty() || preset_model,
          "--dataset selects a preset's measured schedule and content; it does not "
          "apply to --model-config or capture/checkpoint files");
  if (!o.kernel_file.empty()) {
    s.kernels = read_kernel_file(o.kernel_file);
    const long kn = s.kernels[0].rows();
    require(o.n == 0 || o.n == kn, "--n ", o.n, " differs from the kernel file's n = ", kn);
    s.n = kn;
    require(mask.window == 0, "--mask applies to ALiBi kernels only; a kernel file carries its own mask");
    s.kernel_source = "kernel file";
    s.params["kernels"] = "file";
  }
  Eigen::VectorXd measured;
  if (!o.model_config.empty()) {
    // ---- a model config file: the structured ALiBi model it describes ----
    const ModelConfigFile c = load_model_config(o.model_config);
    require(!o.falcon_scale, "--falcon-scale needs a preset's d_head; a model config states its slopes directly");
    require(o.content_scale == "raw",
            "--content-scale sqrt needs a preset's d_head; scale the config's scores instead");
    require(o.head_weights.empty(), "--head-weights: a model config states attention_config.head_weights itself");
    s.name = c.name;
    s.L = c.layers;
    measured = c.alpha;
    s.params["model_config"] = o.model_config;
    s.params["model"] = c.name;
    s.params["heads"] = c.heads;
    s.params["schedule"] = c.schedule;
    s.params["softmax_temperature"] = c.temperature;
    s.params["content_broadcast"] = c.content_broadcast;
    if (o.n == 0 && s.kernels.empty()) s.n = c.sequence_length;
    if (s.kernels.empty()) {
      s.structured = true;
      s.base = c.model;
      s.base.delta.resize(0, 0);
      if (o.mask != "causal") s.base.mask = mask;  // --mask overrides the config's mask
      if (o.slopes != "preset") {
        require(c.model.layer_slopes.empty(), "--slopes ", o.slopes, ": the config gives slopes per layer");
        s.base.slopes = alibi_slopes(o.slopes, c.heads);
      }
      s.params["mask"] = s.base.mask.name();
      s.params["slopes"] = o.slopes == "preset" ? "config" : o.slopes;
      s.delta = resolve_content(o.content, c.model.delta, false, 0, 1.0,
                                "a model config has no mean content; give content_config or --content c,delta");
    }
  } else if (file_model) {
    // ---- a capture (or a checkpoint captured by the caller into capture_path) ----
    require(std::filesystem::exists(o.model), "--model: file '", o.model,
            "' does not exist; known presets: ", known_presets());
    require(o.slopes == "preset" && !o.falcon_scale && o.content == "measured" && o.content_scale == "raw" &&
                o.head_weights.empty(),
            "--slopes, --falcon-scale, --content, --content-scale and --head-weights describe ALiBi presets; a "
            "capture or checkpoint brings its measured kernels (variant (c) is not defined for them)");
    s.name = o.model;
    const std::string cap = o.capture_path.empty() ? o.model : o.capture_path;
    if (!o.capture_path.empty()) s.params["captured"] = o.capture_note;
    require_capture_file(cap);
    if (o.kernels == "alibi") {
      // content-free ALiBi kernels of the model itself (its config: pos = alibi, slopes
      // 2^(-8(h+1)/H), one mask for every layer), measured alpha; n is free (structured path)
      const auto cfg = cf::parse_json(io::File::open(cap).attr_string("config"), cap);
      require(cfg.value("pos", std::string()) == "alibi", "--kernels alibi: '", o.model, "' has position scheme '",
              cfg.value("pos", std::string("?")), "', not alibi (use --kernels measured: measured kernels fix n = T)");
      const int H = cfg.at("n_head").get<int>();
      long window = -1;
      for (const auto& layer : cfg.at("layers")) {
        const std::string kind = layer.value("attn", std::string("full"));
        require(kind == "full" || kind == "swa", "--kernels alibi: layer attention '", kind,
                "' has no structured ALiBi kernel (full or swa layers only)");
        const long w = kind == "swa" ? layer.value("w", 0L) : 0L;
        require(window < 0 || window == w, "--kernels alibi: the layers use different masks");
        window = w;
      }
      require(mask.window == 0, "--mask: --kernels alibi takes the model's own mask");
      s.structured = true;
      // the model's recipe: "hf" (BLOOM's build_alibi_tensor) for BLOOM imports, else 2^(-8h/H)
      const auto arch = cfg.find("arch");
      const std::string recipe =
          arch != cfg.end() && arch->is_object() ? arch->value("alibi_slopes", std::string("simple")) : "simple";
      require(recipe == "simple" || recipe == "hf", "--kernels alibi: '", o.model, "' has arch.alibi_slopes '", recipe,
              "' (expected simple or hf)");
      s.base.slopes = alibi_slopes(recipe, H);
      s.base.mask.window = std::max(0L, window);
      s.kernel_source = "ALiBi (content-free, the model's slopes)";
      s.params["kernels"] = "alibi (content-free kernels of the model's slopes " +
                            std::string(recipe == "hf" ? "of BLOOM's build_alibi_tensor" : "2^(-8h/H)") + ", " +
                            s.base.mask.name() + ")";
    } else if (s.kernels.empty()) {
      require(mask.window == 0, "--mask applies to ALiBi kernels only; measured kernels carry the model's own mask");
      s.kernels = read_capture_kernels(cap);
      const long kn = s.kernels[0].rows();
      require(o.n == 0 || o.n == kn, "--n ", o.n, " differs from the capture's sequence length T = ", kn,
              " (measured kernels fix n = T; omit --n)");
      s.n = kn;
      s.params["kernels"] = "measured (capture head mean)";
      s.kernel_source = "measured kernels";
    }
    if (spec.kind == AlphaSpec::Kind::Measured)
      measured = read_capture_alpha(cap, o.alpha_kind == "frobenius" ? "/alpha_frobenius" : "/alpha_token_mean");
    s.params["alpha_kind"] = o.alpha_kind;
    const int declared = capture_layers(cap);
    if (spec.kind == AlphaSpec::Kind::Measured)
      s.L = static_cast<int>(measured.size());
    else
      s.L = declared > 0 ? declared : static_cast<int>(s.kernels.size());
    if (s.structured) require(declared > 0, "--kernels alibi: the capture's config has no n_layer");
    if (declared > 0)
      require(s.L == declared, "capture '", cap, "': its alpha has ", s.L,
              " layers but its config has n_layer = ", declared);
    s.params["model"] = o.model;
  } else {
    // ---- a preset, with a dataset's measured schedule and content prior ----
    Preset p = load_preset(o.model);
    select_dataset(p, o.dataset.empty() ? "fineweb-edu" : o.dataset);
    s.name = p.name;
    s.L = p.layers;
    measured = p.alpha_measured;
    s.params["model"] = p.name;
    s.params["dataset"] = p.dataset;
    if (s.kernels.empty()) {
      s.structured = true;
      s.base.mask = mask;
      s.base.slopes = o.slopes == "preset" ? p.slopes : alibi_slopes(o.slopes, p.heads);
      const double dscale = o.falcon_scale ? 1.0 / std::sqrt(static_cast<double>(p.d_head)) : 1.0;
      for (double& m : s.base.slopes) m *= dscale;
      if (!o.head_weights.empty()) {
        Eigen::VectorXd hw = read_alpha_file(o.head_weights, "--head-weights file");  // same number-list format
        require(hw.size() == p.heads, "--head-weights has ", hw.size(), " numbers but the model has H = ", p.heads);
        s.base.head_weights.assign(hw.data(), hw.data() + hw.size());
        model_head_weights(s.base);  // validates: non-negative, positive sum
        s.params["head_weights"] = o.head_weights;
      }
      s.params["slopes"] = o.slopes == "preset" ? "preset (" + p.slope_recipe + ")" : o.slopes;
      s.params["alibi_divided_by_sqrt_d_head"] = o.falcon_scale;
      s.params["heads"] = p.heads;
      const double cscale = o.content_scale == "sqrt" ? 1.0 / std::sqrt(static_cast<double>(p.d_head)) : 1.0;
      s.delta = resolve_content(o.content, p.content_delta, p.has_content_mean, p.content_mean, cscale,
                                "the reference ships a mean_content config for fineweb-edu only, not for " + p.dataset);
      s.params["content_scale"] = o.content_scale;
    }
  }
  if (!s.kernels.empty() && s.kernels.size() == 1 && s.L > 1 && !o.kernel_file.empty())
    s.kernels.assign(s.L, s.kernels[0]);  // a kernel file with one matrix: the same kernel at every layer
  if (!s.kernels.empty())
    require(static_cast<int>(s.kernels.size()) == s.L,
            o.kernel_file.empty() ? "the capture has " : "--kernel-file has ", s.kernels.size(),
            " layers of kernels but the model has L = ", s.L);
  s.alpha = resolve_alpha(spec, s.L, measured);
  require(s.n >= 1, "--n must be >= 1, got ", s.n);
  if (s.structured) validate_model(s.base);
  s.params["n"] = s.n;
  s.params["layers"] = s.L;
  return s;
}

std::vector<RowMatrix> source_kernels(const RolloutSource& s, bool content, long max_n) {
  if (!s.structured) return s.kernels;
  require(s.n <= max_n, "this mode builds dense kernels: --n <= ", max_n, " required, got ", s.n);
  AlibiModel m = s.base;
  if (content) m.delta = s.delta;
  std::vector<RowMatrix> ks;
  for (int l = 0; l < s.L; ++l) {
    if (l > 0 && same_layer_kernel(m, l, 0)) {
      ks.push_back(ks[0]);
      continue;
    }
    ks.push_back(alibi_kernel_dense(m, l, s.n));
  }
  return ks;
}

}  // namespace cf::rollout
