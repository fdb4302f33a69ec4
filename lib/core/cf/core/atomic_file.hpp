#pragma once
// Nothing a user saved is ever lost: every file the toolkit writes goes to a temporary sibling,
// is flushed to disk, and is renamed over the target in one step (rename(2) is atomic on POSIX).
#include <functional>
#include <string>

namespace cf {

/// Write `content` to `path` atomically (temporary file in the same folder + fsync + rename).
/// Throws cf::Error naming the path and the system error on failure; the old file stays intact.
void write_file_atomic(const std::string& path, const std::string& content);

/// Atomic write for writers that need a real file path (HDF5, gnuplot): `produce(tmp_path)` must
/// create the file at tmp_path; on success it is fsynced and renamed to `path`, on any exception
/// the temporary is removed and the exception propagates.
void write_path_atomic(const std::string& path, const std::function<void(const std::string&)>& produce);

/// Read a whole file; throws cf::InvalidArgument if it cannot be opened.
std::string read_file(const std::string& path);

}  // namespace cf
