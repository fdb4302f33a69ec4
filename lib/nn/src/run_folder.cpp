#include "cf/nn/run_folder.hpp"

#include <filesystem>
#include <iostream>

#include "cf/core/app.hpp"
#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/file_identity.hpp"
#include "cf/io/hdf5.hpp"

namespace cf::nn {
namespace {

constexpr const char* kRunFiles[] = {"last.h5", "best.h5", "log.csv", "loss.svg"};

// The run files of `dir` newer than `step` (a step_N.h5 with N > step, a last.h5 / best.h5 whose
// stored step is larger, or whose step cannot be read), other than the resumed file itself.
std::vector<std::string> newer_run_files(const std::string& dir, std::int64_t step, const std::string& resumed) {
  std::vector<std::string> newer;
  const FileIdentity self = file_identity(resumed);
  for (const std::string& f : earlier_run_files(dir)) {
    const std::string p = dir + "/" + f;
    if (f == "log.csv" || f == "loss.svg" || same_file(self, file_identity(p))) continue;
    std::int64_t s = -1;
    try {
      const io::File h = io::File::open(p);
      s = h.has_attr("step") ? h.attr_int("step") : -1;
    } catch (const std::exception&) {
      s = -1;
    }
    if (s < 0 || s > step) newer.push_back(s < 0 ? f + " (step unreadable)" : str(f, " (step ", s, ")"));
  }
  return newer;
}

// Whether --resume names a checkpoint inside --out-dir (the run continues that folder's run).
bool resumes_in_folder(const RunFolder& f) {
  if (f.resume.empty()) return false;
  const std::string rd = std::filesystem::path(f.resume).parent_path().string();
  std::error_code ec;
  return std::filesystem::equivalent(rd.empty() ? "." : rd, f.out_dir, ec) && !ec;
}

// A rewind (--resume R/step_000001.h5 --out-dir R) would replace the run's newer last.h5, best.h5
// and step_*.h5 (issue 29): refused, even with --overwrite.
void refuse_rewind(const RunFolder& f, std::int64_t resume_step) {
  const std::vector<std::string> newer = newer_run_files(f.out_dir, resume_step, f.resume);
  if (newer.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < newer.size() && i < 4; ++i) list += (i ? ", " : "") + newer[i];
  if (newer.size() > 4) list += str(", ... (", newer.size(), " files)");
  throw InvalidArgument(str("--resume '", f.resume, "' is at step ", resume_step, " but --out-dir '", f.out_dir,
                            "' holds newer files of that run (", list,
                            ") that resuming would replace: resume into a new folder (--out-dir NEW)"));
}

// A new run into a folder that holds another run would replace its last.h5, best.h5 (even with a
// worse model) and log.csv and leave its step_*.h5 beside the new ones (a 'step_*.h5' glob then
// mixes two models): refused unless --overwrite or the run continues a checkpoint of that folder.
void refuse_other_run(const RunFolder& f, std::int64_t resume_step) {
  const std::vector<std::string> found = earlier_run_files(f.out_dir);
  if (found.empty()) return;
  if (resumes_in_folder(f)) return refuse_rewind(f, resume_step);
  if (f.overwrite) {
    std::size_t steps = 0;
    for (const auto& name : found) steps += is_step_file(name);
    if (steps > 0 && !f.quiet)
      std::cerr << "train: note: --overwrite: " << steps << " step_*.h5 of the earlier run in '" << f.out_dir
                << "' stay beside this run's\n";
    return;
  }
  std::string list;
  for (std::size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", " : "") + found[i];
  if (found.size() > 4) list += ", ...";
  throw InvalidArgument(str("--out-dir '", f.out_dir, "' already holds a run (", list, "); continue it with --resume '",
                            f.out_dir, "/last.h5' --out-dir '", f.out_dir,
                            "', choose another --out-dir, or give --overwrite to replace it"));
}

}  // namespace

bool is_step_file(const std::string& name) {
  return name.rfind("step_", 0) == 0 && name.size() > 8 && name.substr(name.size() - 3) == ".h5";
}

std::vector<std::string> earlier_run_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* f : kRunFiles)
    if (std::filesystem::exists(dir + "/" + f, ec)) found.push_back(f);
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_step_file(it->path().filename().string())) found.push_back(it->path().filename().string());
  return found;
}

void check_run_outputs(const RunFolder& f) {
  app::check_output_dir(f.out_dir, "--out-dir");  // before the run, not after it
  // the report or plot must not land on a file the run writes into --out-dir (the report would
  // replace the checkpoint it names)
  for (const auto& [opt, path] : f.outputs) {
    const FileIdentity id = file_identity(path);
    if (id.kind == FileIdentity::Kind::None) continue;
    const std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    const bool run_file =
        base == "last.h5" || base == "best.h5" || base == "log.csv" || base == "loss.svg" || is_step_file(base);
    require(!run_file || !same_file(id, file_identity(f.out_dir + "/" + base)), opt, " '", path,
            "' is a file train writes into --out-dir '", f.out_dir, "': choose another path");
  }
  // the run's own files in --out-dir are outputs too: none may be an input (issue 29)
  std::vector<std::pair<std::string, std::string>> run_files;
  for (const char* name : kRunFiles) {
    const std::string p = f.out_dir + "/" + name;
    if (!f.resume.empty() && same_file(file_identity(p), file_identity(f.resume))) continue;
    run_files.emplace_back(p, std::string("--out-dir (its ") + name + ")");
  }
  app::check_outputs(run_files, /*probe_writable=*/false);
}

void protect_earlier_run(const RunFolder& f, std::int64_t resume_step) {
  refuse_other_run(f, resume_step);
  // a run file the user made read-only is not replaced (before the work, not at the first save)
  for (const char* name : kRunFiles)
    if (std::error_code ec; std::filesystem::exists(f.out_dir + "/" + name, ec))
      cf::check_output_writable(f.out_dir + "/" + name);
}

}  // namespace cf::nn
