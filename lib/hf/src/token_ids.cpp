#include "cf/hf/token_ids.hpp"

#include <cctype>
#include <cstring>
#include <regex>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"

namespace cf::hf {

namespace {

std::vector<std::int64_t> read_npy(const std::string& path, const std::string& buf) {
  require(buf.size() >= 10, "--tokens '", path, "': .npy file shorter than its header");
  const int major = static_cast<unsigned char>(buf[6]);
  std::size_t hlen = 0, off = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(buf[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(buf[9])) << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    require(buf.size() >= 12, "--tokens '", path, "': .npy file shorter than its header");
    for (int i = 0; i < 4; ++i) hlen |= static_cast<std::size_t>(static_cast<unsigned char>(buf[8 + i])) << (8 * i);
    off = 12;
  } else {
    throw InvalidArgument(str("--tokens '", path, "': unsupported .npy version ", major));
  }
  require(hlen <= buf.size() - off, "--tokens '", path, "': .npy header runs past the end of the file");
  const std::string h = buf.substr(off, hlen);
  std::smatch m;
  require(std::regex_search(h, m, std::regex("'descr':\\s*'([^']*)'")), "--tokens '", path,
          "': .npy header lacks descr");
  const std::string descr = m[1];
  require(descr == "<i4" || descr == "<i8" || descr == "|i1" || descr == "<u2" || descr == "<i2", "--tokens '", path,
          "': .npy dtype '", descr,
          "' is not supported (accepted: int8 '|i1', int16 '<i2', uint16 '<u2', int32 '<i4', int64 '<i8')");
  require(std::regex_search(h, m, std::regex("'fortran_order':\\s*(True|False)")) && m[1] == "False", "--tokens '",
          path, "': .npy must be C order (fortran_order False)");
  require(std::regex_search(h, m, std::regex("'shape':\\s*\\(([^)]*)\\)")), "--tokens '", path,
          "': .npy header lacks shape");
  std::uint64_t n = 1;
  const std::string dims = m[1];
  bool any = false;
  // Comma-separated non-negative integers, one trailing comma allowed ("()", "(40,)", "(2, 3)"):
  // anything else ("(-40,)", "(4x,)") is refused, not read digit by digit.
  for (std::size_t pos = 0;;) {
    const std::size_t comma = dims.find(',', pos);
    std::string e = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    e.erase(0, e.find_first_not_of(" \t"));
    e.erase(e.find_last_not_of(" \t") + 1);
    if (e.empty()) {
      require(comma == std::string::npos && (any || dims.find_first_not_of(" \t") == std::string::npos), "--tokens '",
              path, "': .npy shape (", dims, ") has an empty dimension");
      break;
    }
    if (e.back() == 'L') e.pop_back();  // Python 2 long literals: (40L,)
    require(!e.empty() && e.find_first_not_of("0123456789") == std::string::npos, "--tokens '", path, "': .npy shape (",
            dims, ") has dimension '", e, "', not a non-negative integer");
    std::uint64_t d = 0;
    for (const char c : e) {
      require(d < (1ULL << 40), "--tokens '", path, "': .npy shape too large");
      d = d * 10 + static_cast<std::uint64_t>(c - '0');
    }
    require(!__builtin_mul_overflow(n, d, &n) && n < (1ULL << 40), "--tokens '", path, "': .npy shape too large");
    any = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (!any) n = 1;  // a 0-d array holds one value
  const std::size_t width = descr == "<i8" ? 8 : descr == "<i4" ? 4 : descr == "|i1" ? 1 : 2;
  const std::size_t data = off + hlen;
  require(buf.size() - data == n * width, "--tokens '", path, "': .npy data has ", buf.size() - data,
          " bytes but shape (", dims, ") x ", width, " needs ", n * width);
  std::vector<std::int64_t> v(n);
  for (std::size_t k = 0; k < n; ++k) {
    const char* p = buf.data() + data + k * width;
    if (width == 8) {
      std::int64_t x;
      std::memcpy(&x, p, 8);
      v[k] = x;
    } else if (width == 4) {
      std::int32_t x;
      std::memcpy(&x, p, 4);
      v[k] = x;
    } else if (descr == "<u2") {
      std::uint16_t x;
      std::memcpy(&x, p, 2);
      v[k] = x;
    } else if (width == 2) {
      std::int16_t x;
      std::memcpy(&x, p, 2);
      v[k] = x;
    } else {
      v[k] = static_cast<signed char>(*p);
    }
  }
  return v;
}

}  // namespace

std::vector<std::int32_t> read_token_ids(const std::string& path, int vocab_size) {
  const std::string buf = read_file(path);
  std::vector<std::int64_t> ids;
  if (buf.size() >= 6 && buf.compare(0, 6, "\x93NUMPY") == 0) {
    ids = read_npy(path, buf);
  } else {
    std::size_t i = 0;
    while (i < buf.size()) {
      if (std::isspace(static_cast<unsigned char>(buf[i]))) {
        ++i;
        continue;
      }
      const std::size_t start = i;
      std::int64_t v = 0;
      while (i < buf.size() && std::isdigit(static_cast<unsigned char>(buf[i]))) {
        require(v < (1LL << 40), "--tokens '", path, "': id at byte ", start, " is too large");
        v = v * 10 + (buf[i++] - '0');
      }
      require(i > start && (i == buf.size() || std::isspace(static_cast<unsigned char>(buf[i]))), "--tokens '", path,
              "': entry ", ids.size(), " at byte ", start, " is not a non-negative integer ('",
              buf.substr(start, std::min<std::size_t>(16, buf.find_first_of(" \t\r\n", start) - start)), "')");
      ids.push_back(v);
    }
  }
  require(!ids.empty(), "--tokens '", path, "' holds no token ids");
  std::vector<std::int32_t> out(ids.size());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    require(ids[k] >= 0 && ids[k] < vocab_size, "--tokens '", path, "': id ", ids[k], " at position ", k,
            " is outside [0, vocab_size = ", vocab_size, ")");
    out[k] = static_cast<std::int32_t>(ids[k]);
  }
  return out;
}

}  // namespace cf::hf
