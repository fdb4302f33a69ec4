#pragma once
// The stored-dtype loader of the device analysis model (issue 30; docs/gpu.md "Weights in their
// stored dtype"): a Hugging Face directory's tensors, checked against its config.json before any
// device memory is taken, placed by lib/hf's per-tensor mapping (cf/hf/tensor_map.hpp) and staged
// shard by shard through a caller's buffer (cf::hf::WeightStore) into the device model.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cf/gpu/analysis_plan.hpp"
#include "cf/hf/config.hpp"
#include "cf/hf/tensor_map.hpp"
#include "cf/hf/weight_store.hpp"

namespace cf::gpu::stored {

/// A checkpoint ready to stage: its config, the memory-mapped tensors, where each lands, and the
/// plan of a device model holding them (compact offsets: the matrices in `plan.wtype`, the
/// common dtype of the stored matrices, or float32 where they differ; the rest in float32).
struct StoredModel {
  hf::HfConfig hf;
  std::unique_ptr<hf::WeightStore> store;
  std::vector<hf::TensorPiece> pieces;
  std::vector<bool> to_matrix;    ///< per piece: the matrix array (else the float32 array)
  std::vector<std::int64_t> dst;  ///< per piece: first element in its array
  AnalysisPlan plan;
};

/// Open `dir` (config.json and model.safetensors or its index and shards). Throws
/// cf::InvalidArgument naming the directory and tensor for a config the device model does not run,
/// a missing tensor, a shape the config does not imply, or a dtype other than F32, BF16, F16.
StoredModel open_stored(const std::string& dir);

/// Stage every tensor of `m` through `staging` (`bytes`, a multiple of 4) into `place`, one
/// WeightChunk per piece of each staged chunk.
hf::StageStats stage_stored(const StoredModel& m, std::uint8_t* staging, std::size_t bytes,
                            const std::function<void(const WeightChunk&)>& place);

}  // namespace cf::gpu::stored
