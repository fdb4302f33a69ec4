#pragma once
// Peak host memory of the test process, for the tests that bound what a load costs (the weight
// store's staging, the stored-dtype device model).
#include <cstdint>
#include <fstream>
#include <string>

namespace cf_test {

/// Peak resident set so far (VmHWM, bytes): file-backed mapped pages count as well as anonymous ones.
inline std::uint64_t peak_rss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

inline double mib(std::uint64_t b) { return static_cast<double>(b) / (1 << 20); }

}  // namespace cf_test
