#pragma once
// One name table per enum (issue 28): the value, its canonical name (reports, JSON, checkpoints),
// the other spellings its parser accepts, and a line of help, in one constexpr array. The enum's
// name function, its parser, the CLI11 validator of the option that takes it and the list in its
// messages all read the same table, so a new value is added in one place. Parse errors keep each
// enum's own message (tests check them): the parser asks find() and throws its message, usually
// with list() for the names.
//
//   inline constexpr EnumTable kComponents{std::array{
//       EnumEntry<Component>{Component::Routing, "routing"},
//       EnumEntry<Component>{Component::Filtering, "filtering"}}};
//   kComponents.name(c);                     // "routing"
//   kComponents.find("filtering");           // Component::Filtering
//   ->check(app::member_of(kComponents))     // CLI::IsMember of the names (cf/core/validators.hpp)
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cf {

/// One value of an enum: its canonical name, further accepted spellings (space-separated; empty
/// for none) and a line of help.
template <class E>
struct EnumEntry {
  E value;
  std::string_view name;
  std::string_view aliases = {};
  std::string_view help = {};
};

/// The name table of an enum E (N entries, in the order lists and validators show them).
template <class E, std::size_t N>
class EnumTable {
 public:
  constexpr explicit EnumTable(std::array<EnumEntry<E>, N> entries) : entries_(entries) {}

  /// The canonical name of `v` ("?" for a value outside the table).
  constexpr std::string_view name(E v) const {
    for (const auto& e : entries_)
      if (e.value == v) return e.name;
    return "?";
  }

  /// The value whose name or one of whose aliases is exactly `s`.
  constexpr std::optional<E> find(std::string_view s) const {
    for (const auto& e : entries_)
      if (e.name == s || has_alias(e.aliases, s)) return e.value;
    return std::nullopt;
  }

  /// The canonical names, in table order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.emplace_back(e.name);
    return out;
  }

  /// The canonical names joined by `sep` ("a, b, c", "a | b", "a|b").
  std::string list(std::string_view sep = ", ") const {
    std::string out;
    for (const auto& e : entries_) {
      if (!out.empty()) out += sep;
      out += e.name;
    }
    return out;
  }

  /// "name: help" per entry, joined by `sep` (entries without help give their name alone).
  std::string help(std::string_view sep = "; ") const {
    std::string out;
    for (const auto& e : entries_) {
      if (!out.empty()) out += sep;
      out += e.name;
      if (!e.help.empty()) (out += ": ") += e.help;
    }
    return out;
  }

 private:
  static constexpr bool has_alias(std::string_view aliases, std::string_view s) {
    while (!aliases.empty()) {
      const std::size_t sp = aliases.find(' ');
      if (aliases.substr(0, sp) == s) return true;
      if (sp == std::string_view::npos) break;
      aliases.remove_prefix(sp + 1);
    }
    return false;
  }

  std::array<EnumEntry<E>, N> entries_;
};

template <class E, std::size_t N>
EnumTable(std::array<EnumEntry<E>, N>) -> EnumTable<E, N>;

}  // namespace cf
