// cf::app::closest_option (lib/core app helpers, issue 29): the long option a mistyped name most
// likely meant, by Levenshtein distance, else by a unique prefix; nothing for a tie or a name
// far from every option. The distances are counted by hand in the comments (the independent check).
#include <catch2/catch.hpp>

#include "cf/core/app.hpp"

namespace {

void add_options(CLI::App& app, std::string& s, int& i) {
  app.add_option("--steps", i);
  app.add_option("--seq-len", i);
  app.add_option("--seed", i);
  app.add_option("--checkpoint", s);
  app.add_option("--capture-seqs", i);
  app.add_option("--capture-text", s);
  app.add_option("--lr", s);
  app.add_option("--min-lr", s);
  app.add_option("--w", i);
  app.add_option("--e", i);
}

}  // namespace

TEST_CASE("closest_option: one edit away (substitution, insertion, deletion, '_' for '-')", "[core][cli]") {
  std::string s;
  int i = 0;
  CLI::App app{"test", "test"};
  add_options(app, s, i);
  CHECK(cf::app::closest_option(app, "--stepz") == "--steps");           // z -> s
  CHECK(cf::app::closest_option(app, "--step") == "--steps");            // one insertion
  CHECK(cf::app::closest_option(app, "--stepss") == "--steps");          // one deletion
  CHECK(cf::app::closest_option(app, "--seq_len=8") == "--seq-len");     // '_' -> '-', value dropped
  CHECK(cf::app::closest_option(app, "-steps") == "--steps");            // one dash: the name is compared
  CHECK(cf::app::closest_option(app, "--chekpoint") == "--checkpoint");  // one insertion
  CHECK(cf::app::closest_option(app, "--capture-seq") == "--capture-seqs");
}

TEST_CASE("closest_option: two or three edits for longer names, a unique prefix, nothing otherwise", "[core][cli]") {
  std::string s;
  int i = 0;
  CLI::App app{"test", "test"};
  add_options(app, s, i);
  CHECK(cf::app::closest_option(app, "--chekpiont") == "--checkpoint");  // 9 letters allow 3 edits: +c, o<->i
  CHECK(cf::app::closest_option(app, "--check") == "--checkpoint");      // 5 letters allow 1: the unique prefix
  CHECK(cf::app::closest_option(app, "--capt").empty());                 // prefix of two options: no guess
  CHECK(cf::app::closest_option(app, "--xyz").empty());                  // 3 letters allow 1 edit: none close
  CHECK(cf::app::closest_option(app, "--ln") == "--lr");                 // 2 letters allow 1 edit
  CHECK(cf::app::closest_option(app, "--x").empty());                    // --w and --e both 1 away: a tie
  CHECK(cf::app::closest_option(app, "--sed") == "--seed");              // one insertion
}
