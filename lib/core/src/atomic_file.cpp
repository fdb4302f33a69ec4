#include "cf/core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cf/core/error.hpp"

namespace cf {

static std::string temp_sibling(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

static void fsync_path(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void write_path_atomic(const std::string& path, const std::function<void(const std::string&)>& produce) {
  const std::string tmp = temp_sibling(path);
  try {
    produce(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  fsync_path(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    throw Error(str("cannot write '", path, "': ", std::strerror(e)));
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_path_atomic(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw Error(str("cannot write '", path, "': ", std::strerror(errno)));
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    f.flush();
    if (!f) throw Error(str("cannot write '", path, "': write failed (disk full?)"));
  });
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidArgument(str("cannot open '", path, "': ", std::strerror(errno)));
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace cf
