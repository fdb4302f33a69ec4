// Benchmark (issue 29): tokenizer.json with many added tokens. Before, encode() tried every added
// token at every byte (cost bytes x added tokens: 20,000 added tokens made 720 KB take 69 s); now
// the added tokens form a byte trie walked once per position.
//   bench_added_tokens [ADDED=20000] [KB=720] [SCAN_KB=8]
// Writes a byte-level tokenizer.json with ADDED random added tokens to $TMPDIR, then times, in the
// same run: (a) HfTokenizer::encode of KB kilobytes (the trie), (b) the old definition (every added
// token compared at every byte) on SCAN_KB kilobytes, reported per MB (it is linear in the bytes).
// Both sides give the same ids on the SCAN_KB prefix (checked).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/data/gpt2_bpe.hpp"
#include "cf/data/unicode.hpp"
#include "cf/hf/tokenizer.hpp"

int main(int argc, char** argv) {
  const char* usage = "usage: bench_added_tokens [ADDED=20000] [KB=720] [SCAN_KB=8]\n";
  if (argc > 4) {
    std::fprintf(stderr, "bench_added_tokens: at most 3 arguments\n%s", usage);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      return 0;
    }
    if (a.empty() || a.find_first_not_of("0123456789") != std::string::npos || a.size() > 9 || std::atol(argv[i]) < 1) {
      std::fprintf(stderr, "bench_added_tokens: '%s' is not a positive whole number (or an unknown option)\n%s",
                   a.c_str(), usage);
      return 2;
    }
  }
  const int added_n = argc > 1 ? std::atoi(argv[1]) : 20000;
  const std::size_t kb = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 720;
  const std::size_t scan_kb = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 8;
  std::mt19937 rng(29);
  const std::string alphabet = "abcdefgh <>|";
  std::map<std::string, int> added;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"merges", nlohmann::json::array()}};
  const auto& b2u = cf::data::gpt2_byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    std::string sym;
    cf::data::utf8_append(sym, b2u[b]);
    j["model"]["vocab"][sym] = b;
  }
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["added_tokens"] = nlohmann::json::array();
  for (int i = 0; i < added_n; ++i) {
    std::string c = "<";
    for (int k = 0, len = 2 + static_cast<int>(rng() % 8); k < len; ++k) c += alphabet[rng() % alphabet.size()];
    added[c] = 256 + i;
    j["added_tokens"].push_back({{"content", c}, {"id", 256 + i}});
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/cf_bench_added_tokens";
  std::filesystem::create_directories(dir);
  cf::write_file_atomic(dir + "/tokenizer.json", j.dump());
  const auto tok = cf::hf::HfTokenizer::load(dir);
  std::string text;
  while (text.size() < kb * 1024) text += alphabet[rng() % alphabet.size()];

  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  const auto ids = tok->encode(text);
  const double trie_s = std::chrono::duration<double>(clk::now() - t0).count();

  // the old definition on a prefix: the longest added token at each byte by trying all of them
  const std::string part = text.substr(0, scan_kb * 1024);
  t0 = clk::now();
  std::vector<std::int32_t> old_ids;
  for (std::size_t i = 0; i < part.size();) {
    std::size_t best = 0;
    int id = -1;
    for (const auto& [c, cid] : added)
      if (c.size() > best && part.compare(i, c.size(), c) == 0) {
        best = c.size();
        id = cid;
      }
    old_ids.push_back(best ? id : static_cast<unsigned char>(part[i]));
    i += best ? best : 1;
  }
  const double scan_s = std::chrono::duration<double>(clk::now() - t0).count();
  const auto prefix_ids = tok->encode(part);
  if (prefix_ids != old_ids) {
    std::printf("MISMATCH between the trie and the old scan\n");
    return 1;
  }
  const double trie_per_mb = trie_s / (static_cast<double>(text.size()) / 1e6);
  const double scan_per_mb = scan_s / (static_cast<double>(part.size()) / 1e6);
  std::printf("added_tokens %d\ntrie_bytes %zu trie_s %.4f trie_s_per_MB %.4f ids %zu\n", added_n, text.size(), trie_s,
              trie_per_mb, ids.size());
  std::printf("scan_bytes %zu scan_s %.4f scan_s_per_MB %.2f\nratio_scan_over_trie %.0f\n", part.size(), scan_s,
              scan_per_mb, scan_per_mb / trie_per_mb);
  return 0;
}
