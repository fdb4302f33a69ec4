#pragma once
// One output path for every file the toolkit writes (docs/conventions.md, "Output files"):
//   - a regular file (or a new name) is written to a temporary sibling `<target>.tmp.<PID>`,
//     flushed to disk (fsync), renamed over the target in one step (rename(2) is atomic on POSIX)
//     and the folder is fsynced: an interrupted or failed write never leaves a half-written file
//     in place of an old one;
//   - a symbolic link is resolved and its final target is replaced atomically: the link stays a
//     link;
//   - a device node, a FIFO or a socket, and the name "-" (stdout), are written straight through:
//     never renamed over, never truncated into a regular file;
//   - temporaries are removed on every error and on SIGINT / SIGTERM / SIGHUP (a registry of live
//     temporaries and a handler that unlinks them, then re-raises the signal); temporaries of dead
//     processes (`*.tmp.<PID>` whose PID no longer runs, e.g. after kill -9) are removed by the next
//     write into that folder.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cf {

/// What an output path names, as the writer sees it.
enum class OutputKind {
  Stdout,  ///< "-"
  File,    ///< a regular file or a name not yet taken (symbolic links are resolved first)
  Stream,  ///< an existing character/block device, FIFO or socket: written straight through
};

/// How `path` will be written: its kind and the path actually written (a symbolic link's final
/// target, followed through chains; a dangling link's target is created). Throws cf::Error on a
/// link loop or an unreadable link.
std::pair<OutputKind, std::string> resolve_output(const std::string& path);

/// Write `content` to `path` through the one output path above. Throws cf::Error naming the path
/// and the system error on failure (disk full, permission); the old file stays intact and no
/// temporary is left.
void write_file_atomic(const std::string& path, const std::string& content);

/// The same for writers that need a real file name (HDF5, gnuplot): `produce(tmp_path)` must
/// create the file at tmp_path (a registered temporary: a sibling of the target, or under $TMPDIR
/// when the destination is "-" or a device/FIFO, whose bytes are then copied through). On success
/// the file is fsynced and committed; on any exception the temporary is removed and the exception
/// propagates.
void write_path_atomic(const std::string& path, const std::function<void(const std::string&)>& produce);

/// Several files that form one product (a token set: train, validation, meta) committed as a
/// unit: every content is written to its temporary and fsynced first (any failure removes all
/// temporaries and leaves every old file untouched); then they are renamed in order and the folder
/// is fsynced. Put the manifest (the file a reader opens first and that describes the others, e.g.
/// with sizes and checksums) LAST: a reader that checks the manifest against the data files never
/// accepts a mixed set, even if the process dies between two renames. Paths must name regular
/// files (or new names); symbolic links are resolved.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

/// Read a whole file; throws cf::InvalidArgument if it cannot be opened or is not a regular file
/// (require_regular_input below).
std::string read_file(const std::string& path);

/// Throws cf::InvalidArgument "<what> '<path>' is not a regular file (a FIFO)" (or a folder, a
/// device, a socket) when `path` exists and names anything but a regular file, symbolic links
/// resolved: opening a FIFO with no writer blocks forever, a folder reads as empty, a device may
/// never end. Call it BEFORE opening an input. Exception: a pipe or device of this process's own
/// descriptors (/dev/fd/N, /proc/self/fd/N, /dev/stdin), which is how process substitution
/// `--text <(zcat corpus.gz)` arrives: it has a writer, so it is left to the reader (folders are
/// still refused). A path that cannot be stat'ed (missing, no permission) is left to the caller's
/// open, which names the system error. `what` (e.g. "--kernel-file") may be empty.
void require_regular_input(const std::string& path, const std::string& what = "");

/// Temporary sibling name of a regular-file target: "<target>.tmp.<PID>".
std::string temp_sibling(const std::string& target);

/// Register / unregister a temporary path for removal on SIGINT, SIGTERM and SIGHUP (at most 64
/// live at once; more are still removed on error paths, just not by the signal handler).
void register_temp(const std::string& path);
void unregister_temp(const std::string& path);

/// Install the SIGINT / SIGTERM / SIGHUP handler that unlinks the registered temporaries and then
/// re-raises the signal with the default action (the process still dies of the signal). Called by
/// cf::app::run; calling it again is harmless. A signal that is ignored (nohup, a background job)
/// stays ignored. SIGXFSZ is ignored, so a write past ulimit -f fails with EFBIG through the error
/// path (temporary removed) instead of killing the process. A tool that installs its own SIGINT handler for a while
/// (train saves a checkpoint) calls this again afterwards instead of restoring SIG_DFL.
void install_temp_cleanup_handlers();

/// Remove stale temporaries in `dir`: regular files of this user named `<prefix><PID>` when
/// `prefix` ends in ".tmp." (the writers pass "<target name>.tmp.": only that target's own
/// temporaries, never another file of the folder), else `<prefix>*.tmp.<PID>`, whose PID is not a
/// running process (and not this one). Returns the number removed. Errors are ignored (best effort).
int remove_stale_temps(const std::string& dir, const std::string& prefix = "");

/// Throws cf::Error with the reason unless `path` can be written through the output path above:
/// "-"; a writable device/FIFO; a regular file or new name whose folder exists and accepts a new
/// file (probed by creating and removing a temporary there). Call before long work.
void check_output_writable(const std::string& path);

/// Throws cf::InvalidArgument "<what> needs about 270 GB but the file system of 'DIR' has 50 GB
/// free" (or "... but the file size limit (ulimit -f) is ...") when a file of `bytes` bytes cannot
/// be written to `path` through the output path above: the free space of the file system its
/// temporary lands on (statvfs; $TMPDIR for stdout or a device) and RLIMIT_FSIZE. Call with an
/// estimate before a long write (capture), so a run that cannot finish is refused before the work.
void require_space_for(const std::string& path, std::uint64_t bytes, const std::string& what);

/// Throws cf::Error unless `dir` is a writable folder or can be created (its nearest existing
/// ancestor is a writable folder).
void check_output_dir_writable(const std::string& dir);

/// A registered temporary file path removed when the object dies (or on a signal): for scratch
/// files a tool reads back itself (rollout's in-process capture). The name is
/// "<dir>/<stem>.tmp.<PID>" (dir = $TMPDIR or /tmp when empty), so a killed run's leftover is
/// cleaned by the next run's stale-temporary sweep.
class TempFile {
 public:
  explicit TempFile(const std::string& stem, const std::string& dir = "");
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace cf
