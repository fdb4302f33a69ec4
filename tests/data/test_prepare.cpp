// cf/data/prepare.hpp: UTF-8-safe truncation (checked against a brute-force longest valid prefix)
// and the prepare-data report (counts and entropies against direct computations on the text).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "cf/data/prepare.hpp"

using namespace cf::data;

namespace {
// Independent check: does `s` end on a complete UTF-8 sequence (every lead byte followed by the
// number of continuation bytes it announces)?
bool complete_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}
}  // namespace

TEST_CASE("truncate_utf8 keeps the longest complete UTF-8 prefix of at most n bytes", "[data][prepare]") {
  const std::string text =
      "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"
      "b";  // a, e-acute, euro, emoji, b (11 bytes)
  REQUIRE(text.size() == 11);
  CHECK(truncate_utf8(text, 0) == text);
  CHECK(truncate_utf8(text, -5) == text);
  CHECK(truncate_utf8(text, 11) == text);
  CHECK(truncate_utf8(text, 100) == text);
  for (long long n = 1; n < 11; ++n) {
    std::string best;  // brute force: longest prefix of length <= n that is complete UTF-8
    for (std::size_t len = 0; len <= static_cast<std::size_t>(n); ++len)
      if (complete_utf8(text.substr(0, len))) best = text.substr(0, len);
    INFO("n = " << n);
    CHECK(truncate_utf8(text, n) == best);
  }
}

TEST_CASE("prepare_token_set reports the counts and unigram entropy of the text it wrote", "[data][prepare]") {
  const std::string dir = "/tmp/cf_test_prepare_" + std::to_string(::getpid());
  const std::string corpus = dir + ".txt";
  const std::string text = "abracadabra, abracadabra!\n";  // 26 bytes, byte tokens
  {
    std::FILE* f = std::fopen(corpus.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  PrepareRequest q;
  q.corpus = corpus;
  q.out = dir;
  q.val_fraction = 0.25;  // round(0.25 * 26) = 7 validation tokens (the last 7 bytes)
  const cf::output::Report r = prepare_token_set(q);
  CHECK(r.body["tokens"] == 26);
  CHECK(r.body["n_val"] == 7);
  CHECK(r.body["n_train"] == 19);
  CHECK(r.body["vocab_size"] == 256);
  // Unigram entropy of the training bytes (the first 19), computed here.
  std::map<char, int> counts;
  for (std::size_t i = 0; i < 19; ++i) ++counts[text[i]];
  double h = 0;
  for (const auto& [c, k] : counts) h -= k / 19.0 * std::log(k / 19.0);
  CHECK(r.body["unigram_entropy_nats"].get<double>() == Approx(h).epsilon(1e-12));
  CHECK(r.body["unigram_entropy_bits"].get<double>() == Approx(h / std::log(2.0)).epsilon(1e-12));
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].rows.size() == 9);
  for (const char* ext : {".train.bin", ".val.bin", ".meta.json"}) {
    const std::string p = dir + ext;
    CHECK(std::remove(p.c_str()) == 0);  // the file was written
  }
  std::remove(corpus.c_str());
}
