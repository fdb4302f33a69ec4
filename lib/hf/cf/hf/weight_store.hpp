#pragma once
// Weights in their stored dtype (issue 30): a Hugging Face checkpoint (model.safetensors, or
// model.safetensors.index.json and its shards) memory-mapped read-only and exposed tensor by tensor
// as {name, dtype, shape, byte span} without any conversion, and streamed shard by shard through a
// caller's staging buffer (on a device a pinned buffer feeding cudaMemcpyAsync; in CI a host sink).
// TensorStore (cf/hf/safetensors.hpp) converts every tensor to float32, so a 7B bf16 model needs
// twice its file size in host memory; staging here holds about one staging buffer of it at a time:
// the mapped pages of each chunk are released (madvise MADV_DONTNEED) as soon as it is copied, so
// they stay in the page cache without being charged to the process. Headers are validated by
// parse_header; the index is checked for shards and tensors it names but that are not there.
// Format and checks: docs/hf.md; memory measurements: docs/gpu.md "Weights in their stored dtype".
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cf/hf/safetensors.hpp"

namespace cf::hf {

/// One tensor as stored: its dtype, shape, shard (index into WeightStore::shards()) and byte range
/// [offset, offset + bytes) in that shard FILE (header included, so offsets are file offsets).
struct StoredTensor {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
  std::size_t shard = 0;
  std::uint64_t offset = 0, bytes = 0;
  /// Number of elements (product of shape; 1 for a scalar).
  std::int64_t numel() const;
};

/// A piece of one tensor handed to a staging sink: `bytes` bytes at `data` (inside the staging
/// buffer) are bytes [tensor_offset, tensor_offset + bytes) of `tensor`, in its stored dtype.
struct StagedChunk {
  const StoredTensor* tensor = nullptr;
  std::uint64_t tensor_offset = 0;
  const std::uint8_t* data = nullptr;
  std::size_t bytes = 0;
};

/// What one staging pass moved.
struct StageStats {
  std::uint64_t bytes = 0;
  std::size_t chunks = 0, tensors = 0, shards = 0;
};

/// Read-only memory-mapped weights of a checkpoint in their stored dtypes.
class WeightStore {
 public:
  /// `path`: a directory (model.safetensors preferred, as transformers does, else
  /// model.safetensors.index.json and its shards) or one .safetensors file (the index or
  /// config.json given as the file is refused, naming the folder to give). Every shard's header
  /// is validated (parse_header: offsets inside the file, size = shape product x dtype size, no
  /// overlap, known dtypes); a tensor in two shards, an index naming a shard that is missing or a
  /// tensor its shard lacks, and a shard name that is not a plain file name are refused with
  /// cf::InvalidArgument naming the file and the tensor.
  explicit WeightStore(const std::string& path);
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  /// Shard file paths, in staging order (sorted by file name: model-00001-of-0000N first; one entry
  /// for a single file).
  const std::vector<std::string>& shards() const { return paths_; }
  /// All tensors, by shard then offset (the order stage() visits them).
  const std::vector<StoredTensor>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  /// Tensor `name` (throws cf::InvalidArgument if absent).
  const StoredTensor& tensor(const std::string& name) const;
  /// Sum of the tensors' stored bytes.
  std::uint64_t total_bytes() const;
  /// The stored bytes of `t` (a pointer into the read-only mapping; touching them maps pages in).
  const std::uint8_t* bytes(const StoredTensor& t) const;
  /// Tensor `name` converted to float32 (F32 copied, F16 and BF16 exactly, F64 rounded), for the
  /// CPU oracle; throws cf::InvalidArgument naming the shard and tensor for other dtypes.
  std::vector<float> to_float(const std::string& name) const;

  using Sink = std::function<void(const StagedChunk&)>;
  /// Copy the tensors called `names` (all tensors when empty; unknown names refused before anything
  /// is copied), shard by shard in file order, into `staging` (`staging_bytes` bytes, > 0) and hand
  /// each fill to `sink`: every chunk is one tensor's bytes, at most `staging_bytes` long, and
  /// `staging` is reused after the sink returns (a device sink must finish or synchronise its copy).
  /// The mapped pages behind each chunk are released once it is copied.
  StageStats stage(const std::vector<std::string>& names, std::uint8_t* staging, std::size_t staging_bytes,
                   const Sink& sink) const;

 private:
  struct Mapping {
    const std::uint8_t* base = nullptr;
    std::size_t size = 0;
  };
  void add_shard(const std::string& path);
  void release(std::size_t shard, std::uint64_t begin, std::uint64_t end) const;

  std::vector<std::string> paths_;
  std::vector<Mapping> maps_;
  std::vector<StoredTensor> tensors_;
  std::map<std::string, std::size_t> by_name_;
};

}  // namespace cf::hf
