// Model configs (`--model-config`), dataset selection (`--dataset`), the power-decay indexing and
// acceptance 5 of issue 9: every shipped position-bias config of the Position bias (Herasimchyk et al.) reference
// implementation (data/position-bias/config/rollout, github ml-uhh/position-bias @ a514e09) is
// expressible with rollout options or --model-config. The reference's own numbers are checked by
// the numpy oracle tests/rollout/reference_configs.py (CTest "rollout app: reference configs").
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "cf/core/error.hpp"
#include "cf/rollout/model_config.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"
#include "cf/rollout/source.hpp"
#include "cf/rollout/variants.hpp"

using namespace cf::rollout;
namespace fs = std::filesystem;

namespace {
const std::string kConfigs = std::string(CF_DATA_DIR) + "/position-bias/config/rollout";

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("cf_rollout_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

// Entrywise relative agreement where b_j > 1e-280; exact agreement of (near) zeros elsewhere.
double entrywise_rel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  double worst = 0;
  for (long j = 0; j < a.size(); ++j) {
    if (b(j) > 1e-280)
      worst = std::max(worst, std::abs(a(j) - b(j)) / b(j));
    else if (std::abs(a(j)) > 1e-270)
      worst = std::max(worst, 1.0);
  }
  return worst;
}

Eigen::VectorXd own_profile(const std::string& config, long n) {
  SourceOptions o;
  o.model_config = config;
  o.n = n;
  const RolloutSource s = make_source(o, 0);
  return rollout_profile(s, s.alpha, s.delta.size() > 0, n);
}
}  // namespace

TEST_CASE("Power decay: power0 is the reference indexing (first layer A0), power1 is one layer later",
          "[rollout][alpha]") {
  // Reference lambda_schedule.py: lambda_t = lambda_0 / (t+1)^beta for t = 0..L-1.
  const Eigen::VectorXd a0 = alpha_power(4, 0.8, 1.5, 0), a1 = alpha_power(4, 0.8, 1.5, 1);
  for (int t = 0; t < 4; ++t) {
    CHECK(a0(t) == Approx(0.8 / std::pow(t + 1.0, 1.5)).epsilon(1e-15));
    CHECK(a1(t) == Approx(0.8 / std::pow(t + 2.0, 1.5)).epsilon(1e-15));
  }
  CHECK(a0(0) == 0.8);
  CHECK(a1(0) == Approx(0.8 / std::pow(2.0, 1.5)));
  CHECK(parse_alpha_spec("power:0.8,1.5").origin == 0);
  CHECK(parse_alpha_spec("power0:0.8,1.5").origin == 0);
  CHECK(parse_alpha_spec("power1:0.8,1.5").origin == 1);
  CHECK(resolve_alpha(parse_alpha_spec("power1:0.8,1.5"), 4, {}).isApprox(a1));
  CHECK(alpha_at(parse_alpha_spec("power:0.8,1.5"), 1) == 0.8);
  CHECK(alpha_at(parse_alpha_spec("power1:0.8,1.5"), 3) == Approx(0.8 / std::pow(4.0, 1.5)));
  CHECK_THROWS_AS(parse_alpha_spec("power2:0.5,1"), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_alpha_spec("power0:nan,1"), cf::InvalidArgument);
  CHECK_THROWS_AS(parse_alpha_spec("power1:0.5,-1"), cf::InvalidArgument);
}

TEST_CASE("Every dataset of every preset ships its alpha schedule and content prior", "[rollout][preset]") {
  for (const auto& name : preset_names()) {
    Preset p = load_preset(name);
    for (const auto& ds : dataset_names()) {
      INFO(name << " " << ds);
      select_dataset(p, ds);
      CHECK(p.alpha_measured.size() == p.layers);
      CHECK(p.content_delta.rows() == p.layers);
      CHECK(p.content_delta.cols() == p.heads);
      CHECK(p.content_delta.cwiseAbs().maxCoeff() > 0);
      CHECK(p.has_content_mean == (ds == "fineweb-edu"));
    }
    // The three datasets' schedules differ (reference configs all_content/<dataset>/).
    CHECK((p.alpha_by_dataset.at("dclm") - p.alpha_by_dataset.at("fineweb-edu")).cwiseAbs().maxCoeff() > 1e-3);
    CHECK((p.alpha_by_dataset.at("wikipedia") - p.alpha_by_dataset.at("dclm")).cwiseAbs().maxCoeff() > 1e-3);
    CHECK_THROWS_AS(select_dataset(p, "c4"), cf::InvalidArgument);
  }
  // Published fact (reference config all_content/dclm/bloom-7b1.yaml, lambdas_custom[0:2]).
  Preset b = load_preset("bloom-7b1");
  select_dataset(b, "dclm");
  CHECK(b.alpha_measured(0) == 0.23594486075639726);
  CHECK(b.alpha_measured(1) == 0.18522577449679375);
}

TEST_CASE("Every shipped reference config loads and is expressible with rollout options", "[rollout][config]") {
  // Acceptance 5 (issue 9): no_content (with and without residual), all_content for the three
  // datasets, mean_content; the config's own rollout equals the one built from preset options
  // (--dataset, --content, --alpha const:1 for no-residual), entry by entry. mean_content applies
  // its scalar to head 0 only in the reference, which --content mean (every head) does not
  // reproduce: only --model-config expresses it (checked against a per-head delta here).
  int count = 0;
  for (const auto& e : fs::recursive_directory_iterator(kConfigs)) {
    if (e.path().extension() != ".yaml") continue;
    const std::string path = e.path().string();
    const std::string rel = fs::relative(e.path(), kConfigs).string();
    INFO(rel);
    ++count;
    const ModelConfigFile c = load_model_config(path);
    if (rel == "example.yaml") {
      CHECK(c.layers == 64);
      CHECK(c.heads == 1);
      CHECK(c.model.slopes == std::vector<double>{1.0});
      CHECK(c.alpha.isApprox(Eigen::VectorXd::Constant(64, 0.2)));
      continue;
    }
    const std::string stem = e.path().stem().string();
    const bool noresidual = stem.find("noresidual") != std::string::npos;
    std::string model = stem.substr(0, stem.find("-noresidual"));
    if (model == "bloom") model = "bloom-176b";
    const std::string kind = rel.substr(rel.find('/') + 1, rel.find('/', rel.find('/') + 1) - rel.find('/') - 1);
    std::string dataset = "fineweb-edu";
    for (const auto& ds : dataset_names())
      if (rel.find("/" + ds + "/") != std::string::npos) dataset = ds;
    SourceOptions o;
    o.model = model;
    o.dataset = dataset;
    o.n = 64;
    if (noresidual) o.alpha = "const:1";
    o.content = kind == "no_content" ? "none" : kind == "mean_content" ? "mean" : "measured";
    const RolloutSource s = make_source(o, 0);
    CHECK(c.layers == s.L);
    CHECK(c.heads == static_cast<int>(s.base.slopes.size()));
    CHECK(c.alpha.isApprox(s.alpha, 0));  // exact: same numbers as shipped
    CHECK(c.model.slopes == s.base.slopes);
    CHECK(c.sequence_length == 256);
    const Eigen::VectorXd from_config = own_profile(path, 64);
    if (kind == "mean_content") {
      CHECK(c.model.delta.rows() == c.layers);
      CHECK(c.model.delta(0, 0) == s.delta(0, 0));
      CHECK(c.model.delta.col(0).isConstant(s.delta(0, 0)));
      CHECK(c.model.delta.rightCols(c.heads - 1).isZero(0));  // head 0 only, as the reference
      AlibiModel m = s.base;
      m.delta = Eigen::MatrixXd::Zero(1, c.heads);
      m.delta(0, 0) = s.delta(0, 0);
      CHECK(entrywise_rel(from_config, rollout_last_row_alibi(m, s.alpha, 64)) < 1e-12);
    } else {
      const Eigen::VectorXd from_options = rollout_profile(s, s.alpha, s.delta.size() > 0, 64);
      CHECK(entrywise_rel(from_config, from_options) < 1e-12);
    }
  }
  CHECK(count == 33);
}

TEST_CASE("Model config: JSON and YAML give the same model, per-layer slopes, weights and temperature",
          "[rollout][config]") {
  const std::string yaml = write_temp("m.yaml", R"(name: tiny
sequence_length: 40
num_layers: 3
mask_config: {mask_type: sliding_window, window_size: 7}
attention_config:
  num_heads: 2
  alibi_slopes: [[0.5, 0.25], [0.3, 0.1], [1.0, 0.0]]
  head_weights: [[1, 3], [1, 1], [2, 0.5]]
  softmax_temperature: 2.0
content_config:
  diagonal_scores: [[1.0, -2.0], [0.0, 0.5], [3.0, 3.0]]
  base_scores: [[0, 0], [0, 0], [0, 0]]
lambda_schedule_config: {schedule_type: power_decay, lambda_0: 0.9, beta: 0.5}
)");
  const std::string json = write_temp("m.json", R"({"name": "tiny", "sequence_length": 40, "num_layers": 3,
 "mask_config": {"mask_type": "sliding_window", "window_size": 7},
 "attention_config": {"num_heads": 2, "alibi_slopes": [[0.5, 0.25], [0.3, 0.1], [1.0, 0.0]],
   "head_weights": [[1, 3], [1, 1], [2, 0.5]], "softmax_temperature": 2.0},
 "content_config": {"diagonal_scores": [[1.0, -2.0], [0.0, 0.5], [3.0, 3.0]], "base_scores": [[0, 0], [0, 0], [0, 0]]},
 "lambda_schedule_config": {"schedule_type": "power_decay", "lambda_0": 0.9, "beta": 0.5}})");
  const ModelConfigFile y = load_model_config(yaml), j = load_model_config(json);
  CHECK(y.sequence_length == 40);
  CHECK(y.model.mask.window == 7);
  REQUIRE(y.model.layer_slopes.size() == 3);
  CHECK(y.model.layer_slopes[1] == std::vector<double>{0.15, 0.05});  // slopes / T
  CHECK(y.model.delta(0, 1) == -1.0);                                 // content / T
  CHECK(y.alpha(0) == 0.9);                                           // power_decay: reference indexing
  CHECK(y.alpha(2) == Approx(0.9 / std::sqrt(3.0)));
  const Eigen::VectorXd py = own_profile(yaml, 40), pj = own_profile(json, 40);
  CHECK(py == pj);
  // Independent dense computation: per layer, per head softmax of (-m d + delta [d = 0]) / T on the
  // window, weighted heads, R = (1-a) I + a A.
  const long n = 40;
  Eigen::MatrixXd P = Eigen::MatrixXd::Identity(n, n);
  const double slopes[3][2] = {{0.5, 0.25}, {0.3, 0.1}, {1.0, 0.0}}, hw[3][2] = {{1, 3}, {1, 1}, {2, 0.5}},
               dg[3][2] = {{1.0, -2.0}, {0.0, 0.5}, {3.0, 3.0}};
  for (int l = 0; l < 3; ++l) {
    Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n, n);
    for (int h = 0; h < 2; ++h) {
      const double w = hw[l][h] / (hw[l][0] + hw[l][1]);
      for (long i = 0; i < n; ++i) {
        double z = 0;
        for (long k = std::max(0L, i - 6); k <= i; ++k)
          z += std::exp((-slopes[l][h] * (i - k) + (k == i ? dg[l][h] : 0)) / 2.0);
        for (long k = std::max(0L, i - 6); k <= i; ++k)
          A(i, k) += w * std::exp((-slopes[l][h] * (i - k) + (k == i ? dg[l][h] : 0)) / 2.0) / z;
      }
    }
    const double a = 0.9 / std::pow(l + 1.0, 0.5);
    P = ((1 - a) * Eigen::MatrixXd::Identity(n, n) + a * A) * P;
  }
  const Eigen::VectorXd ref = P.row(n - 1).transpose();
  CHECK(entrywise_rel(py, ref) < 1e-12);
  fs::remove(yaml);
  fs::remove(json);
}

TEST_CASE("Model config: every field is validated with the field named", "[rollout][config]") {
  const std::string good_head = "num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[0.5, 0.25]]}\n";
  const std::string good_sched = "lambda_schedule_config: {schedule_type: constant, lambda_const: 0.5}\n";
  struct Case {
    std::string text, field;
  };
  const std::vector<Case> cases = {
      {"attention_config: {num_heads: 2, alibi_slopes: [[0.5]]}\n" + good_sched, "num_layers"},
      {"num_layers: 0\nattention_config: {num_heads: 2, alibi_slopes: [[0.5]]}\n" + good_sched, "num_layers"},
      {"num_layers: 2.5\nattention_config: {num_heads: 2, alibi_slopes: [[0.5]]}\n" + good_sched, "num_layers"},
      {"num_layers: 99999999999999999999\nattention_config: {num_heads: 2, alibi_slopes: [[0.5]]}\n" + good_sched,
       "num_layers"},
      {"num_layers: 2\nattention_config: {num_heads: -1, alibi_slopes: [[0.5]]}\n" + good_sched,
       "attention_config.num_heads"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[0.5, .nan]]}\n" + good_sched,
       "attention_config.alibi_slopes[0][1]"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[0.5, -1]]}\n" + good_sched,
       "attention_config.alibi_slopes[0][1]"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[0.5, x]]}\n" + good_sched,
       "attention_config.alibi_slopes[0][1]"},
      {"num_layers: 2\nattention_config: {num_heads: 3, alibi_slopes: [[0.5, 0.2]]}\n" + good_sched,
       "attention_config.alibi_slopes[0]"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[1], [1], [1]]}\n" + good_sched,
       "attention_config.alibi_slopes"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[1, 1]], head_weights: [[0, 0]]}\n" + good_sched,
       "attention_config.head_weights[0]"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[1, 1]], head_weights: [[1, -1]]}\n" +
           good_sched,
       "attention_config.head_weights[0][1]"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[1, 1]], softmax_temperature: 0}\n" + good_sched,
       "attention_config.softmax_temperature"},
      {"num_layers: 2\nattention_config: {num_heads: 2, alibi_slopes: [[1, 1]], bogus: 1}\n" + good_sched,
       "attention_config.bogus"},
      {good_head + "mask_config: {mask_type: full}\n" + good_sched, "mask_config.mask_type"},
      {good_head + "mask_config: {mask_type: sliding_window}\n" + good_sched, "mask_config.window_size"},
      {good_head + "mask_config: {mask_type: sliding_window, window_size: 0}\n" + good_sched,
       "mask_config.window_size"},
      {good_head + "content_config: {diagonal_scores: [[1, .inf]], base_scores: [[0, 0]]}\n" + good_sched,
       "content_config.diagonal_scores[0][1]"},
      {good_head + "content_config: {diagonal_scores: [[1, 2]], base_scores: [[0]]}\n" + good_sched,
       "content_config.base_scores[0]"},
      {good_head + "content_config: {diagonal_scores: [[1, 2, 3]]}\n" + good_sched,
       "content_config.diagonal_scores[0]"},
      // issue 29: per-layer lists of different lengths (the reference takes k from the first layer)
      {good_head + "content_config: {diagonal_scores: [[1, 2], [1]]}\n" + good_sched,
       "content_config.diagonal_scores[1] has 1 scores but diagonal_scores[0] has 2"},
      {good_head + "content_config: {diagonal_scores: [[1]], broadcast: some}\n" + good_sched,
       "content_config.broadcast"},
      {good_head, "lambda_schedule_config"},
      {good_head + "lambda_schedule_config: {schedule_type: constant, lambda_const: 1.5}\n",
       "lambda_schedule_config.lambda_const"},
      {good_head + "lambda_schedule_config: {schedule_type: custom, lambdas_custom: [0.5]}\n",
       "lambda_schedule_config.lambdas_custom"},
      {good_head + "lambda_schedule_config: {schedule_type: custom, lambdas_custom: [0.5, -0.1]}\n",
       "lambda_schedule_config.lambdas_custom[1]"},
      {good_head + "lambda_schedule_config: {schedule_type: power_decay, lambda_0: 2, beta: 1}\n",
       "lambda_schedule_config.lambda_0"},
      {good_head + "lambda_schedule_config: {schedule_type: power_decay, lambda_0: 0.5, beta: 0}\n",
       "lambda_schedule_config.beta"},
      {good_head + "lambda_schedule_config: {schedule_type: power_decay, lambda_0: 0.5, beta: 1, origin: 2}\n",
       "lambda_schedule_config.origin"},
      {good_head + "lambda_schedule_config: {schedule_type: cosine}\n", "lambda_schedule_config.schedule_type"},
      {good_head + good_sched + "sequence_length: -5\n", "sequence_length"},
      {good_head + good_sched + "extra_field: 1\n", "extra_field"},
      {"[1, 2, 3]\n", "(top level)"},
  };
  int k = 0;
  for (const auto& c : cases) {
    const std::string p = write_temp("bad" + std::to_string(k++) + ".yaml", c.text);
    INFO(c.text);
    try {
      load_model_config(p);
      FAIL("accepted: " << c.text);
    } catch (const cf::InvalidArgument& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find(c.field + " ") != std::string::npos);
    }
    fs::remove(p);
  }
  const std::string badjson = write_temp("bad.json", "{\"num_layers\": 2,");
  CHECK_THROWS_AS(load_model_config(badjson), cf::InvalidArgument);
  fs::remove(badjson);
  CHECK_THROWS_AS(load_model_config("/nonexistent/model.yaml"), cf::Error);
}

TEST_CASE("Options that do not apply to the model kind are refused", "[rollout][config]") {
  SourceOptions o;
  o.model_config = kConfigs + "/alibi/no_content/mpt-7b.yaml";
  o.dataset = "dclm";
  CHECK_THROWS_AS(make_source(o, 0), cf::InvalidArgument);
  o.dataset.clear();
  o.falcon_scale = true;
  CHECK_THROWS_AS(make_source(o, 0), cf::InvalidArgument);
  o.falcon_scale = false;
  o.content = "mean";
  CHECK_THROWS_AS(make_source(o, 0), cf::InvalidArgument);
  SourceOptions p;
  p.model = "bloom-7b1";
  p.dataset = "dclm";
  p.content = "mean";  // the reference ships mean content for fineweb-edu only
  CHECK_THROWS_AS(make_source(p, 64), cf::InvalidArgument);
  p.content = "nan,1";
  p.dataset.clear();
  CHECK_THROWS_AS(make_source(p, 64), cf::InvalidArgument);
  p.content = "1,inf";
  CHECK_THROWS_AS(make_source(p, 64), cf::InvalidArgument);
}

TEST_CASE("Model config: YAML anchors and aliases are refused before expansion (recursive alias, billion laughs)",
          "[rollout][config]") {
  // A self-referencing alias once recursed until SIGSEGV; nine levels of nine aliases each (344
  // bytes) once expanded to 18 GB. Both must be refused before any node is built.
  const std::string recursive = write_temp("recursive.yaml", "a: &a [*a]\n");
  const std::string recursive_map = write_temp("recursive_map.yaml", "foo: &a {b: *a}\n");
  std::string bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += cf::str(c, ": &", c, " [");
    for (int k = 0; k < 9; ++k) bomb += cf::str(k ? "," : "", "*", static_cast<char>(c - 1));
    bomb += "]\n";
  }
  const std::string laughs = write_temp("laughs.yaml", bomb);
  const std::string anchor_only = write_temp("anchor.yaml", "num_layers: &n 2\n");
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& p : {recursive, recursive_map, laughs, anchor_only})
    CHECK_THROWS_WITH(load_model_config(p), Catch::Contains("not supported in model configs") && Catch::Contains(p));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  // nesting is bounded too (the converter recurses once per level)
  const std::string deep = write_temp("deep.yaml", "a: " + std::string(200, '[') + std::string(200, ']') + "\n");
  CHECK_THROWS_WITH(load_model_config(deep), Catch::Contains("deeper than 64 levels"));
  for (const auto& p : {recursive, recursive_map, laughs, anchor_only, deep}) fs::remove(p);
}

TEST_CASE("Head weights file: errors name --head-weights, not the alpha file", "[rollout][config]") {
  const std::string empty = write_temp("hw_empty.txt", "# no numbers\n");
  CHECK_THROWS_WITH(read_alpha_file(empty, "--head-weights file"),
                    Catch::StartsWith("--head-weights file '") && !Catch::Contains("alpha file"));
  SourceOptions o;
  o.model = "bloom";
  o.head_weights = empty;
  CHECK_THROWS_WITH(make_source(o, 64), Catch::Contains("--head-weights"));
  fs::remove(empty);
}
