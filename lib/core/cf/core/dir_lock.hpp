#pragma once
// One writer per run folder: `train` holds an exclusive advisory lock (flock) on its --out-dir for
// the whole run, so a second `train` started into the same folder is refused at once instead of
// both writing last.h5, best.h5 and log.csv over each other (docs/conventions.md, "Output files":
// nothing a user saved is ever lost). The lock lives on the folder's open descriptor: no lock file
// is left behind, and the kernel releases it when the process ends in any way (kill -9 included).
#include <string>
#include <vector>

namespace cf {

class DirLock {
 public:
  /// Creates `dir` (and its parents) when missing, then takes the lock. Throws InvalidArgument,
  /// naming `option` and `dir`, when another process holds it; a file system without flock
  /// (some network mounts) gives no lock and no error.
  DirLock(const std::string& dir, const std::string& option, const std::string& tool);
  /// Releases the lock; the folders this lock created that are still empty (the run failed before
  /// it wrote anything, e.g. on a full disk or a bad data file) are removed again.
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  void remove_made();              ///< the folders created here that are still empty, leaf first
  std::vector<std::string> made_;  ///< folders created here, leaf first
  int fd_ = -1;
};

}  // namespace cf
