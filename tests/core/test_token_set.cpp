// prepare-data's token set commits as one unit (issue 9): the meta file is a manifest with each
// split's size and checksum, written last; a reader refuses a set whose splits do not match it.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/data/token_file.hpp"

using namespace cf;
using namespace cf::data;

TEST_CASE("token set: FNV-1a 64 matches the published test vectors", "[core][data]") {
  // Test vectors of the FNV reference (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/).
  CHECK(fnv1a64_hex("") == "cbf29ce484222325");
  CHECK(fnv1a64_hex("a") == "af63dc4c8601ec8c");
  CHECK(fnv1a64_hex("foobar") == "85944171f73967e8");
}

TEST_CASE("token set: the manifest catches a mixed set, a failed write leaves the old set", "[core][data]") {
  std::system("rm -rf core_token_set && mkdir core_token_set");
  const std::string a = "core_token_set/a", b = "core_token_set/b";
  TokenMeta m;
  m.vocab_size = 256;
  m.tokenizer = "byte";
  write_token_files(a, TokenSplit{{1, 2, 3}, {4}}, m);
  write_token_files(b, TokenSplit{{7, 8, 9}, {6}}, m);  // same sizes, other tokens
  CHECK(read_token_files(a).train == std::vector<Token>{1, 2, 3});
  const auto meta = nlohmann::json::parse(read_file(a + ".meta.json"));
  CHECK(meta["files"]["train"]["bytes"] == 6);
  CHECK(meta["files"]["train"]["fnv1a64"] == fnv1a64_hex(std::string("\x01\x00\x02\x00\x03\x00", 6)));
  // a process killed between two renames: b's train split beside a's meta file
  write_file_atomic(a + ".train.bin", read_file(b + ".train.bin"));
  CHECK_THROWS_WITH(read_token_files(a),
                    Catch::Contains("mixed or partial file set") && Catch::Contains("a.train.bin"));
  // a failed write (the folder vanished under the prefix): no file of the set changes, no temporary
  write_token_files(a, TokenSplit{{1, 2, 3}, {4}}, m);
  const std::string before = read_file(a + ".meta.json") + read_file(a + ".train.bin") + read_file(a + ".val.bin");
  CHECK_THROWS_AS(write_token_files("core_token_set/missing/a", TokenSplit{{5, 5}, {5}}, m), Error);
  CHECK(read_file(a + ".meta.json") + read_file(a + ".train.bin") + read_file(a + ".val.bin") == before);
  CHECK(std::system("ls core_token_set | grep -q '\\.tmp\\.'") != 0);
}
