// Evaluation core of lib/probe against brute force on a small random model: forward_probs equals
// softmax(forward_logits) of each sequence, boundary-copy readouts equal a per-readout
// recomputation, and the per-phase bound summary follows Prop. 3 with a Bonferroni-corrected test.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "cf/core/error.hpp"
#include "cf/data/task_file.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/trainer.hpp"
#include "cf/probe/boundary_copy.hpp"
#include "cf/probe/evaluate.hpp"
#include "cf/probe/passkey.hpp"
#include "cf/probe/ranking.hpp"
#include "cf/probe/stats.hpp"

using namespace cf;
using namespace cf::probe;

namespace {
nn::Model<float> tiny(const std::string& attn) {
  nn::ModelConfig c;
  c.vocab_size = 16;
  c.block_size = 24;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  nn::LayerConfig lc;
  lc.b = 4;
  lc.w = 4;
  lc.e = 2;
  c.layers = nn::parse_schedule(attn, 2, lc);
  return nn::init_model<float>(c, 3);
}
}  // namespace

TEST_CASE("forward_probs equals softmax of forward_logits", "[probe][evaluate]") {
  const auto m = tiny("block");
  const int B = 3, T = 20;
  std::vector<std::int32_t> x(B * T);
  for (int i = 0; i < B * T; ++i) x[i] = (i * 7 + 3) % 16;
  nn::Workspace<float> ws;
  const float* P = forward_probs(m, x.data(), B, T, ws);
  for (int b = 0; b < B; ++b) {
    const Eigen::MatrixXf lg =
        nn::forward_logits(m, std::vector<std::int32_t>(x.begin() + b * T, x.begin() + (b + 1) * T));
    for (int t = 0; t < T; ++t) {
      const Eigen::VectorXd z = lg.row(t).cast<double>().transpose();
      const Eigen::ArrayXd e = (z.array() - z.maxCoeff()).exp();
      for (int v = 0; v < 16; ++v) CHECK(P[(b * T + t) * 16 + v] == Approx(e(v) / e.sum()).margin(1e-5));
    }
  }
}

namespace {
// A LogitsForward computed sequence by sequence by nn::forward_logits (an independent forward pass
// standing in for a device model's).
LogitsForward logits_by_sequence(const nn::Model<float>& m) {
  return [&m](const std::int32_t* tokens, int B, int T, std::vector<float>& logits) {
    const int V = m.config.vocab_size;
    logits.assign(static_cast<std::size_t>(B) * T * V, 0.0f);
    for (int b = 0; b < B; ++b) {
      const Eigen::MatrixXf lg = nn::forward_logits(m, std::vector<std::int32_t>(tokens + b * T, tokens + (b + 1) * T));
      for (int t = 0; t < T; ++t)
        for (int v = 0; v < V; ++v) logits[(static_cast<std::size_t>(b) * T + t) * V + v] = lg(t, v);
    }
  };
}
}  // namespace

TEST_CASE("probs_from_logits of another forward pass equals forward_probs, and is what evaluations read",
          "[probe][evaluate]") {
  const auto m = tiny("block");
  const int B = 3, T = 20;
  std::vector<std::int32_t> x(B * T);
  for (int i = 0; i < B * T; ++i) x[i] = (i * 5 + 1) % 16;
  nn::Workspace<float> ws;
  const float* P = forward_probs(m, x.data(), B, T, ws);
  const std::vector<float> want(P, P + B * T * 16);
  const ProbsForward probs = probs_from_logits(logits_by_sequence(m), 16);
  const float* got = probs(x.data(), B, T);
  for (int i = 0; i < B * T * 16; ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));

  // an evaluation given that forward pass reads it: the same readouts as the CPU's default
  BoundaryCopySpec s;
  s.K = 4;
  s.b = 4;
  s.seq_len = 20;
  s.alphabet = {3, 5, 8, 13};
  s.vocab_size = 16;
  const auto sp = generate_boundary_copy(s, 6, 0);
  const auto cpu = evaluate_boundary_copy(m, s, sp, 4, 0);
  int calls = 0;
  const ProbsForward counted = [&](const std::int32_t* t, int Bn, int Tn) {
    ++calls;
    return probs(t, Bn, Tn);
  };
  const auto other = evaluate_boundary_copy(m, s, sp, 4, 0, {}, counted);
  CHECK(calls == 2);  // 6 rows in batches of 4
  REQUIRE(other.size() == cpu.size());
  for (std::size_t k = 0; k < cpu.size(); ++k) {
    CHECK(other[k].predicted == cpu[k].predicted);
    CHECK(other[k].ce == Approx(cpu[k].ce).margin(1e-5));
  }

  // a forward pass returning logits of another shape is refused, not read past its end
  const ProbsForward short_rows = probs_from_logits(
      [](const std::int32_t*, int Bn, int Tn, std::vector<float>& z) { z.assign(std::size_t(Bn) * Tn * 15, 0.f); }, 16);
  CHECK_THROWS_WITH(short_rows(x.data(), B, T), Catch::Contains("logits, not 60 x 16"));
}

TEST_CASE("boundary-copy evaluation equals a per-readout recomputation", "[probe][evaluate]") {
  BoundaryCopySpec s;
  s.K = 4;
  s.b = 4;
  s.seq_len = 24;
  s.alphabet = {3, 5, 8, 13};
  s.vocab_size = 16;
  const auto sp = generate_boundary_copy(s, 9, 0);
  for (const char* attn : {"block", "se-bridge"}) {
    const auto m = tiny(attn);
    const auto ro = evaluate_boundary_copy(m, s, sp, 4, 0);
    const auto cl = graph::closure(model_schedule(m.config), s.seq_len);
    std::size_t k = 0;
    for (int r = 0; r < 9; ++r) {
      std::vector<std::int32_t> x(sp.tokens.begin() + r * 25, sp.tokens.begin() + r * 25 + 24);
      const Eigen::MatrixXf lg = nn::forward_logits(m, x);
      for (int p = 0; p < 24; ++p) {
        if (!sp.mask[r * 25 + p + 1]) continue;
        REQUIRE(k < ro.size());
        const auto& q = ro[k++];
        CHECK(q.row == r);
        CHECK(q.p == p);
        CHECK(q.phase == p % 4);
        double z[4], mx = -1e30;
        int best = 0;
        for (int j = 0; j < 4; ++j) {
          z[j] = lg(p, s.alphabet[j]);
          if (z[j] > z[best]) best = j;
          mx = std::max(mx, z[j]);
        }
        double se = 0;
        for (double v : z) se += std::exp(v - mx);
        const int lab =
            int(std::find(s.alphabet.begin(), s.alphabet.end(), sp.tokens[r * 25 + p + 1]) - s.alphabet.begin());
        CHECK(q.label == lab);
        CHECK(q.predicted == best);
        CHECK(q.ce == Approx(-(z[lab] - mx - std::log(se))).margin(1e-4));
        CHECK(q.covered == cl.contains(p, p - 1));
        if (std::string(attn) == "block") CHECK(q.covered == (p % 4 != 0));
        if (std::string(attn) == "se-bridge") CHECK(q.covered);
      }
    }
    CHECK(k == ro.size());
  }
}

TEST_CASE("phase summary: Prop. 3 bound and a Bonferroni-corrected exact test", "[probe][evaluate]") {
  std::vector<Readout> ro;
  // phase 0: 100 uncovered readouts, 40 correct (K = 4: bound 0.25; P(X >= 40) tiny -> flagged)
  for (int i = 0; i < 100; ++i) ro.push_back({0, 4, 0, 0, i < 40 ? 0 : 1, 1.2, false});
  // phase 1: 50 readouts, half covered, 30 correct: bound 0.5 + 0.5/4 = 0.625
  for (int i = 0; i < 50; ++i) ro.push_back({0, 5, 1, 0, i < 30 ? 0 : 1, 0.7, i % 2 == 0});
  const auto ph = summarise_phases(ro, 4, 4, 0.05);
  REQUIRE(ph.size() == 2);
  CHECK(ph[0].pi == 0.0);
  CHECK(ph[0].acc_bound == Approx(0.25));
  CHECK(ph[0].ce_bound == Approx(std::log(4.0)));
  CHECK(ph[0].accuracy == Approx(0.4));
  CHECK(ph[0].p_value == Approx(binomial_upper_tail(40, 100, 0.25)));
  CHECK(ph[0].significant);
  CHECK(ph[1].pi == Approx(0.5));
  CHECK(ph[1].acc_bound == Approx(graph::coverage_limited_bound(0.5, 4).accuracy_max));
  CHECK(ph[1].ce_bound == Approx(0.5 * std::log(4.0)));
  CHECK_FALSE(ph[1].significant);
  // Bonferroni: a p-value between alpha/2 and alpha is not flagged with two phases
  std::vector<Readout> r2;
  int c = 0;
  while (binomial_upper_tail(c, 200, 0.25) > 0.04) ++c;  // smallest count with p <= 0.04
  for (int i = 0; i < 200; ++i) r2.push_back({0, 4, 0, 0, i < c ? 0 : 1, 1, false});
  for (int i = 0; i < 10; ++i) r2.push_back({0, 5, 1, 0, 1, 1, true});
  const auto p2 = summarise_phases(r2, 4, 4, 0.05);
  CHECK(p2[0].p_value < 0.05);
  CHECK(p2[0].p_value > 0.025);
  CHECK_FALSE(p2[0].significant);
}

TEST_CASE("aligned task rows: trainer validation loss = masked mean over whole rows", "[probe][trainer]") {
  // write a boundary-copy task, load it through the trainer's loader and compare its validation
  // loss with a recomputation from forward_logits on whole rows, counting masked targets only
  BoundaryCopySpec s;
  s.K = 4;
  s.b = 4;
  s.seq_len = 24;
  s.alphabet = {3, 5, 8, 13};
  s.vocab_size = 16;
  data::TaskData td;
  td.vocab_size = 16;
  td.tokenizer = "synthetic";
  td.source = "random";
  td.row_len = 25;
  td.task = describe(s, "random");
  td.train = generate_boundary_copy(s, 10, 0);
  td.val = generate_boundary_copy(s, 6, 100);
  const std::string prefix = "probe_test_aligned";
  data::write_task_files(prefix, td);
  const nn::TrainData d = nn::load_token_files(prefix);
  REQUIRE(d.row_len == 25);
  REQUIRE(d.val_mask == td.val.mask);
  const auto m = tiny("block");
  nn::TrainConfig cfg;
  cfg.batch = 2;
  cfg.eval_batches = 3;
  cfg.seq_len = 24;
  const double got = nn::validation_loss(m, cfg, d);
  double expect = 0;
  for (int k = 0; k < 3; ++k) {  // batch k = rows 2k, 2k+1; the mean per batch, then over batches
    double sum = 0;
    int n = 0;
    for (int r = 2 * k; r < 2 * k + 2; ++r) {
      std::vector<std::int32_t> x(td.val.tokens.begin() + r * 25, td.val.tokens.begin() + r * 25 + 24);
      const Eigen::MatrixXf lg = nn::forward_logits(m, x);
      for (int p = 0; p < 24; ++p) {
        if (!td.val.mask[r * 25 + p + 1]) continue;
        const Eigen::VectorXd z = lg.row(p).cast<double>().transpose();
        const double lse = z.maxCoeff() + std::log((z.array() - z.maxCoeff()).exp().sum());
        sum += lse - z(td.val.tokens[r * 25 + p + 1]);
        ++n;
      }
    }
    expect += sum / n;
  }
  CHECK(got == Approx(expect / 3).epsilon(1e-4));
  for (const char* f : {".train.bin", ".val.bin", ".train.mask.bin", ".val.mask.bin", ".meta.json"})
    std::remove((prefix + f).c_str());
}

namespace {
nn::Model<float> byte_model(int block) {
  nn::ModelConfig c;
  c.vocab_size = 256;
  c.block_size = block;
  c.n_layer = 1;
  c.n_head = 2;
  c.d_model = 16;
  c.layers = nn::parse_schedule("full", 1, nn::LayerConfig{});
  return nn::init_model<float>(c, 5);
}
std::vector<data::Token> filler_tokens(const data::Tokenizer& tok) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "Some plain filler words for the probe item test. ";
  return tok.encode(text);
}
}  // namespace

TEST_CASE("probe task files: malformed passkey items are refused, not read past the row or grid", "[probe][evaluate]") {
  // items.json is input: a length beyond the row read the next row (or past the split), a length
  // or depth outside the task's lists indexed past probe's result grid (SIGSEGV), and an empty
  // passkey counted every digit-less answer as correct (found by a hostile-input sweep).
  const auto tok = data::Tokenizer::create("byte");
  PasskeySpec s;
  s.lengths = {64};
  s.depths = {0.0, 1.0};
  s.reps = 1;
  s.rows_train = 2;
  const data::TaskData good = generate_passkey(s, tok, filler_tokens(tok));
  const auto m = byte_model(128);
  REQUIRE(evaluate_passkey(m, good, tok, 2, 4, 0).size() == 2);
  auto bad = [&](const char* key, const nlohmann::json& v, const char* msg) {
    data::TaskData d = good;
    d.val.items[1][key] = v;
    INFO(key << " = " << v.dump());
    REQUIRE_THROWS_WITH(evaluate_passkey(m, d, tok, 2, 4, 0), Catch::Contains(msg));
  };
  bad("length", good.row_len + 1, "not one of the task's lengths");
  bad("length", 32, "not one of the task's lengths");
  bad("depth", 0.5, "not one of the task's depths");
  bad("passkey", "", "not a string of digits");
  bad("passkey", 12345, "not a string of digits");
  data::TaskData d = good;
  d.task["lengths"] = nlohmann::json::array();
  REQUIRE_THROWS_WITH(evaluate_passkey(m, d, tok, 2, 4, 0), Catch::Contains("no context lengths"));
  d = good;
  d.val.items[0].erase("depth");
  REQUIRE_THROWS_AS(evaluate_passkey(m, d, tok, 2, 4, 0), InvalidArgument);  // not a raw JSON error (exit 1)
}

TEST_CASE("passkey scoring: every generated answer is an exact match, a run-on digit string is not",
          "[probe][evaluate]") {
  // the generator and the scorer must agree: rows whose answer lacked the closing period taught the
  // models to run on, and strict exact match was 0 for every trained model of the first full run
  const auto tok = data::Tokenizer::create("byte");
  PasskeySpec s;
  s.lengths = {64, 80};
  s.depths = {0.0, 0.5, 1.0};
  s.reps = 3;
  s.rows_train = 2;
  const data::TaskData d = generate_passkey(s, tok, filler_tokens(tok));
  for (std::size_t i = 0; i < d.val.items.size(); ++i) {
    std::vector<data::Token> ans;  // the tokens the loss is on: what a model is taught to answer
    for (int j = 0; j < d.row_len; ++j)
      if (d.val.mask[i * d.row_len + j]) ans.push_back(d.val.tokens[i * d.row_len + j]);
    const std::string pk = d.val.items[i]["passkey"];
    INFO("item " << i << " answer '" << tok.decode(ans) << "'");
    CHECK(tok.decode(ans) == " " + pk + ".");
    CHECK(score_passkey_answer(tok.decode(ans), pk).exact);
    CHECK(score_passkey_answer(tok.decode(ans), pk).prefix_match);
  }
  // the rule by hand: the leading digit run (after spaces) is all and only the passkey
  struct Case {
    const char* decoded;
    bool exact, prefix;
  };
  for (const Case& c : {Case{" 12345.", true, true}, Case{"12345", true, true}, Case{" 12345 The", true, true},
                        Case{" 1234567", false, true}, Case{" 1234", false, false}, Case{" 12346.", false, false},
                        Case{"", false, false}, Case{" .12345", false, false}, Case{"  012345.", false, false}}) {
    INFO("decoded '" << c.decoded << "'");
    CHECK(score_passkey_answer(c.decoded, "12345").exact == c.exact);
    CHECK(score_passkey_answer(c.decoded, "12345").prefix_match == c.prefix);
  }
}

TEST_CASE("passkey in-context length: in the metadata, lengths labelled by regime, a malformed one refused",
          "[probe][evaluate]") {
  const auto tok = data::Tokenizer::create("byte");
  PasskeySpec s;
  s.lengths = {64, 80};
  s.depths = {0.0, 1.0};
  s.reps = 1;
  s.rows_train = 2;
  const data::TaskData plain = generate_passkey(s, tok, filler_tokens(tok));
  CHECK_FALSE(plain.task.contains("in_context"));
  CHECK(passkey_regime(plain, 64).empty());
  s.in_context = 64;
  const data::TaskData d = generate_passkey(s, tok, filler_tokens(tok));
  REQUIRE(d.task.at("in_context") == 64);
  CHECK(passkey_regime(d, 64) == "in-context");
  CHECK(passkey_regime(d, 65) == "out-of-context");
  CHECK(passkey_regime(d, 80) == "out-of-context");
  const auto m = byte_model(128);
  CHECK(evaluate_passkey(m, d, tok, 2, 4, 0).size() == 4);
  for (const nlohmann::json& v : {nlohmann::json("64"), nlohmann::json(-1), nlohmann::json(6.5)}) {
    data::TaskData bad = d;
    bad.task["in_context"] = v;
    INFO("in_context = " << v.dump());
    CHECK_THROWS_WITH(evaluate_passkey(m, bad, tok, 2, 4, 0), Catch::Contains("in_context"));
  }
  s.in_context = -1;
  CHECK_THROWS_AS(generate_passkey(s, tok, filler_tokens(tok)), InvalidArgument);
}

TEST_CASE("probe task files: malformed ranking items are refused, not read out of bounds", "[probe][evaluate]") {
  // prompt_len 0 read the probability at position -1 and a correct slot of 4 the fifth of four
  // scores (both SIGSEGV); three candidates or a string were raw JSON errors (exit 1).
  const auto tok = data::Tokenizer::create("byte");
  RankingSpec s;
  s.families = {"needle"};
  s.items_val = 4;
  s.rows_train = 4;
  s.context = 96;
  s.b = 32;
  s.w = 32;
  const data::TaskData good = generate_ranking(s, tok, filler_tokens(tok));
  const auto m = byte_model(128);
  REQUIRE(evaluate_ranking(m, good, 8, 0).size() == 4);
  auto bad = [&](const char* key, const nlohmann::json& v, const char* msg) {
    data::TaskData d = good;
    d.val.items[2][key] = v;
    INFO(key << " = " << v.dump());
    REQUIRE_THROWS_WITH(evaluate_ranking(m, d, 8, 0), Catch::Contains(msg));
  };
  bad("prompt_len", 0, "prompt_len 0");
  bad("prompt_len", good.row_len, "outside [1, row_len - 1");
  bad("prompt_len", "5", "prompt_len \"5\"");
  bad("correct", 4, "correct slot 4");
  bad("correct", -1, "correct slot -1");
  bad("family", "zzz", "not one of the task's families");
  bad("candidates", nlohmann::json::parse("[[32], [33], [34]]"), "needs 4 candidate token lists");
  bad("candidates", "abcd", "needs 4 candidate token lists");
  bad("candidates", nlohmann::json::parse("[[32], [33], [34], []]"), "non-empty token list");
  bad("candidates", nlohmann::json::parse("[[32], [33], [34], [-1]]"), "candidate token -1");
  data::TaskData d = good;
  d.task.erase("families");
  REQUIRE_THROWS_AS(evaluate_ranking(m, d, 8, 0), InvalidArgument);
}

TEST_CASE("probe task files: boundary-copy metadata integers are range-checked, not wrapped", "[probe][evaluate]") {
  BoundaryCopySpec s;
  s.alphabet = {0, 1, 2, 3};
  nlohmann::json j = describe(s, "random");
  REQUIRE(boundary_copy_from_json(j).K == 4);
  j["K"] = 1000000000000LL;  // get<int>() made this -727379968
  REQUIRE_THROWS_WITH(boundary_copy_from_json(j), Catch::Contains("field 'K' must be an integer"));
  j = describe(s, "random");
  j["b"] = 1e308;
  REQUIRE_THROWS_WITH(boundary_copy_from_json(j), Catch::Contains("field 'b' must be an integer"));
}
