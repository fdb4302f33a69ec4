#pragma once
// UTF-8 decoding and the Unicode character classes used by the GPT-2 pre-tokenisation regex
// (\p{L}, \p{N}, \s as the JavaScript engine of the reference encoder defines them; tables in
// detail/unicode_tables.hpp are generated from that engine).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cf::data {

/// Decode UTF-8 into code points. Invalid or truncated sequences become U+FFFD, one per maximal
/// ill-formed subpart (the WHATWG/TextDecoder rule node applies when it reads a text file), so
/// the result always matches what the JavaScript reference encoder sees.
std::vector<char32_t> utf8_decode(std::string_view bytes);

/// Append the UTF-8 encoding of code point `cp` (< 0x110000) to `out`.
void utf8_append(std::string& out, char32_t cp);

/// UTF-8 encoding of a code-point sequence.
std::string utf8_encode(const std::vector<char32_t>& cps);

/// JavaScript /\p{L}/u: any Unicode letter (general category L*).
bool is_letter(char32_t cp);
/// JavaScript /\p{N}/u: any Unicode number (general category N*).
bool is_number(char32_t cp);
/// JavaScript /\s/u: white space and line terminators (\t\n\v\f\r, space, U+00A0, U+FEFF, Zs, ...).
bool is_space(char32_t cp);

}  // namespace cf::data
