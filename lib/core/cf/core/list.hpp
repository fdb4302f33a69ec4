#pragma once
// Comma lists typed on the command line ("--heads 0,3", "--checkpoint a.h5,b.h5", "--layers 0-2,5",
// "--attn full,sd"): one splitter for every tool, so that an empty item -- an empty list, a leading
// or trailing comma, or ",," -- is refused the same way everywhere (exit 2 naming the option,
// docs/conventions.md "Bad input") instead of being dropped by one tool and refused by another.
#include <string>
#include <vector>

#include "cf/core/error.hpp"

namespace cf {

/// The items of the comma list `text`, each with its surrounding spaces dropped. Throws
/// cf::InvalidArgument naming `option` (e.g. "--heads") and the list when an item is empty
/// ("", "0,", ",0", "0,,1", "0, ,1").
inline std::vector<std::string> split_list(const std::string& text, const std::string& option) {
  std::vector<std::string> out;
  for (std::size_t pos = 0;;) {
    const std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t a = item.find_first_not_of(' ');
    item = a == std::string::npos ? std::string() : item.substr(a, item.find_last_not_of(' ') - a + 1);
    require(!item.empty(), option, ": ",
            text.find_first_not_of(' ') == std::string::npos
                ? std::string("empty list")
                : "the comma list '" + text + "' has an empty item (a leading, trailing or doubled comma)");
    out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace cf
