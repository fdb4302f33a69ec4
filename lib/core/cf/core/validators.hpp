#pragma once
// Command-line validators shared by every tool (docs/conventions.md "Bad input"): numbers are
// checked on the text the user typed, before CLI11 converts it, so that
//   - NaN and +-inf never reach a real-valued option (CLI::Range lets "nan" through: every
//     comparison with NaN is false),
//   - integers are plain decimal ("1e3", "0x10", "010" and "1.5" are refused; CLI11 reads the
//     last three as 16, 8 and an error) and out-of-range values are refused instead of being
//     clamped by strtoll or wrapped by strtoull ("--seed -1" would become 2^64 - 1).
// A failed check makes CLI11 print "--option: <reason>" and the tool exit 2 (cf/core/app.hpp).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "cf/core/error.hpp"

namespace cf::app {

namespace detail {

/// Shortest round-trip text of a bound for messages ("0", "1e+30", "-inf").
inline std::string bound_str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

/// "010" would be read by CLI11 as octal 8 (and "019" refused as a bad number): a leading zero
/// before more digits is refused, naming the decimal the user probably meant. `i`: first digit.
inline std::string leading_zero(const std::string& in, std::size_t i) {
  if (in.size() <= i + 1 || in[i] != '0') return {};
  const std::size_t k = in.find_first_not_of('0', i);
  const std::string meant = (i ? in.substr(0, 1) : "") + (k == std::string::npos ? "0" : in.substr(k));
  return "'" + in + "' has a leading zero (read as octal by the parser): write " + meant;
}

}  // namespace detail

/// A real number that is finite (not nan, inf or out of double range) and lies in [lo, hi]
/// (both inclusive; defaults: any finite number). The message names the value and the range.
inline CLI::Validator finite(double lo = -std::numeric_limits<double>::infinity(),
                             double hi = std::numeric_limits<double>::infinity()) {
  std::string desc = "FINITE";
  if (std::isfinite(lo) || std::isfinite(hi))
    desc += " in [" + detail::bound_str(lo) + ", " + detail::bound_str(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        const char* s = in.c_str();
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(s, &end);
        if (in.empty() || end != s + in.size()) return "'" + in + "' is not a number";
        if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) > 1))
          return "'" + in + "' is not a finite number (nan and inf are refused)";
        if (v < lo || v > hi)
          return "'" + in + "' is out of range: must satisfy " + detail::bound_str(lo) +
                 " <= value <= " + detail::bound_str(hi);
        return {};
      },
      desc);
}

/// A finite real number > lo (exclusive lower bound), e.g. a learning rate > 0.
inline CLI::Validator finite_above(double lo, double hi = std::numeric_limits<double>::infinity()) {
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        std::string msg = finite(-std::numeric_limits<double>::infinity(), hi)(in);
        if (!msg.empty()) return msg;
        if (!(std::strtod(in.c_str(), nullptr) > lo))
          return "'" + in + "' is out of range: must be > " + detail::bound_str(lo);
        return {};
      },
      "FINITE > " + detail::bound_str(lo));
}

/// A plain decimal integer (optional leading '-' or '+', digits only) in [lo, hi], inclusive.
inline CLI::Validator integer(long long lo = std::numeric_limits<long long>::min(),
                              long long hi = std::numeric_limits<long long>::max()) {
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        std::size_t i = (!in.empty() && (in[0] == '-' || in[0] == '+')) ? 1 : 0;
        if (i == in.size() || in.find_first_not_of("0123456789", i) != std::string::npos)
          return "'" + in + "' is not a whole decimal number";
        if (const std::string m = detail::leading_zero(in, i); !m.empty()) return m;
        errno = 0;
        const long long v = std::strtoll(in.c_str(), nullptr, 10);
        if (errno == ERANGE || v < lo || v > hi)
          return "'" + in + "' is out of range: must satisfy " + std::to_string(lo) +
                 " <= value <= " + std::to_string(hi);
        return {};
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

/// A plain decimal unsigned integer in [0, hi] (seeds: "-1" is refused, not wrapped to 2^64 - 1).
inline CLI::Validator unsigned_integer(unsigned long long hi = std::numeric_limits<unsigned long long>::max()) {
  return CLI::Validator(
      [hi](std::string& in) -> std::string {
        const std::size_t i = (!in.empty() && in[0] == '+') ? 1 : 0;
        if (i == in.size() || in.find_first_not_of("0123456789", i) != std::string::npos)
          return "'" + in + "' is not a whole non-negative decimal number";
        if (const std::string m = detail::leading_zero(in, i); !m.empty()) return m;
        errno = 0;
        const unsigned long long v = std::strtoull(in.c_str(), nullptr, 10);
        if (errno == ERANGE || v > hi)
          return "'" + in + "' is out of range: must satisfy 0 <= value <= " + std::to_string(hi);
        return {};
      },
      "UINT in [0, " + std::to_string(hi) + "]");
}

/// A comma list of finite reals (e.g. "--content 0.5,1"), each checked as by finite(lo, hi).
inline CLI::Validator finite_list(double lo = -std::numeric_limits<double>::infinity(),
                                  double hi = std::numeric_limits<double>::infinity()) {
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        std::stringstream ss(in);
        std::string item;
        int k = 0;
        while (std::getline(ss, item, ',')) {
          std::string msg = finite(lo, hi)(item);
          if (!msg.empty()) return "entry " + std::to_string(k) + ": " + msg;
          ++k;
        }
        if (k == 0 || (!in.empty() && in.back() == ',')) return "'" + in + "' is not a comma list of numbers";
        return {};
      },
      "LIST of FINITE");
}

/// The check of an option that takes one of an enum's canonical names (cf/core/enum_table.hpp):
/// CLI::IsMember of the table's names, in table order (--help shows them as {a,b,c}).
template <class Table>
CLI::Validator member_of(const Table& table) {
  return CLI::IsMember(table.names());
}

/// Refuse an option that the selected mode ignores (exit 2 through cf::InvalidArgument, naming
/// the option and the mode that uses it), e.g.
///   refuse_unless(app, "--block", mode == "closure", "--coverage closure").
/// Call after parsing (inside the run body). An option given on the command line counts; a
/// default does not. Unknown names are a programming error (CLI::OptionNotFound).
inline void refuse_unless(const CLI::App& app, const std::string& opt_name, bool mode_uses_it,
                          const std::string& mode) {
  const CLI::Option* o = app.get_option(opt_name);
  if (o->count() > 0 && !mode_uses_it)
    throw InvalidArgument(opt_name + " is only used with " + mode + " and would be ignored here: drop it or add " +
                          mode);
}

/// Refuse every option of `options` given on the command line when the selected `mode` ignores
/// them all (exit 2 through cf::InvalidArgument naming the option and the mode), e.g.
///   refuse_in_mode(app, {"--matrix", "--mask"}, "rollout --model CHECKPOINT --influence");
/// the complement of refuse_unless for a mode that is easier to name than each option's users.
/// Call after parsing, on the App (or subcommand) that declares the options; a default does not
/// count. Unknown names are a programming error (CLI::OptionNotFound).
inline void refuse_in_mode(const CLI::App& app, std::initializer_list<const char*> options, const std::string& mode) {
  for (const char* name : options)
    if (app.get_option(name)->count() > 0)
      throw InvalidArgument(std::string(name) + " is not used by " + mode + " and would be ignored: drop it");
}

}  // namespace cf::app
