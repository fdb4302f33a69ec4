#pragma once
// Checkpoint series over training (issue 10, "Over training"; Routing/filtering (Jamil & Kapadia) App. D, Position bias
// (Herasimchyk et al.)): the checkpoints kept by `train --keep-every K` (step_XXXXXX.h5) given as a list or a glob,
// ordered by their training step, for tools that plot a metric against the step (influence, spectral). Part of
// lib/model (the one model loader: cf/model/load.hpp reads each entry).
#include <cstdint>
#include <string>
#include <vector>

namespace cf::model {

/// One checkpoint of a series: its path and the training step stored in it (root attribute `step`).
struct CheckpointEntry {
  std::string path;
  std::int64_t step = 0;
};

/// Expand `items` (each a path, a comma-separated list of paths, or a glob pattern with * ? [..])
/// into checkpoints sorted by step, then path. An item (or list part) that exists as a path is
/// taken literally first (file names may hold '[' or ','). The same file named twice (another
/// spelling, a link, a glob overlapping a list) is refused with cf::InvalidArgument naming both. A single checkpoint is
/// returned as given (step 0, its step never read): it may be any model cf::model::load_model reads, a Hugging Face
/// directory included. Throws cf::InvalidArgument naming the item when a pattern matches nothing, or, for several, a
/// file is missing or has no `step` attribute.
std::vector<CheckpointEntry> expand_checkpoints(const std::vector<std::string>& items);

/// The training step stored in a checkpoint (root attribute `step`); throws cf::InvalidArgument.
std::int64_t checkpoint_step(const std::string& path);

}  // namespace cf::model
