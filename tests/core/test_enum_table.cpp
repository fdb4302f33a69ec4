// One name table per enum (cf/core/enum_table.hpp, issue 28): names, aliases, lists, the CLI11
// check, and the converted enums' parsers still answer with their own messages.
#include <catch2/catch.hpp>
#include <string>

#include "cf/core/enum_table.hpp"
#include "cf/core/error.hpp"
#include "cf/core/output.hpp"
#include "cf/core/validators.hpp"

using namespace cf;

namespace {
enum class Fruit { Apple, Pear, Plum };
constexpr EnumTable kFruits{std::array{
    EnumEntry<Fruit>{Fruit::Apple, "apple", "malus pomme", "round, crisp"},
    EnumEntry<Fruit>{Fruit::Pear, "pear"},
    EnumEntry<Fruit>{Fruit::Plum, "plum", "", "stone fruit"},
}};
// a value outside the table (a cast, as a damaged file could produce)
const Fruit kNotInTable = static_cast<Fruit>(7);
}  // namespace

TEST_CASE("enum table: canonical names, aliases and unknown values", "[core][enum]") {
  CHECK(kFruits.name(Fruit::Apple) == "apple");
  CHECK(kFruits.name(Fruit::Plum) == "plum");
  CHECK(kFruits.name(kNotInTable) == "?");
  CHECK(kFruits.find("pear") == Fruit::Pear);
  CHECK(kFruits.find("malus") == Fruit::Apple);    // first alias
  CHECK(kFruits.find("pomme") == Fruit::Apple);    // last alias
  CHECK_FALSE(kFruits.find("mal").has_value());    // a prefix of an alias is not an alias
  CHECK_FALSE(kFruits.find("Apple").has_value());  // exact: a parser lowers case itself where it wants
  CHECK_FALSE(kFruits.find("").has_value());
  static_assert(kFruits.name(Fruit::Pear) == "pear", "names are constexpr");
  static_assert(*kFruits.find("pomme") == Fruit::Apple, "lookup is constexpr");
}

TEST_CASE("enum table: lists and help in table order", "[core][enum]") {
  CHECK(kFruits.list() == "apple, pear, plum");
  CHECK(kFruits.list(" | ") == "apple | pear | plum");
  CHECK(kFruits.help() == "apple: round, crisp; pear; plum: stone fruit");
  CHECK(kFruits.names() == std::vector<std::string>{"apple", "pear", "plum"});
}

TEST_CASE("enum table: member_of accepts the canonical names only", "[core][enum]") {
  CLI::App app{"t", "t"};
  std::string fruit;
  app.add_option("--fruit", fruit)->check(app::member_of(kFruits));
  CHECK_NOTHROW(app.parse("--fruit plum", false));
  CHECK(fruit == "plum");
  CHECK_THROWS_AS(app.parse("--fruit malus", false), CLI::ValidationError);
}

TEST_CASE("enum table: --format parses through the table with its own message", "[core][enum]") {
  CHECK(output::parse_format("csv") == output::Format::Csv);
  CHECK(output::parse_format("json") == output::Format::Json);
  CHECK(output::kFormats.name(output::Format::Table) == "table");
  try {
    output::parse_format("xml");
    FAIL("no throw");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) == "unknown --format 'xml': expected table, csv or json");
  }
}
