#include "cf/core/file_identity.hpp"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

namespace cf {

FileIdentity file_identity(const std::string& path) {
  FileIdentity id;
  if (path.empty() || path == "-") return id;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {  // follows symbolic links: a link and its target are one file
    if (S_ISREG(st.st_mode)) {
      id.kind = FileIdentity::Kind::File;
      id.dev = st.st_dev;
      id.ino = st.st_ino;
    }
    return id;
  }
  // a new name: its folder's real path + the last component
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return id;
  char buf[PATH_MAX];
  if (!::realpath(dir.c_str(), buf)) return id;
  id.kind = FileIdentity::Kind::NewName;
  id.path = std::string(buf) + (std::string(buf) == "/" ? "" : "/") + name;
  return id;
}

bool same_file(const FileIdentity& a, const FileIdentity& b) {
  if (a.kind != b.kind || a.kind == FileIdentity::Kind::None) return false;
  if (a.kind == FileIdentity::Kind::File) return a.dev == b.dev && a.ino == b.ino;
  return a.path == b.path;
}

}  // namespace cf
