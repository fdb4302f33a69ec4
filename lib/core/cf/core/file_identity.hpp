#pragma once
// Which file a path names, so that a tool can refuse to write an output over one of its own inputs
// or two outputs over each other (docs/conventions.md, "Output files": nothing a user saved is ever
// lost). Two spellings name the same file when they reach the same (device, inode) after symbolic
// links are followed ("run/last.h5", "./run//last.h5", a link to it, a hard link), or, for a name
// not yet taken, the same absolute path after the folder's links are resolved.
#include <sys/types.h>

#include <string>

namespace cf {

struct FileIdentity {
  enum class Kind {
    None,     ///< empty, "-" (stdout), a folder, a device, FIFO or socket, or a path whose folder is missing
    File,     ///< an existing regular file: dev, ino
    NewName,  ///< a name not yet taken in an existing folder: path (absolute, folder links resolved)
  };
  Kind kind = Kind::None;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string path;
};

/// The identity of `path` (never throws; unreadable paths give Kind::None).
FileIdentity file_identity(const std::string& path);

/// True when both identities are known and name the same file (Kind::None never matches).
bool same_file(const FileIdentity& a, const FileIdentity& b);

}  // namespace cf
