// Multiple-choice scoring of lib/probe (eval, issue 33): Python string semantics (expected values
// printed by CPython 3's str.capitalize / str.strip and lm-evaluation-harness's hellaswag
// preprocess, re.sub included), the layouts and templates, the harness's context / continuation
// split, first-maximum ties, and score_items against an unbatched forward_logits recomputation.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/trainer.hpp"
#include "cf/probe/eval_report.hpp"
#include "cf/probe/multiple_choice.hpp"

using namespace cf;
using namespace cf::probe;
using nlohmann::json;

TEST_CASE("Python str.capitalize on ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic", "[eval][text]") {
  // each right-hand side printed by CPython 3.11: print(repr(s.capitalize()))
  CHECK(python_capitalize("ÉVERYONE cheers") == "Éveryone cheers");
  CHECK(python_capitalize("éLAN ÀÉÎ") == "Élan àéî");
  CHECK(python_capitalize("ÿes ŸES") == "Ÿes ÿes");
  CHECK(python_capitalize("ĳĲ ĀāĂ") == "Ĳĳ āāă");
  CHECK(python_capitalize("ΑΒΓ δεζ") == "Αβγ δεζ");
  CHECK(python_capitalize("привет МИР") == "Привет мир");
  CHECK(python_capitalize("ıi ſs") == "Ii ſs");
  CHECK(python_capitalize("µ") == "Μ");
  CHECK(python_capitalize("hello World") == "Hello world");
  CHECK(python_capitalize("") == "");
}

TEST_CASE("hellaswag preprocess equals lm-evaluation-harness v0.4 utils.preprocess on 7 strings", "[eval][text]") {
  CHECK(hellaswag_preprocess("[header] How to clean a café table [title] Wipe the surface.") ==
        " How to clean a café table. Wipe the surface.");
  CHECK(hellaswag_preprocess("  a   b  ") == "a  b");
  CHECK(hellaswag_preprocess("x [unclosed") == "x [unclosed");
  CHECK(hellaswag_preprocess("a [b\nc] d") == "a [b\nc] d");  // '.' of the regex stops at a newline
  CHECK(hellaswag_preprocess("a [x] [y] b") == "a  b");
  CHECK(hellaswag_preprocess("[title] x") == " x");
  CHECK(hellaswag_preprocess("q [title] r") == "q. r");
  CHECK(python_strip("\xC2\xA0\t x \xE3\x80\x80") == "x");  // U+00A0 and U+3000 are str.isspace
  CHECK(code_points("café") == 4);
}

TEST_CASE("layouts: the harness v0.4 prompts of ARC, PIQA, HellaSwag, CommonsenseQA and generic", "[eval][layout]") {
  const json arc =
      json::parse(R"({"question": "Q?", "choices": {"text": ["a", "b"], "label": ["1", "2"]}, "answerKey": "2"})");
  CHECK(detect_layout(arc) == McLayout::Arc);
  McItem it = mc_item_from_json(arc, McLayout::Arc, McTemplate::Harness);
  CHECK(it.context == "Question: Q?\nAnswer:");
  CHECK(it.choices == std::vector<std::string>{"a", "b"});
  CHECK(it.gold == 1);
  const json piqa = json::parse(R"({"goal": "G", "sol1": "x", "sol2": "y", "label": 1})");
  CHECK(detect_layout(piqa) == McLayout::Piqa);
  it = mc_item_from_json(piqa, McLayout::Piqa, McTemplate::Harness);
  CHECK(it.context == "Question: G\nAnswer:");
  CHECK(it.gold == 1);
  const json hs = json::parse(
      R"({"activity_label": "Run", "ctx_a": "A man runs.", "ctx_b": "he JUMPS", "endings": ["[title] up.", "down"], "label": "1"})");
  CHECK(detect_layout(hs) == McLayout::Hellaswag);
  it = mc_item_from_json(hs, McLayout::Hellaswag, McTemplate::Harness);
  CHECK(it.context == "Run: A man runs. He jumps");
  CHECK(it.choices == std::vector<std::string>{" up.", "down"});  // no space before [title]: only the bracket goes
  CHECK(it.gold == 1);
  const json csqa = json::parse(
      R"({"question": {"stem": " S ", "question_concept": "c", "choices": [{"label": "A", "text": "t0"}, {"label": "B", "text": "t1"}]}, "answerKey": "B"})");
  CHECK(detect_layout(csqa) == McLayout::Csqa);
  it = mc_item_from_json(csqa, McLayout::Csqa, McTemplate::Harness);
  CHECK(it.context == "Question: S\nA. t0\nB. t1\nAnswer:");
  CHECK(it.choices == std::vector<std::string>{"A", "B"});
  CHECK(it.gold == 1);
  const json gen = json::parse(R"({"context": "C ", "choices": ["p", "q", "r"], "gold": 2, "question": "ignored"})");
  CHECK(detect_layout(gen) == McLayout::Generic);
  CHECK(mc_item_from_json(gen, McLayout::Generic, McTemplate::Harness).context == "C ");
  // verbatim: the context field replaces the template
  const json arc_v = json::parse(
      R"({"context": "my prompt", "question": "Q?", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A"})");
  CHECK(mc_item_from_json(arc_v, McLayout::Arc, McTemplate::Verbatim).context == "my prompt");
  CHECK_THROWS_WITH(mc_item_from_json(arc, McLayout::Arc, McTemplate::Verbatim),
                    Catch::Contains("field 'context' is missing"));
}

TEST_CASE("layouts: bad items name the field", "[eval][layout]") {
  auto bad = [](const char* text, McLayout l) {
    return [=] { mc_item_from_json(json::parse(text), l, McTemplate::Harness); };
  };
  CHECK_THROWS_WITH(bad(R"({"context": "c", "choices": ["a", "b"]})", McLayout::Generic)(),
                    Catch::Contains("field 'gold' is missing"));
  CHECK_THROWS_WITH(bad(R"({"context": "c", "choices": ["a", "b"], "gold": 2})", McLayout::Generic)(),
                    Catch::Contains("gold out of range: 2"));
  CHECK_THROWS_WITH(bad(R"({"context": "c", "choices": [], "gold": 0})", McLayout::Generic)(),
                    Catch::Contains("empty choices"));
  CHECK_THROWS_WITH(bad(R"({"context": "c", "choices": ["a", ""], "gold": 0})", McLayout::Generic)(),
                    Catch::Contains("empty choice: choice 1"));
  CHECK_THROWS_WITH(bad(R"({"context": "c", "choices": ["a", "b"], "gold": 1.0})", McLayout::Generic)(),
                    Catch::Contains("must be a whole number"));
  CHECK_THROWS_WITH(
      bad(R"({"context": "c", "choices": ["a", "b"], "gold": 18446744073709551615})", McLayout::Generic)(),
      Catch::Contains("gold out of range"));
  CHECK_THROWS_WITH(
      bad(R"({"question": "q", "choices": {"text": ["a"], "label": ["A", "B"]}, "answerKey": "A"})", McLayout::Arc)(),
      Catch::Contains("1 texts but 2 labels"));
  CHECK_THROWS_WITH(bad(R"({"context": " \n ", "choices": ["a", "b"], "gold": 0})", McLayout::Generic)(),
                    Catch::Contains("context is empty"));
  CHECK_THROWS_WITH(detect_layout(json::parse(R"({"x": 1})")), Catch::Contains("give --layout"));
}

TEST_CASE("encode_item moves the context's trailing space to the continuation (harness _encode_pair)", "[eval]") {
  const Encoder bytes = [](std::string_view s) { return std::vector<std::int32_t>(s.begin(), s.end()); };
  McItem it;
  it.context = "ab ";
  it.choices = {"c", "dé"};
  const McEncoded e = encode_item(it, bytes);
  CHECK(e.context == std::vector<std::int32_t>{'a', 'b'});
  REQUIRE(e.continuations.size() == 2);
  CHECK(e.continuations[0] == std::vector<std::int32_t>{' ', ' ', 'c'});
  CHECK(e.continuations[1].size() == 5);  // "  d" + the two bytes of é
}

TEST_CASE("argmax_first: ties go to the first maximum (numpy.argmax)", "[eval]") {
  CHECK(argmax_first({1.0, 3.0, 3.0, 2.0}) == 1);
  CHECK(argmax_first({-1.0, -1.0}) == 0);
  CHECK(argmax_first({-5.0}) == 0);
}

TEST_CASE("score_items equals unbatched forward_logits log-likelihoods on a 2-layer model, 3 items", "[eval]") {
  nn::ModelConfig c;
  c.vocab_size = 256;
  c.block_size = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  nn::LayerConfig lc;
  lc.b = 4;
  c.layers = nn::parse_schedule("block", 2, lc);
  const auto model = nn::init_model<float>(c, 7);
  const Encoder bytes = [](std::string_view s) { return std::vector<std::int32_t>(s.begin(), s.end()); };
  std::vector<McItem> items(3);
  items[0].context = "abc";
  items[0].choices = {"x", "yy", "x"};
  items[1].context = "a long context that must be cut";  // 31 tokens: left-truncated to the block
  items[1].choices = {"q", "rs"};
  items[2].context = "hi";
  items[2].choices = {"there", "t"};
  std::vector<McEncoded> enc;
  for (auto& it : items) enc.push_back(encode_item(it, bytes));
  for (int batch : {1, 2, 7}) {
    const auto sc = score_items(model, enc, items, batch, true);
    for (std::size_t i = 0; i < items.size(); ++i)
      for (std::size_t k = 0; k < items[i].choices.size(); ++k) {
        std::vector<std::int32_t> all = enc[i].context;
        const auto& cont = enc[i].continuations[k];
        all.insert(all.end(), cont.begin(), cont.end());
        const std::size_t L = all.size(), start = L - 1 > 12 ? L - 1 - 12 : 0;
        const std::vector<std::int32_t> in(all.begin() + static_cast<std::ptrdiff_t>(start), all.end() - 1);
        const Eigen::MatrixXf lg = nn::forward_logits(model, in);
        double want = 0;
        for (std::size_t j = 0; j < cont.size(); ++j) {
          const int row = static_cast<int>(in.size() - cont.size() + j);
          const double mx = lg.row(row).cast<double>().maxCoeff();
          const double lse = mx + std::log((lg.row(row).cast<double>().array() - mx).exp().sum());
          want += double(lg(row, cont[j])) - lse;
        }
        CHECK(sc[i].loglik[k] == Approx(want).epsilon(1e-5));
        CHECK(sc[i].n_tokens[k] == static_cast<int>(cont.size()));
      }
    CHECK(sc[0].loglik[0] == sc[0].loglik[2]);  // identical rows: bit-equal, the tie goes to choice 0
    CHECK(sc[1].dropped > 0);
    CHECK(sc[0].dropped == 0);
  }
  CHECK_THROWS_WITH(score_items(model, enc, items, 4, false), Catch::Contains("above the model's block_size 12"));
  auto broken = model;  // NaN weights: refused, never a silent argmax over NaN (the forward pass
  // itself names where the residual stream stops being finite)
  for (auto& w : broken.params) w = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(score_items(broken, enc, items, 4, true), Error);
  CHECK_THROWS_WITH(score_items(broken, enc, items, 4, true), Catch::Contains("non-finite value"));
}

TEST_CASE("mean_bootstrap_ci holds the accuracy of 10 outcomes", "[eval][stats]") {
  const std::vector<double> a{1, 0, 1, 1, 0, 1, 1, 1, 0, 1};
  const auto ci = mean_bootstrap_ci(a, 2000, 0.95, 3);
  CHECK(ci.estimate == Approx(0.7));
  CHECK(ci.lo <= 0.7);
  CHECK(ci.hi >= 0.7);
  CHECK(ci.lo >= 0.0);
  CHECK(ci.hi <= 1.0);
}

namespace {
std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / ("cf_eval_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}
}  // namespace

TEST_CASE("read_mc_file: BOM, CRLF and blank lines kept in the line count", "[eval][file]") {
  const std::string p =
      write_temp("crlf.jsonl",
                 "\xEF\xBB\xBF{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 1}\r\n\r\n   \n"
                 "{\"context\": \"d\", \"choices\": [\"e\", \"f\"], \"gold\": \"0\"}");
  McLayout l = McLayout::Auto;
  const auto items = read_mc_file(p, McLayout::Auto, McTemplate::Harness, 0, &l);
  REQUIRE(items.size() == 2);
  CHECK(l == McLayout::Generic);
  CHECK(items[0].line == 1);
  CHECK(items[1].line == 4);
  CHECK(items[1].choices[1] == "f");
  CHECK(read_mc_file(p, McLayout::Auto, McTemplate::Harness, 1).size() == 1);
  std::filesystem::remove(p);
}

TEST_CASE("read_mc_file: 4 kinds of ill-formed UTF-8 (Python's decode errors) name line and byte", "[eval][file]") {
  const std::string ok = "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 1}\n";
  // bytes.decode("utf-8") rejects each: overlong, surrogate, above U+10FFFF, truncated sequence
  for (const std::string bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82"}) {
    const std::string p = write_temp(
        "bad_utf8.jsonl", ok + "{\"context\": \"x" + bad + "\", \"choices\": [\"b\", \"c\"], \"gold\": 0}\n");
    CHECK_THROWS_WITH(read_mc_file(p, McLayout::Auto, McTemplate::Harness),
                      Catch::Contains("line 2: not valid UTF-8 (byte 15 of the line"));
    std::filesystem::remove(p);
  }
  const std::string p =
      write_temp("good_utf8.jsonl",
                 "{\"context\": \"\xF0\x9F\x98\x80 \xE2\x82\xAC\", \"choices\": [\"b\", \"c\"], \"gold\": 0}\n");
  CHECK(read_mc_file(p, McLayout::Auto, McTemplate::Harness)[0].context == "\xF0\x9F\x98\x80 \xE2\x82\xAC");
  CHECK(code_points("\xF0\x9F\x98\x80 \xE2\x82\xAC") == 3);
  std::filesystem::remove(p);
}
