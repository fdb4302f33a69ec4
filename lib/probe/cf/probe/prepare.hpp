#pragma once
// `prepare-data --task NAME`: the task options, their CLI declaration and the writer (the logic
// behind the prepare-data app's task mode; docs/probe.md).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cf/core/output.hpp"

namespace cf::probe {

/// Options of every task (each task reads the ones it documents).
struct TaskOptions {
  std::string task;                ///< "" (no task) | boundary-copy | passkey | ranking
  std::string out;                 ///< output prefix
  std::string corpus;              ///< filler corpus (brown, kjv, FILE); "" = random tokens (boundary-copy)
  std::string tokenizer = "byte";  ///< byte | gpt2 (passkey, ranking, boundary-copy with a corpus)
  std::string gpt2_dir;
  std::uint64_t seed = 1;
  int rows_train = 2000, rows_val = 500;
  // boundary-copy (and b for ranking). b = 0 (and w = 0): the task's default, 4 for boundary-copy
  // and b = w = 32 for ranking (the Boundary repair (Yang) setting; a bridge-window value of 5 byte tokens needs h =
  // w/2 >= 5).
  int K = 4, distance = 1, b = 0, seq_len = 32, alphabet_start = -1;
  std::string phases = "all";
  double readout_rate = 0.5;
  // passkey
  std::string lengths = "128,256", depths = "0,0.25,0.5,0.75,1";
  int reps = 4;
  // ranking
  std::string families = "needle,bridge-window,boundary-tail,semantic-exact,semantic-paraphrase,semantic-distractor";
  int w = 0, context = 64;
  long long max_chars = 2000000;  ///< corpus bytes read for filler
};

/// Declare the task options (--task, --K, --distance, --b, --seq-len, --phases, --readout-rate,
/// --alphabet-start, --rows-train, --rows-val, --seed, --lengths, --depths, --reps, --families,
/// --w, --context) on `app`. --corpus, --tokenizer, --gpt2-dir and --out are shared with the app's
/// corpus mode and bound by the caller.
void add_task_options(CLI::App& app, TaskOptions& o);

/// Generate and write the task files of `o` (cf/data/task_file.hpp); returns the report. Throws
/// cf::InvalidArgument naming the bad option.
output::Report prepare_task(const TaskOptions& o);

/// Parse "all" (-> empty) or a comma list of integers; `what` names the option in errors.
std::vector<int> parse_int_list(const std::string& s, const std::string& what);
/// Parse a comma list of reals.
std::vector<double> parse_real_list(const std::string& s, const std::string& what);

}  // namespace cf::probe
