// tokenizer.json byte-level BPE (cf/hf/tokenizer.hpp): the GPT-2 flavour against lib/data's GPT-2
// encoder (itself checked token for token against the JavaScript reference), the Llama-3 / Qwen2
// pre-tokenisation against splits worked out by hand from the regex, and pre-tokenised id files.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/data/gpt2_bpe.hpp"
#include "cf/hf/token_ids.hpp"
#include "cf/hf/tokenizer.hpp"

using namespace cf;
using namespace cf::hf;

// A version 1.0 .npy file: magic, header length, the header dict padded to 64 bytes, the data.
static std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  h.append(64 - (10 + h.size() + 1) % 64, ' ');
  h += '\n';
  std::string s = std::string("\x93NUMPY\x01\x00", 8);
  s.push_back(static_cast<char>(h.size() & 0xff));
  s.push_back(static_cast<char>(h.size() >> 8));
  return s + h + data;
}

TEST_CASE("hf tokenizer: Llama-3 and Qwen2 pre-tokenisation (regex worked by hand)", "[hf]") {
  const std::string s = "Hello world's 12345 numbers!!\n\n  x";
  CHECK(llama3_pretokenize(s, 3) ==
        std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45", " numbers", "!!\n\n", " ", " x"});
  CHECK(llama3_pretokenize(s, 1) == std::vector<std::string>{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5",
                                                             " numbers", "!!\n\n", " ", " x"});
  // case-insensitive contractions, a non-letter prefix glued to letters, newline runs, trailing spaces
  CHECK(llama3_pretokenize("I'LL go\t\n  \nend  ", 3) ==
        std::vector<std::string>{"I", "'LL", " go", "\t\n  \n", "end", "  "});
  CHECK(llama3_pretokenize("(x)=y", 3) == std::vector<std::string>{"(x", ")=", "y"});
  std::string joined;
  for (const auto& p : llama3_pretokenize("Ünïcödé — 東京 ١٢٣٤", 3)) joined += p;
  CHECK(joined == "Ünïcödé — 東京 ١٢٣٤");  // pieces concatenate to the input
}

TEST_CASE("hf tokenizer: GPT-2 tokenizer.json equals lib/data's GPT-2 encoder", "[hf]") {
  std::shared_ptr<const data::Gpt2Bpe> ref;
  try {
    ref = data::Gpt2Bpe::load();
  } catch (const InvalidArgument& e) {
    WARN("skipped: GPT-2 vocabulary files missing (" << e.what() << ")");
    return;
  }
  // tokenizer.json from the same files: vocab = encoder.json, merges = vocab.bpe lines
  nlohmann::json tj;
  tj["model"] = {{"type", "BPE"}, {"vocab", nlohmann::json::parse(read_file(ref->dir() + "/encoder.json"))}};
  nlohmann::json merges = nlohmann::json::array();
  std::ifstream vb(ref->dir() + "/vocab.bpe");
  std::string line;
  std::getline(vb, line);  // "#version: 0.2"
  while (std::getline(vb, line))
    if (!line.empty()) merges.push_back(line);
  tj["model"]["merges"] = merges;
  tj["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  tj["added_tokens"] = nlohmann::json::array({{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}});
  std::filesystem::create_directories("hf_tok");
  write_file_atomic("hf_tok/tokenizer.json", tj.dump());
  const auto tok = HfTokenizer::load("hf_tok");
  CHECK(tok->vocab_size() == 50257);
  const std::string text = read_file(std::string(CF_TEST_CORPUS)) +
                           "\nUnicode: naïve café — 東京 ١٢٣ emoji 🙂 's 'll   spaces\t\ttabs\n\n";
  const auto want = ref->encode(text);
  const auto got = tok->encode(text);
  REQUIRE(got.size() == want.size());
  CHECK(std::equal(got.begin(), got.end(), want.begin()));
  CHECK(tok->decode(got) == text);
  // added tokens are matched before pre-tokenisation
  const auto eot = tok->encode("a<|endoftext|>b");
  CHECK(eot == std::vector<std::int32_t>{64, 50256, 65});
}

TEST_CASE("hf tokenizer: unsupported files are refused naming the field", "[hf]") {
  std::filesystem::create_directories("hf_tok_bad");
  write_file_atomic("hf_tok_bad/tokenizer.json",
                    R"({"model": {"type": "Unigram", "vocab": []}, "pre_tokenizer": {"type": "Metaspace"}})");
  REQUIRE_THROWS_WITH(HfTokenizer::load("hf_tok_bad"), Catch::Contains("model.type 'Unigram'"));
  write_file_atomic("hf_tok_bad/tokenizer.json",
                    R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Sequence",
                        "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"},
                                          {"type": "ByteLevel", "use_regex": false}]}})");
  REQUIRE_THROWS_WITH(HfTokenizer::load("hf_tok_bad"), Catch::Contains("Split regex"));
}

TEST_CASE("hf token ids: text and .npy int32/int64, range checked", "[hf]") {
  write_file_atomic("hf_ids.txt", "3 1\n4 1 5\t9\n");
  CHECK(read_token_ids("hf_ids.txt", 10) == std::vector<std::int32_t>{3, 1, 4, 1, 5, 9});
  REQUIRE_THROWS_WITH(read_token_ids("hf_ids.txt", 9),
                      Catch::Contains("id 9 at position 5 is outside [0, vocab_size = 9)"));
  write_file_atomic("hf_ids_bad.txt", "3 x1 4");
  REQUIRE_THROWS_WITH(read_token_ids("hf_ids_bad.txt", 10), Catch::Contains("entry 1"));
  const std::int32_t a32[] = {7, 0, 2, 5};
  write_file_atomic("hf_ids32.npy", npy_bytes("<i4", "2, 2", std::string(reinterpret_cast<const char*>(a32), 16)));
  CHECK(read_token_ids("hf_ids32.npy", 8) == std::vector<std::int32_t>{7, 0, 2, 5});
  const std::int64_t a64[] = {1, 6, 2};
  write_file_atomic("hf_ids64.npy", npy_bytes("<i8", "3,", std::string(reinterpret_cast<const char*>(a64), 24)));
  CHECK(read_token_ids("hf_ids64.npy", 8) == std::vector<std::int32_t>{1, 6, 2});
  write_file_atomic("hf_idsf.npy", npy_bytes("<f4", "1,", std::string(4, '\0')));
  REQUIRE_THROWS_WITH(read_token_ids("hf_idsf.npy", 8), Catch::Contains("dtype '<f4' is not supported"));
  // the message lists exactly the dtypes the reader accepts (uint16 among them)
  REQUIRE_THROWS_WITH(read_token_ids("hf_idsf.npy", 8),
                      Catch::Contains("accepted: int8 '|i1', int16 '<i2', uint16 '<u2', int32 '<i4', int64 '<i8'"));
  const std::uint16_t a16[] = {60000, 3};
  write_file_atomic("hf_idsu16.npy", npy_bytes("<u2", "2,", std::string(reinterpret_cast<const char*>(a16), 4)));
  CHECK(read_token_ids("hf_idsu16.npy", 60001) == std::vector<std::int32_t>{60000, 3});
  write_file_atomic("hf_idsshort.npy", npy_bytes("<i8", "4,", std::string(8, '\0')));
  REQUIRE_THROWS_WITH(read_token_ids("hf_idsshort.npy", 8), Catch::Contains("needs 32"));
}

TEST_CASE("hf token ids: a .npy shape with a negative or malformed dimension is refused, a FIFO at once", "[hf]") {
  auto npy = [](const std::string& shape, const std::string& data) { return npy_bytes("<i4", shape, data); };
  const std::int32_t a[] = {1, 2};
  const std::string two(reinterpret_cast<const char*>(a), 8);
  // "(-2,)" used to read as 2: the minus sign was skipped like a separator
  for (const char* bad : {"-2,", "2x,", "1,-2", ",", "2,,", "1 2"}) {
    write_file_atomic("hf_ids_shape.npy", npy(bad, two));
    REQUIRE_THROWS_WITH(read_token_ids("hf_ids_shape.npy", 8),
                        Catch::Contains(".npy shape (" + std::string(bad) + ")"));
  }
  for (const char* good : {"2,", "2", "1, 2", "2, 1,", " 2 ,"}) {
    write_file_atomic("hf_ids_shape.npy", npy(good, two));
    CHECK(read_token_ids("hf_ids_shape.npy", 8) == std::vector<std::int32_t>{1, 2});
  }
  ::alarm(20);  // a FIFO with no writer used to block forever: fail instead of hanging
  std::remove("hf_ids_fifo");
  REQUIRE(::mkfifo("hf_ids_fifo", 0600) == 0);
  REQUIRE_THROWS_WITH(read_token_ids("hf_ids_fifo", 8),
                      Catch::Contains("'hf_ids_fifo' is not a regular file (a FIFO)"));
  std::remove("hf_ids_fifo");
  ::alarm(0);
}
