#pragma once
// Two error channels (STYLE.md habit 5): broken preconditions throw a cf:: exception naming the
// constraint and the values; numerical outcomes are status fields in result structs. The library
// never exits; apps map InvalidArgument -> exit 2 and Error -> exit 1 (cf/core/app.hpp).
#include <sstream>
#include <stdexcept>
#include <string>

namespace cf {

/// Runtime failure (I/O, resources, numerical breakdown that cannot be reported as a status).
/// Apps exit with code 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A violated precondition on user-supplied input; the message names the constraint and the
/// offending values. Apps exit with code 2 (usage error).
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& what) : Error(what) {}
};

namespace detail {
inline void format_into(std::ostringstream&) {}
template <class T, class... Rest>
void format_into(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  format_into(os, rest...);
}
}  // namespace detail

/// Concatenate the arguments with operator<< into one string (for exception messages).
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  detail::format_into(os, args...);
  return os.str();
}

/// Throw InvalidArgument with the concatenated message unless `cond` holds.
template <class... Args>
void require(bool cond, const Args&... message) {
  if (!cond) throw InvalidArgument(str(message...));
}

}  // namespace cf
