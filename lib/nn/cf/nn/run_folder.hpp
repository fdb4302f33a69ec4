#pragma once
// The run folder of `train` (--out-dir): the files a run writes there (last.h5, best.h5, log.csv,
// loss.svg, step_*.h5) and the checks that keep a run from replacing another run, an input or a
// newer part of its own history (issue 29; docs/trainer.md). Each check throws
// cf::InvalidArgument (exit 2) naming the option and the file.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cf::nn {

/// Whether `name` is a step_NNNNNN.h5, the checkpoints --keep-every leaves in a run folder.
bool is_step_file(const std::string& name);

/// The files of an earlier run in `dir` (last.h5, best.h5, log.csv, loss.svg, step_*.h5), by name.
std::vector<std::string> earlier_run_files(const std::string& dir);

/// What the run-folder checks read of a train command line.
struct RunFolder {
  std::string out_dir;  ///< --out-dir
  std::string resume;   ///< --resume (empty: a fresh run)
  bool overwrite = false;
  bool quiet = false;
  /// (option, path) of the report and plot files (empty paths are skipped)
  std::vector<std::pair<std::string, std::string>> outputs;
};

/// Before the run: --out-dir can be created and written, neither the report nor the plot lands on
/// a file the run writes into --out-dir, and none of the run's own files is an input (train --text
/// r/log.csv --out-dir r --overwrite replaced the corpus with the log; the resumed checkpoint is
/// the one input a run continues in place).
void check_run_outputs(const RunFolder& f);

/// Once the folder is locked: a new run into a folder that holds another run is refused unless
/// --overwrite (which notes the step_*.h5 that stay), or unless the run continues a checkpoint of
/// that folder at `resume_step`; a rewind to an older checkpoint of the folder that would replace
/// newer files of the run is refused even with --overwrite. Then every run file the user made
/// read-only is refused before the work, not at the first save.
void protect_earlier_run(const RunFolder& f, std::int64_t resume_step);

}  // namespace cf::nn
