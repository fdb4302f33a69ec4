#include "cf/core/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cf/core/error.hpp"

namespace cf {
namespace {

// ---- registry of live temporaries (read by the signal handler: fixed storage, no allocation) --
constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<int> g_state[kSlots];  // 0 free, 2 being written, 1 live

extern "C" void cf_temp_cleanup_handler(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_state[i].load() == 1) ::unlink(g_paths[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // delivered when the handler returns: the process dies of the signal as before
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);  // best effort: some file systems refuse fsync on directories
  ::close(fd);
}

// Write all bytes; returns 0 or the errno of the failure.
int write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, data, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (k == 0) return EIO;
    data += k;
    n -= static_cast<std::size_t>(k);
  }
  return 0;
}

[[noreturn]] void fail(const std::string& path, int e) {
  throw Error(str("cannot write '", path, "': ", std::strerror(e), e == ENOSPC ? " (disk full)" : ""));
}

// Mode of an existing regular target (kept by the replacement), or -1.
int existing_mode(const std::string& target) {
  struct stat st;
  if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return static_cast<int>(st.st_mode & 07777);
  return -1;
}

// Write `content` into a new file at `tmp` and fsync it; returns 0 or errno (tmp may exist).
int write_temp(const std::string& tmp, const std::string& content, int mode) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return errno;
  int e = write_all(fd, content.data(), content.size());
  if (!e && mode >= 0 && ::fchmod(fd, static_cast<mode_t>(mode)) != 0) e = errno;
  if (!e && ::fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && !e) e = errno;
  return e;
}

int fsync_file(const std::string& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int e = 0;
  if (::fsync(fd) != 0 && errno != EINVAL) e = errno;
  ::close(fd);
  return e;
}

// Open an existing device / FIFO / socket for writing (no O_CREAT, no O_TRUNC: never replaced).
// A FIFO that no process reads would block open() forever (a shell's `> fifo` does): it is opened
// without blocking and retried for kFifoWaitSeconds, then refused naming the FIFO.
constexpr int kFifoWaitSeconds = 10;
int open_stream(const std::string& target, const std::string& shown) {
  struct stat st;
  if (::stat(target.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(shown, errno);
    return fd;
  }
  for (int tries = 0;; ++tries) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        const int e = errno;
        ::close(fd);
        fail(shown, e);
      }
      return fd;
    }
    if (errno != ENXIO) fail(shown, errno);
    if (tries >= kFifoWaitSeconds * 10)
      throw InvalidArgument(str("cannot write '", shown, "': it is a FIFO that no process reads (waited ",
                                kFifoWaitSeconds, " s); start the reader first, e.g. 'cat ", shown,
                                " &', or write to a file"));
    ::usleep(100000);
  }
}

// A regular file that nobody may write (no write bit) or this user may not: the user's "do not
// replace". Replacing by rename needs only the folder's permission, so it is refused here.
void refuse_read_only(const std::string& target, const std::string& shown) {
  struct stat st;
  if (::stat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if ((st.st_mode & 0222) != 0 && ::access(target.c_str(), W_OK) == 0) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  throw InvalidArgument(str("cannot write '", shown, "': the file is read-only (mode ", mode,
                            "); make it writable (chmod u+w) or choose another name"));
}

// Straight-through write to stdout or an existing device / FIFO / socket.
void write_stream(OutputKind kind, const std::string& target, const std::string& shown, const char* data,
                  std::size_t n) {
  if (kind == OutputKind::Stdout) {
    std::fflush(stdout);
    if (const int e = write_all(STDOUT_FILENO, data, n)) fail("-", e);
    return;
  }
  const int fd = open_stream(target, shown);
  int e = write_all(fd, data, n);
  if (::close(fd) != 0 && !e && errno != EINTR) e = errno;
  if (e) fail(shown, e);
}

// Rename the fsynced temporary over the target and fsync the folder; on failure removes tmp.
void commit(const std::string& tmp, const std::string& target, const std::string& shown) {
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    unregister_temp(tmp);
    fail(shown, e);
  }
  unregister_temp(tmp);
  fsync_dir(dir_of(target));
}

}  // namespace

std::string temp_sibling(const std::string& target) { return target + ".tmp." + std::to_string(::getpid()); }

std::pair<OutputKind, std::string> resolve_output(const std::string& path) {
  if (path == "-") return {OutputKind::Stdout, path};
  require(!path.empty(), "output path must not be empty");
  // A name that leads to a pipe, FIFO, socket or device (process substitution's /dev/fd/63 links
  // to "pipe:[N]", which names no file) is written through as that stream.
  if (struct stat fst; ::stat(path.c_str(), &fst) == 0 && !S_ISREG(fst.st_mode) && !S_ISDIR(fst.st_mode))
    return {OutputKind::Stream, path};
  std::string cur = path;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat st;
    if (::lstat(cur.c_str(), &st) != 0) {
      if (errno == ENOENT) return {OutputKind::File, cur};  // a new name (or a dangling link's target)
      fail(path, errno);
    }
    if (S_ISLNK(st.st_mode)) {
      std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 2);
      const ssize_t k = ::readlink(cur.c_str(), buf.data(), buf.size() - 1);
      if (k < 0) fail(path, errno);
      std::string next(buf.data(), static_cast<std::size_t>(k));
      if (next.empty() || next[0] != '/') next = dir_of(cur) + "/" + next;
      cur = next;
      continue;
    }
    if (S_ISDIR(st.st_mode)) throw Error(str("cannot write '", path, "': it is a directory"));
    if (S_ISREG(st.st_mode)) return {OutputKind::File, cur};
    return {OutputKind::Stream, cur};  // character/block device, FIFO, socket
  }
  throw Error(str("cannot write '", path, "': too many levels of symbolic links"));
}

void register_temp(const std::string& path) {
  if (path.size() >= kPathMax) return;
  for (int i = 0; i < kSlots; ++i) {
    int expect = 0;
    if (g_state[i].compare_exchange_strong(expect, 2)) {
      std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
      g_state[i].store(1);
      return;
    }
  }
}

void unregister_temp(const std::string& path) {
  for (int i = 0; i < kSlots; ++i)
    if (g_state[i].load() == 1 && path == g_paths[i]) {
      g_state[i].store(0);
      return;
    }
}

void install_temp_cleanup_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // nohup, background
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = cf_temp_cleanup_handler;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
  // A file past RLIMIT_FSIZE (ulimit -f) raises SIGXFSZ, whose default action kills the process
  // with the temporary left behind. Ignored, the write fails with EFBIG instead and the normal
  // error path removes the temporary and exits 1 naming the file (issue 29).
  ::signal(SIGXFSZ, SIG_IGN);
}

void require_space_for(const std::string& path, std::uint64_t bytes, const std::string& what) {
  const auto [kind, target] = resolve_output(path);
  std::string dir;
  if (kind == OutputKind::File) {
    const auto slash = target.find_last_of('/');
    dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  } else {  // stdout or a device: the scratch copy goes to $TMPDIR first
    const char* t = std::getenv("TMPDIR");
    dir = t && *t ? t : "/tmp";
  }
  auto gb = [](double b) { return b >= 1e9 ? str(b / 1e9, " GB") : b >= 1e6 ? str(b / 1e6, " MB") : str(b, " bytes"); };
  struct statvfs vs;
  if (::statvfs(dir.c_str(), &vs) == 0) {
    const double free_bytes = static_cast<double>(vs.f_bavail) * static_cast<double>(vs.f_frsize);
    require(static_cast<double>(bytes) <= free_bytes, what, " needs about ", gb(static_cast<double>(bytes)),
            " but the file system of '", dir, "' has ", gb(free_bytes), " free");
  }
  struct rlimit rl;
  if (::getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    require(bytes <= static_cast<std::uint64_t>(rl.rlim_cur), what, " needs about ", gb(static_cast<double>(bytes)),
            " but the file size limit (ulimit -f, RLIMIT_FSIZE) is ", gb(static_cast<double>(rl.rlim_cur)));
}

int remove_stale_temps(const std::string& dir, const std::string& prefix) {
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d) return 0;
  const long self = static_cast<long>(::getpid());
  const uid_t uid = ::geteuid();
  int removed = 0;
  while (const dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // a target's own temporaries: exactly PREFIX<digits> with PREFIX = "<target name>.tmp."; else
    // (scratch files of TempFile) any "<prefix>....tmp.<digits>"
    const bool exact = prefix.size() >= 5 && prefix.compare(prefix.size() - 5, 5, ".tmp.") == 0;
    const auto at = exact ? prefix.size() - 5 : name.rfind(".tmp.");
    if (at == std::string::npos || at == 0) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid <= 1 || pid == self) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    const std::string p = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) continue;
    if (::unlink(p.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const auto [kind, target] = resolve_output(path);
  if (kind != OutputKind::File) return write_stream(kind, target, path, content.data(), content.size());
  refuse_read_only(target, path);
  remove_stale_temps(dir_of(target), base_of(target) + ".tmp.");
  const std::string tmp = temp_sibling(target);
  register_temp(tmp);
  if (const int e = write_temp(tmp, content, existing_mode(target))) {
    ::unlink(tmp.c_str());
    unregister_temp(tmp);
    fail(path, e);
  }
  commit(tmp, target, path);
}

void write_path_atomic(const std::string& path, const std::function<void(const std::string&)>& produce) {
  const auto [kind, target] = resolve_output(path);
  if (kind != OutputKind::File) {
    // Produce into a scratch file, then copy the bytes through (a device is never renamed over).
    TempFile scratch("cf_" + base_of(target));
    produce(scratch.path());
    const std::string bytes = read_file(scratch.path());
    return write_stream(kind, target, path, bytes.data(), bytes.size());
  }
  refuse_read_only(target, path);
  remove_stale_temps(dir_of(target), base_of(target) + ".tmp.");
  const std::string tmp = temp_sibling(target);
  const int mode = existing_mode(target);
  register_temp(tmp);
  try {
    produce(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    unregister_temp(tmp);
    throw;
  }
  int e = fsync_file(tmp);
  if (!e && mode >= 0 && ::chmod(tmp.c_str(), static_cast<mode_t>(mode)) != 0) e = errno;
  if (e) {
    ::unlink(tmp.c_str());
    unregister_temp(tmp);
    fail(path, e);
  }
  commit(tmp, target, path);
}

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> targets, temps;
  for (const auto& [path, content] : files) {
    const auto [kind, target] = resolve_output(path);
    require(kind == OutputKind::File, "'", path, "' is part of a multi-file product and must be a regular file ",
            "(not '-', a device or a FIFO)");
    refuse_read_only(target, path);
    targets.push_back(target);
  }
  auto remove_all = [&] {
    for (const auto& t : temps) {
      ::unlink(t.c_str());
      unregister_temp(t);
    }
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    remove_stale_temps(dir_of(targets[i]), base_of(targets[i]) + ".tmp.");
    const std::string tmp = temp_sibling(targets[i]);
    register_temp(tmp);
    temps.push_back(tmp);
    if (const int e = write_temp(tmp, files[i].second, existing_mode(targets[i]))) {
      remove_all();
      fail(files[i].first, e);
    }
  }
  // Every byte is on disk: commit in order (the manifest last).
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temps[i].c_str(), targets[i].c_str()) != 0) {
      const int e = errno;
      for (std::size_t k = 0; k < i; ++k) unregister_temp(temps[k]);
      temps.erase(temps.begin(), temps.begin() + static_cast<std::ptrdiff_t>(i));
      remove_all();
      fail(files[i].first, e);
    }
    unregister_temp(temps[i]);
  }
  for (const auto& t : targets) fsync_dir(dir_of(t));
}

namespace {
// Create and remove a probe file in `dir`; returns 0 or errno.
int probe_dir(const std::string& dir) {
  const std::string probe = dir + "/.cf_probe.tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno == EEXIST ? 0 : errno;
  ::close(fd);
  ::unlink(probe.c_str());
  return 0;
}
}  // namespace

void check_output_writable(const std::string& path) {
  const auto [kind, target] = resolve_output(path);
  if (kind == OutputKind::Stdout) return;
  if (kind == OutputKind::Stream) {
    if (::access(target.c_str(), W_OK) != 0) fail(path, errno);
    return;
  }
  refuse_read_only(target, path);
  // the temporary sibling "<name>.tmp.<PID>" must fit the file system's name limit too
  if (base_of(target).size() + 5 + 10 > 255)
    throw InvalidArgument(str("cannot write '", path, "': the file name is ", base_of(target).size(),
                              " bytes; at most 240 (its temporary adds '.tmp.<PID>' within the 255-byte limit)"));
  const std::string dir = dir_of(target);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(str("cannot write '", path, "': the folder '", dir, "' does not exist"));
  if (const int e = probe_dir(dir)) fail(path, e);
}

void check_output_dir_writable(const std::string& dir) {
  require(!dir.empty(), "output folder must not be empty");
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  for (int hop = 0; hop < 4096; ++hop) {
    struct stat st;
    if (::stat(d.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) throw Error(str("cannot write into '", dir, "': '", d, "' is not a folder"));
      if (const int e = probe_dir(d)) throw Error(str("cannot write into '", dir, "': '", d, "': ", std::strerror(e)));
      return;
    }
    if (d == "." || d == "/") break;
    d = dir_of(d);
  }
  throw Error(str("cannot write into '", dir, "': no existing parent folder"));
}

void require_regular_input(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // the caller's open reports the missing file
  if (S_ISREG(st.st_mode)) return;
  auto starts = [&](const char* p) { return path.rfind(p, 0) == 0; };
  const bool own_fd = starts("/dev/fd/") || starts("/proc/self/fd/") || path == "/dev/stdin";
  if (own_fd && !S_ISDIR(st.st_mode)) return;  // process substitution: a pipe that has a writer
  const char* kind = S_ISFIFO(st.st_mode)                         ? "a FIFO"
                     : S_ISDIR(st.st_mode)                        ? "a directory"
                     : S_ISSOCK(st.st_mode)                       ? "a socket"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                  : "not a file";
  throw InvalidArgument(str(what.empty() ? "" : what + " ", "'", path, "' is not a regular file (", kind, ")"));
}

std::string read_file(const std::string& path) {
  require_regular_input(path);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidArgument(str("cannot open '", path, "': ", std::strerror(errno)));
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

TempFile::TempFile(const std::string& stem, const std::string& dir) {
  std::string d = dir;
  if (d.empty()) {
    const char* t = std::getenv("TMPDIR");
    d = t && *t ? t : "/tmp";
  }
  remove_stale_temps(d, "cf_");
  path_ = d + "/" + stem + ".tmp." + std::to_string(::getpid());
  register_temp(path_);
}

TempFile::~TempFile() {
  ::unlink(path_.c_str());
  unregister_temp(path_);
}

}  // namespace cf
