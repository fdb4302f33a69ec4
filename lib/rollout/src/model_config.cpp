// Model configs in the schema of the Position bias (Herasimchyk et al.) reference implementation
// (cf/rollout/model_config.hpp). YAML is converted to a JSON value first, so both formats share one validator.
#include "cf/rollout/model_config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/rollout/preset.hpp"

namespace cf::rollout {

namespace {

using nlohmann::json;

// A YAML scalar becomes null, a bool, an integer, a double or a string (quoted scalars stay strings).
json scalar_to_json(const YAML::Node& n) {
  const std::string s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::nan("");
  if (s == ".inf" || s == "+.inf" || s == ".Inf") return HUGE_VAL;
  if (s == "-.inf" || s == "-.Inf") return -HUGE_VAL;
  const char* b = s.c_str();
  char* end = nullptr;
  errno = 0;
  if (s.find_first_of(".eEnN") == std::string::npos) {
    const long long v = std::strtoll(b, &end, 10);
    if (end && *end == '\0' && end != b) {
      if (errno == ERANGE) return std::strtod(b, nullptr);  // out of range: keep the magnitude
      return v;
    }
  }
  errno = 0;
  const double d = std::strtod(b, &end);
  if (end && *end == '\0' && end != b) return d;
  return s;
}

// Model configs are small literal trees: deeper nesting is a malformed or hostile file (and would
// recurse without bound below).
constexpr int kMaxYamlDepth = 64;

// Refuses anchors, aliases and nesting deeper than kMaxYamlDepth by walking the parser's events,
// BEFORE any node is built: YAML::Load expands aliases, so a self-referencing alias
// (`a: &a [*a]`) recurses forever and a 344-byte "billion laughs" file expands to gigabytes.
// Configs have no need for anchors; a plain file is accepted unchanged.
class PlainYamlCheck : public YAML::EventHandler {
 public:
  explicit PlainYamlCheck(const std::string& path) : path_(path) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override { anchor(m, a); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    fail(m, "uses an alias (*name); anchors and aliases are not supported in model configs: write the values out");
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t a, const std::string&) override {
    anchor(m, a);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnMapEnd() override { --depth_; }
  void OnAnchor(const YAML::Mark& m, const std::string&) override { anchor(m, 1); }

 private:
  [[noreturn]] void fail(const YAML::Mark& m, const std::string& what) const {
    throw InvalidArgument(str("model config '", path_, "' line ", m.line + 1, ": ", what));
  }
  void anchor(const YAML::Mark& m, YAML::anchor_t a) const {
    if (a != YAML::NullAnchor)
      fail(m,
           "defines an anchor (&name); anchors and aliases are not supported in model configs: write the values out");
  }
  void open(const YAML::Mark& m, YAML::anchor_t a) {
    anchor(m, a);
    if (++depth_ > kMaxYamlDepth) fail(m, str("nests lists/mappings deeper than ", kMaxYamlDepth, " levels"));
  }
  std::string path_;
  int depth_ = 0;
};

json yaml_to_json(const YAML::Node& n, int depth = 0) {
  if (depth > kMaxYamlDepth)  // PlainYamlCheck refuses this first; kept so no input recurses unbounded here
    throw InvalidArgument(str("model config nests lists/mappings deeper than ", kMaxYamlDepth, " levels"));
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(n);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e, depth + 1));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second, depth + 1);
      return o;
    }
  }
  return nullptr;
}

std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

/// Field access with the dotted path in every message.
struct Ctx {
  std::string file;
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InvalidArgument(str("model config '", file, "': ", field, " ", what));
  }
  void keys(const json& o, const std::string& field, const std::set<std::string>& allowed) const {
    if (!o.is_object()) fail(field.empty() ? "(top level)" : field, "must be a mapping, got " + show(o));
    for (const auto& kv : o.items())
      if (!allowed.count(kv.key())) {
        std::string k;
        for (const auto& a : allowed) k += (k.empty() ? "" : ", ") + a;
        fail((field.empty() ? "" : field + ".") + kv.key(), "is not a known field (known: " + k + ")");
      }
  }
  double number(const json& v, const std::string& field) const {
    if (!v.is_number()) fail(field, "must be a number, got " + show(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(field, "must be finite, got " + show(v));
    return d;
  }
  long integer(const json& v, const std::string& field, long lo, long hi) const {
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!(std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi)))
        fail(field, str("must be an integer in [", lo, ", ", hi, "], got ", show(v)));
      return static_cast<long>(d);
    }
    if (!v.is_number_integer()) fail(field, str("must be an integer in [", lo, ", ", hi, "], got ", show(v)));
    if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(hi))
      fail(field, str("must be an integer in [", lo, ", ", hi, "], got ", show(v)));
    const long long x = v.get<long long>();
    if (x < lo || x > hi) fail(field, str("must be an integer in [", lo, ", ", hi, "], got ", show(v)));
    return static_cast<long>(x);
  }
  std::string text(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, "must be a string, got " + show(v));
    return v.get<std::string>();
  }
  /// List of lists of numbers (a flat list of numbers reads as one row).
  std::vector<std::vector<double>> matrix(const json& v, const std::string& field) const {
    if (!v.is_array() || v.empty()) fail(field, "must be a non-empty list of lists of numbers, got " + show(v));
    std::vector<std::vector<double>> out;
    if (v[0].is_number()) {
      std::vector<double> row;
      for (std::size_t j = 0; j < v.size(); ++j) row.push_back(number(v[j], str(field, "[", j, "]")));
      out.push_back(row);
      return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string fi = str(field, "[", i, "]");
      if (!v[i].is_array() || v[i].empty()) fail(fi, "must be a non-empty list of numbers, got " + show(v[i]));
      std::vector<double> row;
      for (std::size_t j = 0; j < v[i].size(); ++j) row.push_back(number(v[i][j], str(fi, "[", j, "]")));
      out.push_back(row);
    }
    return out;
  }
};

json parse_file(const std::string& path) {
  std::error_code ec;
  require(std::filesystem::exists(path, ec), "--model-config: '", path, "' does not exist or is not a file");
  require_regular_input(path, "--model-config:");
  std::ifstream in(path);
  if (!in) throw Error(str("model config '", path, "' cannot be read"));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json" || ext == ".JSON") {
    try {
      return cf::parse_json(text, path);
    } catch (const json::exception& e) {
      throw InvalidArgument(str("model config '", path, "' is not valid JSON: ", e.what()));
    }
  }
  try {
    {
      std::istringstream events(text);
      YAML::Parser parser(events);
      PlainYamlCheck check(path);
      parser.HandleNextDocument(check);  // the first document: the one YAML::Load reads
    }
    return yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    throw InvalidArgument(str("model config '", path, "' is not valid YAML: ", e.what()));
  }
}

}  // namespace

ModelConfigFile load_model_config(const std::string& path) {
  const json root = parse_file(path);
  const Ctx c{path};
  c.keys(root, "",
         {"name", "sequence_length", "num_layers", "mask_config", "attention_config", "content_config",
          "lambda_schedule_config", "save_dir"});
  ModelConfigFile m;
  m.path = path;
  m.name = root.contains("name") ? c.text(root["name"], "name") : std::filesystem::path(path).stem().string();
  constexpr long kMaxLayers = 100000, kMaxHeads = 100000, kMaxN = 1L << 26;
  if (!root.contains("num_layers")) c.fail("num_layers", "is required (number of layers L >= 1)");
  m.layers = static_cast<int>(c.integer(root["num_layers"], "num_layers", 1, kMaxLayers));
  const int L = m.layers;
  m.sequence_length = root.contains("sequence_length") && !root["sequence_length"].is_null()
                          ? c.integer(root["sequence_length"], "sequence_length", 1, kMaxN)
                          : 256;

  // mask_config
  if (root.contains("mask_config") && !root["mask_config"].is_null()) {
    const json& mc = root["mask_config"];
    c.keys(mc, "mask_config", {"mask_type", "window_size"});
    const std::string type = mc.contains("mask_type") ? c.text(mc["mask_type"], "mask_config.mask_type") : "causal";
    const bool has_w = mc.contains("window_size") && !mc["window_size"].is_null();
    if (type == "causal") {
      m.model.mask.window = 0;
    } else if (type == "sliding_window") {
      if (!has_w) c.fail("mask_config.window_size", "is required for mask_type sliding_window (keys i-W+1..i)");
      m.model.mask.window = c.integer(mc["window_size"], "mask_config.window_size", 1, 1L << 40);
    } else if (type == "full") {
      c.fail("mask_config.mask_type",
             "'full' (bidirectional) is outside the causal rollout of Position bias (Herasimchyk et al.); use causal "
             "or sliding_window");
    } else {
      c.fail("mask_config.mask_type", "must be causal or sliding_window, got " + show(mc["mask_type"]));
    }
  }

  // attention_config
  if (!root.contains("attention_config")) c.fail("attention_config", "is required (num_heads, alibi_slopes)");
  const json& ac = root["attention_config"];
  c.keys(ac, "attention_config", {"num_heads", "alibi_slopes", "head_weights", "softmax_temperature"});
  if (!ac.contains("num_heads")) c.fail("attention_config.num_heads", "is required (H >= 1)");
  m.heads = static_cast<int>(c.integer(ac["num_heads"], "attention_config.num_heads", 1, kMaxHeads));
  const int H = m.heads;
  m.temperature = 1;
  if (ac.contains("softmax_temperature") && !ac["softmax_temperature"].is_null()) {
    m.temperature = c.number(ac["softmax_temperature"], "attention_config.softmax_temperature");
    if (!(m.temperature > 0)) c.fail("attention_config.softmax_temperature", str("must be > 0, got ", m.temperature));
  }
  if (!ac.contains("alibi_slopes"))
    c.fail("attention_config.alibi_slopes", "is required (1 or L lists of 1 or H slopes)");
  const auto slopes = c.matrix(ac["alibi_slopes"], "attention_config.alibi_slopes");
  if (slopes.size() != 1 && static_cast<int>(slopes.size()) != L)
    c.fail("attention_config.alibi_slopes", str("must hold 1 or num_layers = ", L, " lists, got ", slopes.size()));
  for (std::size_t l = 0; l < slopes.size(); ++l) {
    const std::string f = str("attention_config.alibi_slopes[", l, "]");
    if (slopes[l].size() != 1 && static_cast<int>(slopes[l].size()) != H)
      c.fail(f, str("must hold 1 or num_heads = ", H, " slopes, got ", slopes[l].size()));
    if (slopes[l].size() != slopes[0].size())
      c.fail(f, str("has ", slopes[l].size(), " slopes but alibi_slopes[0] has ", slopes[0].size(),
                    " (all lists must have the same length)"));
    for (std::size_t h = 0; h < slopes[l].size(); ++h)
      if (slopes[l][h] < 0)
        c.fail(str(f, "[", h, "]"), str("must be >= 0 (ALiBi penalises distance), got ", slopes[l][h]));
  }
  // the kernels use slope / temperature: a subnormal temperature overflows it (it was reported as
  // a non-finite ALiBi slope)
  for (const auto& row : slopes)
    for (double sl : row)
      if (!std::isfinite(sl / m.temperature))
        c.fail("attention_config.softmax_temperature",
               str("is too small: slope ", sl, " / temperature ", m.temperature,
                   " overflows (use a temperature >= ", sl / std::numeric_limits<double>::max(), ")"));
  // Head h uses slope min(h, len-1) of its layer's list (the reference's broadcasting); logits / T.
  auto expand = [&](const std::vector<double>& row) {
    std::vector<double> out(H);
    for (int h = 0; h < H; ++h) out[h] = row[std::min<std::size_t>(h, row.size() - 1)] / m.temperature;
    return out;
  };
  m.model.slopes = expand(slopes[0]);
  if (slopes.size() > 1)
    for (const auto& row : slopes) m.model.layer_slopes.push_back(expand(row));
  if (ac.contains("head_weights") && !ac["head_weights"].is_null()) {
    const auto hw = c.matrix(ac["head_weights"], "attention_config.head_weights");
    if (hw.size() != slopes.size())
      c.fail("attention_config.head_weights",
             str("must hold as many lists as alibi_slopes (", slopes.size(), "), got ", hw.size()));
    for (std::size_t l = 0; l < hw.size(); ++l) {
      const std::string f = str("attention_config.head_weights[", l, "]");
      if (static_cast<int>(hw[l].size()) != H)
        c.fail(f, str("must hold num_heads = ", H, " weights, got ", hw[l].size()));
      double sum = 0;
      for (std::size_t h = 0; h < hw[l].size(); ++h) {
        if (hw[l][h] < 0) c.fail(str(f, "[", h, "]"), str("must be >= 0, got ", hw[l][h]));
        sum += hw[l][h];
      }
      if (!(sum > 0) || !std::isfinite(sum)) c.fail(f, "must have a positive, finite sum (at least one weight > 0)");
    }
    if (hw.size() == 1)
      m.model.head_weights = hw[0];
    else
      m.model.layer_head_weights = hw;
  }

  // content_config
  m.content_broadcast = "reference";
  if (root.contains("content_config") && !root["content_config"].is_null()) {
    const json& cc = root["content_config"];
    c.keys(cc, "content_config", {"diagonal_scores", "base_scores", "broadcast"});
    if (cc.contains("broadcast")) {
      m.content_broadcast = c.text(cc["broadcast"], "content_config.broadcast");
      if (m.content_broadcast != "reference" && m.content_broadcast != "all_heads")
        c.fail("content_config.broadcast", "must be reference or all_heads, got " + show(cc["broadcast"]));
    }
    if (!cc.contains("diagonal_scores")) c.fail("content_config.diagonal_scores", "is required (1 or L lists)");
    const auto diag = c.matrix(cc["diagonal_scores"], "content_config.diagonal_scores");
    if (cc.contains("base_scores") && !cc["base_scores"].is_null()) {
      // base scores are a constant per head and cancel in the softmax; checked for shape only
      const auto base = c.matrix(cc["base_scores"], "content_config.base_scores");
      if (base.size() != diag.size())
        c.fail("content_config.base_scores",
               str("must hold as many lists as diagonal_scores (", diag.size(), "), got ", base.size()));
      for (std::size_t l = 0; l < base.size(); ++l)
        if (base[l].size() != diag[l].size())
          c.fail(str("content_config.base_scores[", l, "]"), str("must hold as many scores as diagonal_scores[", l,
                                                                 "] (", diag[l].size(), "), got ", base[l].size()));
    }
    if (diag.size() != 1 && static_cast<int>(diag.size()) != L)
      c.fail("content_config.diagonal_scores", str("must hold 1 or num_layers = ", L, " lists, got ", diag.size()));
    for (std::size_t l = 0; l < diag.size(); ++l) {
      if (static_cast<int>(diag[l].size()) > H)
        c.fail(str("content_config.diagonal_scores[", l, "]"),
               str("holds ", diag[l].size(), " scores for num_heads = ", H, " heads"));
      // The reference stacks the per-layer lists into one [L, k] tensor whose k it takes from the
      // first layer: lists of other lengths have no meaning there (issue 29). Refused, as
      // attention_config.alibi_slopes[l] is, instead of giving each layer its own head count.
      if (diag[l].size() != diag[0].size())
        c.fail(str("content_config.diagonal_scores[", l, "]"),
               str("has ", diag[l].size(), " scores but diagonal_scores[0] has ", diag[0].size(),
                   " (all lists must have the same length)"));
    }
    Eigen::MatrixXd delta = Eigen::MatrixXd::Zero(L, H);
    for (int l = 0; l < L; ++l) {
      const auto& row = diag[std::min<std::size_t>(l, diag.size() - 1)];
      for (int h = 0; h < H; ++h) {
        const std::size_t k = static_cast<std::size_t>(h);
        if (k < row.size())
          delta(l, h) = row[k];
        else if (m.content_broadcast == "all_heads")
          delta(l, h) = row.back();
        // "reference": heads past the list get no content (the reference builds the content of
        // head min(h, len-1) only, so a single score applies to head 0 alone)
      }
    }
    delta /= m.temperature;
    m.has_content = (delta.array() != 0).any();
    if (m.has_content) m.model.delta = delta;
  }

  // lambda_schedule_config
  if (!root.contains("lambda_schedule_config"))
    c.fail("lambda_schedule_config", "is required (schedule_type constant | power_decay | custom)");
  const json& lc = root["lambda_schedule_config"];
  if (!lc.is_object()) c.fail("lambda_schedule_config", "must be a mapping, got " + show(lc));
  if (!lc.contains("schedule_type"))
    c.fail("lambda_schedule_config.schedule_type", "is required (constant | power_decay | custom)");
  m.schedule = c.text(lc["schedule_type"], "lambda_schedule_config.schedule_type");
  if (m.schedule == "constant") {
    c.keys(lc, "lambda_schedule_config", {"schedule_type", "lambda_const"});
    if (!lc.contains("lambda_const")) c.fail("lambda_schedule_config.lambda_const", "is required");
    const double a = c.number(lc["lambda_const"], "lambda_schedule_config.lambda_const");
    if (a < 0 || a > 1) c.fail("lambda_schedule_config.lambda_const", str("must lie in [0, 1], got ", a));
    m.alpha = Eigen::VectorXd::Constant(L, a);
  } else if (m.schedule == "power_decay") {
    c.keys(lc, "lambda_schedule_config", {"schedule_type", "lambda_0", "beta", "origin"});
    if (!lc.contains("lambda_0")) c.fail("lambda_schedule_config.lambda_0", "is required");
    if (!lc.contains("beta")) c.fail("lambda_schedule_config.beta", "is required");
    const double a0 = c.number(lc["lambda_0"], "lambda_schedule_config.lambda_0");
    const double beta = c.number(lc["beta"], "lambda_schedule_config.beta");
    // The reference requires lambda_0 > 0, beta > 0 and clips lambda_t to [0, 1]; a clipped
    // schedule is refused here instead of changed silently.
    if (!(a0 > 0) || a0 > 1)
      c.fail("lambda_schedule_config.lambda_0", str("must lie in (0, 1] (alpha_1 = lambda_0 with origin 0), got ", a0));
    if (!(beta > 0)) c.fail("lambda_schedule_config.beta", str("must be > 0, got ", beta));
    const int origin =
        lc.contains("origin") ? static_cast<int>(c.integer(lc["origin"], "lambda_schedule_config.origin", 0, 1)) : 0;
    m.alpha = alpha_power(L, a0, beta, origin);
  } else if (m.schedule == "custom") {
    c.keys(lc, "lambda_schedule_config", {"schedule_type", "lambdas_custom"});
    if (!lc.contains("lambdas_custom")) c.fail("lambda_schedule_config.lambdas_custom", "is required (L numbers)");
    const json& v = lc["lambdas_custom"];
    if (!v.is_array()) c.fail("lambda_schedule_config.lambdas_custom", "must be a list of numbers, got " + show(v));
    if (static_cast<int>(v.size()) != L)
      c.fail("lambda_schedule_config.lambdas_custom", str("must hold num_layers = ", L, " numbers, got ", v.size()));
    m.alpha.resize(L);
    for (int l = 0; l < L; ++l) {
      const std::string f = str("lambda_schedule_config.lambdas_custom[", l, "]");
      m.alpha(l) = c.number(v[l], f);
      if (m.alpha(l) < 0 || m.alpha(l) > 1) c.fail(f, str("must lie in [0, 1], got ", m.alpha(l)));
    }
  } else {
    c.fail("lambda_schedule_config.schedule_type",
           "must be constant, power_decay or custom, got " + show(lc["schedule_type"]));
  }
  if (root.contains("save_dir") && !root["save_dir"].is_null()) c.text(root["save_dir"], "save_dir");  // ignored
  validate_model(m.model);
  return m;
}

}  // namespace cf::rollout
