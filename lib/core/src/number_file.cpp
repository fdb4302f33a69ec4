#include "cf/core/number_file.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

namespace cf {

std::vector<std::vector<double>> read_number_rows(const std::string& path, const std::string& what) {
  require_regular_input(path, what);  // a FIFO would block the open below forever
  std::ifstream in(path);
  require(static_cast<bool>(in), what, ": cannot open '", path, "'");
  std::vector<std::vector<double>> rows;
  std::string line;
  long lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto p = line.find('#'); p != std::string::npos) line.erase(p);
    for (char& c : line)
      if (c == ',' || c == ';' || c == '\t' || c == '\r') c = ' ';
    std::istringstream ls(line);
    std::vector<double> row;
    std::string tok;
    while (ls >> tok) {
      char* end = nullptr;
      const double x = std::strtod(tok.c_str(), &end);
      require(end && *end == '\0' && std::isfinite(x), what, " '", path, "' line ", lineno, ": not a finite number: '",
              tok.size() > 40 ? tok.substr(0, 37) + "..." : tok, "'");  // a megabyte token is not echoed whole
      row.push_back(x);
    }
    if (!row.empty()) rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace cf
