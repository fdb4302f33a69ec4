// Token file tests: split, round trip, little-endian layout (checked with numpy), validation
// errors, and the unigram entropy against closed forms.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/data/token_file.hpp"

using namespace cf::data;

namespace {
std::string prefix_for(const std::string& name) {
  return "/tmp/cf_test_data_" + std::to_string(::getpid()) + "_" + name;
}
void remove_all(const std::string& prefix) {
  for (const char* s : {".train.bin", ".val.bin", ".meta.json"}) std::remove((prefix + s).c_str());
}
}  // namespace

TEST_CASE("split_tokens keeps the last fraction for validation", "[data]") {
  std::vector<Token> t(100);
  for (int i = 0; i < 100; ++i) t[i] = static_cast<Token>(i);
  const auto s = split_tokens(t, 0.1);
  CHECK(s.train.size() == 90);
  CHECK(s.val.size() == 10);
  CHECK(s.train.front() == 0);
  CHECK(s.val.front() == 90);
  CHECK(split_tokens(t, 0.25).val.size() == 25);
  CHECK_THROWS_WITH(split_tokens(t, 0.0), Catch::Contains("0 < val_fraction < 1"));
  CHECK_THROWS_WITH(split_tokens(t, 1.0), Catch::Contains("0 < val_fraction < 1"));
  CHECK_THROWS_WITH(split_tokens({1, 2, 3}, 0.1), Catch::Contains("at least one token"));
  CHECK_THROWS_WITH(split_tokens({}, 0.5), Catch::Contains("at least one token"));
}

TEST_CASE("token files round trip and are little-endian uint16", "[data]") {
  const std::string prefix = prefix_for("rt");
  TokenSplit s;
  s.train = {1, 258, 50256, 0, 65535};
  s.val = {7, 513};
  TokenMeta m;
  m.vocab_size = 65536;
  m.tokenizer = "gpt2";
  m.source = "unit test";
  write_token_files(prefix, s, m);
  // Layout by hand: 258 = 0x0102 -> bytes 02 01.
  const std::string raw = cf::read_file(prefix + ".train.bin");
  REQUIRE(raw.size() == 10);
  CHECK(static_cast<unsigned char>(raw[2]) == 0x02);
  CHECK(static_cast<unsigned char>(raw[3]) == 0x01);
  const auto d = read_token_files(prefix);
  CHECK(d.train == s.train);
  CHECK(d.val == s.val);
  CHECK(d.meta.n_train == 5);
  CHECK(d.meta.n_val == 2);
  CHECK(d.meta.tokenizer == "gpt2");
  CHECK(d.meta.source == "unit test");
  if (::access("/usr/bin/python3", X_OK) == 0 &&
      std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0) {
    const std::string cmd = "/usr/bin/python3 -c \"import numpy as np, json; a = np.fromfile('" + prefix +
                            ".train.bin', dtype='<u2'); m = json.load(open('" + prefix +
                            ".meta.json')); assert list(a) == [1, 258, 50256, 0, 65535], a; "
                            "assert m['n_train'] == 5 and m['n_val'] == 2 and m['vocab_size'] == 65536\"";
    CHECK(std::system(cmd.c_str()) == 0);
  } else {
    WARN("numpy check skipped: /usr/bin/python3 with numpy not available");
  }
  remove_all(prefix);
}

// Three training tokens and one validation token of the byte vocabulary.
static std::pair<TokenSplit, TokenMeta> small_set() {
  TokenSplit s;
  s.train = {1, 2, 3};
  s.val = {4};
  TokenMeta m;
  m.vocab_size = 256;
  m.tokenizer = "byte";
  return {s, m};
}

TEST_CASE("token file validation errors name the file and the problem", "[data]") {
  const std::string prefix = prefix_for("bad");
  const auto [s, m] = small_set();
  CHECK_THROWS_WITH(write_token_files(prefix, TokenSplit{{1, 300}, {2}}, m), Catch::Contains(">= vocab_size 256"));
  write_token_files(prefix, s, m);
  CHECK(read_token_files(prefix).train.size() == 3);

  cf::write_file_atomic(prefix + ".train.bin", std::string("\x01\x00\x02", 3));
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains("not a multiple of 2"));
  cf::write_file_atomic(prefix + ".train.bin", "");
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains("is empty"));
  cf::write_file_atomic(prefix + ".train.bin", std::string("\x01\x00\x00\x01", 4));  // 1, 256
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains("has id 256 >= vocab_size 256"));
  cf::write_file_atomic(prefix + ".train.bin", std::string("\x01\x00\x02\x00", 4));  // 2 tokens, meta says 3
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains("n_train = 3"));
  cf::write_file_atomic(prefix + ".meta.json", R"({"tokenizer": "byte", "n_train": 2, "n_val": 1})");
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains("lacks the field \"vocab_size\""));
  cf::write_file_atomic(prefix + ".meta.json", "{not json");
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains("not valid JSON"));
  remove_all(prefix);
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains(prefix + ".meta.json"));
}

TEST_CASE("unigram entropy matches closed forms", "[data]") {
  CHECK(unigram_entropy_nats({}) == 0.0);
  CHECK(unigram_entropy_nats({5, 5, 5}) == 0.0);
  // Uniform over k symbols: log k.
  std::vector<Token> u;
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 7; ++k) u.push_back(static_cast<Token>(k * 1000));
  CHECK(unigram_entropy_nats(u) == Approx(std::log(7.0)).epsilon(1e-12));
  // p = (1/4, 3/4): -(1/4 log 1/4 + 3/4 log 3/4).
  const double h = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  CHECK(unigram_entropy_nats({1, 2, 2, 2}) == Approx(h).epsilon(1e-12));
}

TEST_CASE("token, meta and mask files that are FIFOs or folders are refused at once", "[data]") {
  // A FIFO with no writer used to block read_file forever: the alarm fails a regression instead
  // of hanging the run.
  ::alarm(20);
  const std::string prefix = prefix_for("fifo");
  const auto [s, m] = small_set();
  write_token_files(prefix, s, m);
  std::remove((prefix + ".train.bin").c_str());
  REQUIRE(::mkfifo((prefix + ".train.bin").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains(prefix + ".train.bin' is not a regular file (a FIFO)"));
  remove_all(prefix);
  REQUIRE(::mkfifo((prefix + ".meta.json").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_token_files(prefix), Catch::Contains(prefix + ".meta.json' is not a regular file (a FIFO)"));
  remove_all(prefix);
  REQUIRE(::mkdir((prefix + ".meta.json").c_str(), 0700) == 0);
  CHECK_THROWS_WITH(read_token_meta(prefix), Catch::Contains("is not a regular file (a directory)"));
  ::rmdir((prefix + ".meta.json").c_str());
  ::alarm(0);
}
