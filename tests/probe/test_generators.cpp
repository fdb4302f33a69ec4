// Task generators of lib/probe checked by brute force: boundary-copy labels, phases, masks and the
// independence of each label from the readout's own block; passkey needle placement and answer
// masks; ranking candidates (balanced slots, distinct values, windows around block boundaries).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <map>
#include <set>

#include "cf/core/error.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/graph/reachability.hpp"
#include "cf/probe/boundary_copy.hpp"
#include "cf/probe/passkey.hpp"
#include "cf/probe/prepare.hpp"
#include "cf/probe/ranking.hpp"

using namespace cf;
using namespace cf::probe;
using data::Token;

namespace {
BoundaryCopySpec spec(int K, int d, int b, int n, std::vector<int> phases = {}) {
  BoundaryCopySpec s;
  s.K = K;
  s.d = d;
  s.b = b;
  s.seq_len = n;
  s.phases = std::move(phases);
  for (int k = 0; k < K; ++k) s.alphabet.push_back(static_cast<Token>(10 + k));
  s.vocab_size = 10 + K;
  s.seed = 42;
  return s;
}
}  // namespace

TEST_CASE("boundary copy: labels, masks and phases by brute force", "[probe][generators]") {
  for (auto [K, d, b, n] : {std::tuple{4, 1, 4, 32}, {8, 1, 8, 64}, {3, 3, 5, 40}, {2, 2, 4, 17}}) {
    for (std::vector<int> phases : {std::vector<int>{}, std::vector<int>{0}, std::vector<int>{0, b - 1}}) {
      const auto s = spec(K, d, b, n, phases);
      const int rows = 200, L = n + 1;
      const auto sp = generate_boundary_copy(s, rows, 0);
      REQUIRE(sp.tokens.size() == static_cast<std::size_t>(rows * L));
      std::set<int> seen_phases;
      for (int r = 0; r < rows; ++r) {
        const Token* t = sp.tokens.data() + r * L;
        const std::uint8_t* m = sp.mask.data() + r * L;
        std::vector<int> readouts;
        for (int i = 0; i < L; ++i)
          if (m[i]) readouts.push_back(i - 1);
        CHECK(m[0] == 0);
        CHECK(readouts == choose_readouts(s, static_cast<std::uint64_t>(r)));
        std::set<int> sources, targets;
        for (int p : readouts) {
          CHECK(p - d >= 0);
          CHECK(t[p + 1] == t[p - d]);  // the copy
          CHECK(std::count(s.alphabet.begin(), s.alphabet.end(), t[p + 1]) == 1);
          if (!phases.empty()) CHECK(std::count(phases.begin(), phases.end(), p % b) == 1);
          seen_phases.insert(p % b);
          sources.insert(p - d);
          targets.insert(p + 1);
        }
        // no chains: a label source is never itself a copied target, each source read once
        for (int u : sources) CHECK(targets.count(u) == 0);
        CHECK(sources.size() == readouts.size());
      }
      const std::size_t want =
          phases.empty() ? static_cast<std::size_t>(b) : std::set<int>(phases.begin(), phases.end()).size();
      CHECK(seen_phases.size() == want);
    }
  }
}

TEST_CASE("boundary copy: a phase-0 label is independent of the readout's own block", "[probe][generators]") {
  // Empirical check: with d = 1 at phase 0 the label (token p-1) must agree with each token of the
  // readout's block visible at p (only position p) at the chance rate 1/K, and with the token at
  // p-1's own block neighbour no more than chance either.
  const int K = 4;
  auto s = spec(K, 1, 4, 64, {0});
  s.readout_rate = 1.0;
  const auto sp = generate_boundary_copy(s, 4000, 0);
  const int L = s.seq_len + 1;
  long n = 0, same_p = 0, same_pm2 = 0;
  for (std::size_t r = 0; r < sp.tokens.size() / L; ++r)
    for (int p = 4; p < s.seq_len; p += 4) {
      if (!sp.mask[r * L + p + 1]) continue;
      ++n;
      same_p += sp.tokens[r * L + p] == sp.tokens[r * L + p - 1];
      same_pm2 += sp.tokens[r * L + p - 2] == sp.tokens[r * L + p - 1];
    }
  REQUIRE(n > 20000);
  CHECK(double(same_p) / n == Approx(1.0 / K).margin(0.015));
  CHECK(double(same_pm2) / n == Approx(1.0 / K).margin(0.015));
}

TEST_CASE("boundary copy: deterministic in the seed, labels uniform", "[probe][generators]") {
  const auto s = spec(5, 1, 4, 32);
  const auto a = generate_boundary_copy(s, 300, 0), b = generate_boundary_copy(s, 300, 0);
  CHECK(a.tokens == b.tokens);
  CHECK(a.mask == b.mask);
  auto s2 = s;
  s2.seed = 43;
  CHECK(generate_boundary_copy(s2, 300, 0).tokens != a.tokens);
  std::map<Token, long> c;
  long n = 0;
  for (std::size_t i = 0; i < a.mask.size(); ++i)
    if (a.mask[i]) {
      ++c[a.tokens[i]];
      ++n;
    }
  for (auto& [tok, k] : c) CHECK(double(k) / n == Approx(0.2).margin(0.03));
}

TEST_CASE("boundary copy: bad specs are refused", "[probe][generators]") {
  auto s = spec(4, 1, 4, 32);
  s.K = 1;
  s.alphabet.resize(1);
  CHECK_THROWS_AS(validate(s), InvalidArgument);
  s = spec(4, 1, 4, 32, {4});
  CHECK_THROWS_AS(validate(s), InvalidArgument);
  s = spec(4, 31, 4, 32);
  CHECK_THROWS_AS(validate(s), InvalidArgument);
  s = spec(4, 1, 4, 32);
  s.alphabet[1] = s.alphabet[0];
  CHECK_THROWS_AS(validate(s), InvalidArgument);
}

TEST_CASE("task options: b is bounded by the row, alphabet and 2b arithmetic does not overflow",
          "[probe][generators]") {
  // --b 2147483647 once ran for hours (a b-entry phase table per row); --alphabet-start INT_MAX
  // reported a negative vocabulary; ranking --b INT_MAX --w 10 said "w <= 2b (got 10)".
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(validate(spec(4, 1, INT_MAX, 32)),
                    Catch::Contains("--b must be in [1, seq_len = 32] (got 2147483647)"));
  CHECK_THROWS_WITH(validate(spec(4, 1, 33, 32)), Catch::Contains("--b must be in [1, seq_len = 32]"));
  CHECK_NOTHROW(validate(spec(4, 1, 32, 32)));
  TaskOptions o;
  o.task = "boundary-copy";
  o.out = "probe_never_written";
  o.rows_train = 20;
  o.rows_val = 10;
  o.b = INT_MAX;
  CHECK_THROWS_WITH(prepare_task(o), Catch::Contains("--b must be in [1, seq_len = 32] (got 2147483647)"));
  o.b = 4;
  o.alphabet_start = INT_MAX;
  CHECK_THROWS_WITH(prepare_task(o), Catch::Contains("--alphabet-start 2147483647 + K 4 = 2147483651 exceeds 65536"));
  o.alphabet_start = 65533;
  CHECK_THROWS_WITH(prepare_task(o), Catch::Contains("= 65537 exceeds 65536"));
  o.alphabet_start = -5;
  CHECK_THROWS_WITH(prepare_task(o), Catch::Contains("--alphabet-start must be >= 0, or -1"));
  TaskOptions r;
  r.b = INT_MAX;
  r.w = 10;
  CHECK_THROWS_WITH(ranking_spec(r), Catch::Contains("--b must be in [2, --context = 64] (got 2147483647)"));
  r.b = 32;
  r.w = 100;
  CHECK_THROWS_WITH(ranking_spec(r), Catch::Contains("2 <= w <= 2b = 64 (got 100)"));
  r.w = 64;
  CHECK_NOTHROW(ranking_spec(r));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("model schedule coverage equals the brute-force closure", "[probe][generators]") {
  nn::ModelConfig c;
  c.block_size = 32;
  c.n_layer = 2;
  for (const char* a : {"block", "swa", "pbb", "se-bridge", "block,full"}) {
    nn::LayerConfig lc;
    lc.b = 4;
    lc.w = 4;
    lc.e = 2;
    c.layers = nn::parse_schedule(a, 2, lc);
    const auto sch = model_schedule(c);
    const auto cl = graph::closure(sch, 32);
    const auto bf = graph::closure_brute_force(sch, 32);
    for (int p = 1; p < 32; ++p) CHECK(cl.contains(p, p - 1) == bool(bf[p][p - 1]));
    if (std::string(a) == "block")
      for (int p = 4; p < 32; p += 4) CHECK_FALSE(cl.contains(p, p - 1));  // Corollary 1
  }
}

TEST_CASE("passkey: needle at the depth, prompt at the end, loss on the answer only", "[probe][generators]") {
  const auto tok = data::Tokenizer::create("byte");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "Filler sentence number " + std::to_string(i) + " goes here. ";
  const auto filler = tok.encode(text);
  PasskeySpec s;
  s.lengths = {96, 160};
  s.depths = {0.0, 0.5, 1.0};
  s.reps = 3;
  s.rows_train = 12;
  const auto d = generate_passkey(s, tok, filler);
  REQUIRE(d.val.items.size() == 2 * 3 * 3);
  const auto prompt = tok.encode(kPasskeyPrompt);
  for (std::size_t i = 0; i < d.val.items.size(); ++i) {
    const auto& it = d.val.items[i];
    const int L = it["length"], k = it["needle_pos"];
    const double depth = it["depth"];
    const std::string pk = it["passkey"];
    const Token* row = d.val.tokens.data() + i * d.row_len;
    const std::uint8_t* m = d.val.mask.data() + i * d.row_len;
    const auto needle = tok.encode(passkey_needle(pk));
    const int F = L - static_cast<int>(needle.size() + prompt.size());
    CHECK(k == static_cast<int>(std::lround(depth * F)));
    CHECK(std::equal(needle.begin(), needle.end(), row + k));
    CHECK(std::equal(prompt.begin(), prompt.end(), row + L - prompt.size()));
    const auto ans = tok.encode(" " + pk + ".");
    CHECK(std::equal(ans.begin(), ans.end(), row + L));
    for (int j = 0; j < d.row_len; ++j) CHECK(bool(m[j]) == (j >= L && j < L + static_cast<int>(ans.size())));
    CHECK(pk.size() == 5);
  }
  // grid cells each hold reps items
  std::map<std::pair<int, double>, int> cells;
  for (const auto& it : d.val.items) ++cells[{it["length"].get<int>(), it["depth"].get<double>()}];
  CHECK(cells.size() == 6);
  for (auto& [c, n] : cells) CHECK(n == 3);
  TaskOptions o;
  o.depths = "0,1.5";
  CHECK_THROWS_AS(passkey_spec(o), InvalidArgument);
}

TEST_CASE("ranking: four balanced distinct candidates, windows around the boundary", "[probe][generators]") {
  const auto tok = data::Tokenizer::create("byte");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "Some plain filler words for the ranking test. ";
  RankingSpec s;
  s.families = ranking_families();
  s.items_val = 40;
  s.rows_train = 24;
  s.context = 96;
  s.b = 32;
  s.w = 32;
  const auto d = generate_ranking(s, tok, tok.encode(text));
  std::map<std::string, std::vector<int>> slots;
  for (std::size_t i = 0; i < d.val.items.size(); ++i) {
    const auto& it = d.val.items[i];
    const std::string fam = it["family"];
    const int correct = it["correct"];
    slots[fam].push_back(correct);
    std::set<std::vector<Token>> cands;
    for (const auto& c : it["candidates"]) cands.insert(c.get<std::vector<Token>>());
    CHECK(cands.size() == 4);
    // the correct value is in the prompt, right at source_end
    const auto cv = it["candidates"][correct].get<std::vector<Token>>();
    const int se = it["source_end"], plen = it["prompt_len"];
    const Token* row = d.val.tokens.data() + i * d.row_len;
    CHECK(std::equal(cv.begin(), cv.end(), row + se - cv.size() + 1));
    // the row continues with the correct candidate, scored only there
    CHECK(std::equal(cv.begin(), cv.end(), row + plen));
    const int readout = it["readout"];
    CHECK(readout == plen - 1);
    if (fam == "bridge-window") {
      const int p = (readout / s.b) * s.b;
      CHECK(readout - p < s.w / 2);
      CHECK(se < p);
      CHECK(se >= p - s.w / 2);
    }
    if (fam == "semantic-distractor") {
      // the other fact's value is among the candidates
      int in_prompt = 0;
      for (const auto& c : it["candidates"]) {
        const auto v = c.get<std::vector<Token>>();
        in_prompt += std::search(row, row + plen, v.begin(), v.end()) != row + plen;
      }
      CHECK(in_prompt == 2);
    }
  }
  for (auto& [f, v] : slots) {
    CHECK(v.size() == 40);
    for (int k = 0; k < 4; ++k) CHECK(std::count(v.begin(), v.end(), k) == 10);  // balanced slots
  }
}

TEST_CASE("passkey with GPT-2 BPE: the answer tokens decode to the passkey", "[probe][generators]") {
  data::Tokenizer tok;
  try {
    tok = data::Tokenizer::create("gpt2");
  } catch (const std::exception& e) {
    WARN("SKIPPED: GPT-2 vocabulary not installed (" << e.what() << ")");
    return;
  }
  std::string text;
  for (int i = 0; i < 300; ++i) text += "The river ran past the old mill and the fields beyond it. ";
  PasskeySpec s;
  s.lengths = {60, 90};
  s.depths = {0.0, 0.3, 1.0};
  s.reps = 2;
  s.rows_train = 6;
  const auto d = generate_passkey(s, tok, tok.encode(text));
  const auto prompt = tok.encode(kPasskeyPrompt);
  for (std::size_t i = 0; i < d.val.items.size(); ++i) {
    const auto& it = d.val.items[i];
    const int L = it["length"];
    const std::string pk = it["passkey"];
    const Token* row = d.val.tokens.data() + i * d.row_len;
    const std::uint8_t* m = d.val.mask.data() + i * d.row_len;
    CHECK(std::equal(prompt.begin(), prompt.end(), row + L - prompt.size()));
    std::vector<Token> ans;
    for (int j = 0; j < d.row_len; ++j)
      if (m[j]) ans.push_back(row[j]);
    CHECK(tok.decode(ans) == " " + pk + ".");
    const auto needle = tok.encode(passkey_needle(pk));
    CHECK(std::search(row, row + L, needle.begin(), needle.end()) == row + it["needle_pos"].get<int>());
  }
}
