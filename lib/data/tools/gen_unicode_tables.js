// Regenerates cf/data/detail/unicode_tables.hpp from the JavaScript regex engine that the
// reference GPT-2 encoder (npm gpt-3-encoder) runs on. Usage (from lib/data/):
//   node tools/gen_unicode_tables.js
function ranges(re) {
  const out = [];
  let start = -1;
  for (let c = 0; c <= 0x110000; c++) {
    const ok = c < 0x110000 && !(c >= 0xD800 && c <= 0xDFFF) && re.test(String.fromCodePoint(c));
    if (ok && start < 0) start = c;
    if (!ok && start >= 0) { out.push([start, c - 1]); start = -1; }
  }
  return out;
}
function emit(name, r) {
  let s = "inline constexpr CodePointRange " + name + "[] = {\n";
  let line = "   ";
  for (const [a, b] of r) {
    const t = " {0x" + a.toString(16).toUpperCase() + ", 0x" + b.toString(16).toUpperCase() + "},";
    if (line.length + t.length > 100) { s += line + "\n"; line = "   "; }
    line += t;
  }
  return s + line + "\n};\n";
}
const L = ranges(/^\p{L}$/u), N = ranges(/^\p{N}$/u), S = ranges(/^\s$/u);
const out = `#pragma once
// Unicode property tables for the GPT-2 pre-tokenisation regex, generated from the JavaScript
// regular-expression engine the reference encoder (npm gpt-3-encoder) runs on: node ${process.version},
// Unicode ${process.versions.unicode}. Ranges are inclusive, sorted and disjoint.
//   kLetter = /\\p{L}/u, kNumber = /\\p{N}/u, kSpace = /\\s/u (JavaScript whitespace + line terminators).
// Regenerate with: cd lib/data && node tools/gen_unicode_tables.js
#include <cstdint>

namespace cf::data::detail {

/// Inclusive code-point range [lo, hi].
struct CodePointRange {
  std::uint32_t lo, hi;
};

` + emit("kLetter", L) + "\n" + emit("kNumber", N) + "\n" + emit("kSpace", S) + "\n}  // namespace cf::data::detail\n";
require("fs").writeFileSync("cf/data/detail/unicode_tables.hpp", out);
console.log("letters", L.length, "numbers", N.length, "spaces", S.length, "ranges; Unicode", process.versions.unicode);
