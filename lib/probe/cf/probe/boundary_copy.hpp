#pragma once
// K-way boundary copy (Boundary repair (Yang) §3.3 Theorem 2, Prop. 3; docs/spec.md §1, §5) in next-token framing: the
// readout is input position p, its target is stream token p+1, and the task makes token p+1 equal
// to token p-d (d = 1 is the paper's task). The label (token p-d) is a fresh uniform draw from a
// K-token alphabet and nothing else in the row copies it, so it is independent of every token the
// model may read at p except position p-d itself: a model whose all-layer dependency set R_L(p)
// misses p-d is at chance (1/K) on that readout. Phase r = p mod b.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "cf/data/task_file.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/graph/reachability.hpp"
#include "cf/nn/config.hpp"

namespace cf::probe {

/// Generator parameters. A row has seq_len + 1 tokens (inputs 0..seq_len-1, the last target).
struct BoundaryCopySpec {
  int K = 4;                          ///< alphabet size, >= 2
  int d = 1;                          ///< copy distance, 1 <= d < seq_len - 1
  int b = 4;                          ///< block size defining the phase r = p mod b, >= 1
  int seq_len = 32;                   ///< model sequence length (row_len - 1), >= d + 2
  std::vector<int> phases;            ///< scored phases (each in [0, b)); empty = all
  double readout_rate = 0.5;          ///< probability that an eligible position becomes a readout, (0, 1]
  std::vector<data::Token> alphabet;  ///< the K label tokens (distinct)
  std::vector<data::Token> filler;    ///< token stream for non-label positions; empty = random alphabet tokens
  int vocab_size = 0;                 ///< every token < vocab_size
  std::uint64_t seed = 1;
};

/// Check the spec; throws cf::InvalidArgument naming the field (K < 2, d, b, phases, alphabet size
/// or duplicates, tokens >= vocab_size, filler shorter than a row).
void validate(const BoundaryCopySpec& s);

/// Readout positions of one row, chosen left to right: p is eligible when its phase is scored,
/// p - d >= 0, p <= seq_len - 1 and p - d is not itself the target of an earlier readout (so every
/// label is a fresh draw, never a copy: no chains of copies); an eligible p is taken with
/// probability readout_rate.
std::vector<int> choose_readouts(const BoundaryCopySpec& s, std::uint64_t row_seed);

/// `rows` rows (row i seeded by (seed, first_row + i)): tokens, loss mask (mask[p+1] = 1 for each
/// readout p), deterministic in the spec's seed.
data::TaskSplit generate_boundary_copy(const BoundaryCopySpec& s, int rows, std::uint64_t first_row);

/// The task description stored in the task file's metadata ("name": "boundary-copy", K, d, b,
/// seq_len, phases, readout_rate, alphabet, filler, seed).
nlohmann::json describe(const BoundaryCopySpec& s, const std::string& filler_name);

/// Parse the metadata written by describe() back into a spec (without the filler stream).
BoundaryCopySpec boundary_copy_from_json(const nlohmann::json& task);

/// The mask schedule of a model: one graph::Pattern per layer (block, swa, bridge, pbb, se-bridge
/// with their b, w, e; every other attention kind, runway and S-D included, is full causal).
graph::Schedule model_schedule(const nn::ModelConfig& c);

/// One scored readout of the evaluation.
struct Readout {
  int row = 0, p = 0, phase = 0;
  int label = 0;         ///< index of the label in the alphabet
  int predicted = 0;     ///< argmax over the K alphabet tokens
  double ce = 0;         ///< -log of the label's probability renormalised over the K tokens (nats)
  bool covered = false;  ///< p - d ∈ R_L(p) under the model's schedule
};

/// Per-phase summary with the coverage-limited bound (Prop. 3) and the one-sided exact binomial
/// test of "accuracy > bound".
struct PhaseResult {
  int phase = 0;
  std::int64_t n = 0, correct = 0;
  double accuracy = 0, ce = 0;
  double pi = 0;             ///< covered fraction of this phase's readouts
  double acc_bound = 0;      ///< pi + (1 - pi)/K
  double ce_bound = 0;       ///< (1 - pi) log K
  double p_value = 1;        ///< P(X >= correct | n, acc_bound)
  bool significant = false;  ///< p_value < alpha / (number of phases with readouts)
};

}  // namespace cf::probe
