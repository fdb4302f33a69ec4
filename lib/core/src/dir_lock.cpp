#include "cf/core/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cf/core/error.hpp"

namespace cf {

DirLock::DirLock(const std::string& dir, const std::string& option, const std::string& tool) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    // the folders this call creates, leaf first (removed again by the destructor while empty)
    for (std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
         !p.empty() && p != p.root_path() && !std::filesystem::exists(p, ec); p = p.parent_path()) {
      if (p.filename().empty()) continue;  // "a/b/" normalises to a trailing empty name
      made_.push_back(p.string());
    }
    std::filesystem::create_directories(dir, ec);
    if (ec) throw InvalidArgument(str(option, " '", dir, "': cannot create the folder: ", ec.message()));
  }
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    const int e = errno;
    remove_made();  // the destructor does not run when the constructor throws
    throw InvalidArgument(str(option, " '", dir, "': cannot open the folder: ", std::strerror(e)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      ::close(fd_);
      fd_ = -1;
      throw InvalidArgument(str(option, " '", dir, "' is in use by another ", tool,
                                " process (it holds the folder's lock until it ends): wait for it, or choose "
                                "another ",
                                option));
    }
    // ENOLCK / EOPNOTSUPP / EBADF on a file system without flock: run unlocked, as before
  }
}

void DirLock::remove_made() {
  for (const std::string& d : made_) {
    std::error_code ec;
    if (!std::filesystem::is_empty(d, ec) || ec || !std::filesystem::remove(d, ec)) break;
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
  remove_made();
}

}  // namespace cf
