#pragma once
// safetensors files (the Hugging Face weight format): an 8-byte little-endian header length N, a
// JSON header of N bytes mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the byte after the header) plus an optional "__metadata__" string map, then
// the raw little-endian tensor bytes. Files are untrusted input: the parser bounds the header size
// and nesting, checks every dtype, shape product (overflow-safe), offset, overlap and the coverage
// of the data region, and throws cf::InvalidArgument naming the file and the field instead of
// reading out of bounds. Reads are memory-mapped; F32, F16 and BF16 convert to float.
// Format and checks: docs/hf.md.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cf::hf {

/// Element types of the safetensors format (all of them parse; F32/F16/BF16/F64 read as float).
enum class Dtype { Bool, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

/// The format's spelling ("F32", "BF16", ...) and its inverse (throws cf::InvalidArgument listing
/// the known names for anything else).
std::string dtype_name(Dtype d);
Dtype parse_dtype(const std::string& s);
/// Bytes per element (1, 2, 4 or 8).
std::size_t dtype_size(Dtype d);

/// One tensor of a header: name, dtype, row-major shape, byte range [begin, end) in the data region.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
  /// Number of elements (product of shape; 1 for a scalar).
  std::int64_t numel() const;
};

/// A validated header: tensors sorted by begin offset, the metadata map, and where the data region
/// starts (8 + N) and how long it is.
struct Header {
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0, data_size = 0;
  /// The tensor called `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;
};

/// Largest header accepted (bytes), as the reference implementation: 100 MB.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

/// Parse and validate the header of a safetensors image of `size` bytes at `data` (the whole file).
/// `label` names the file in messages. Checks: size >= 8; 2 <= N <= kMaxHeaderBytes and
/// 8 + N <= size; the header is a JSON object nested at most 3 levels; every entry other than
/// "__metadata__" (a string -> string object) has exactly the keys dtype (a known name), shape
/// (non-negative integers, product times dtype size without overflow) and data_offsets (two
/// integers begin <= end, end - begin = product x dtype size, end <= data size); the ranges do
/// not overlap and cover the data region exactly. Throws cf::InvalidArgument otherwise; never
/// reads outside [data, data + size).
Header parse_header(const std::uint8_t* data, std::size_t size, const std::string& label);

/// Convert `n` elements of type `d` (F32, F16, BF16 or F64) at `src` (any alignment, little-endian)
/// to float. Throws cf::InvalidArgument for the other dtypes.
void convert_to_float(Dtype d, const std::uint8_t* src, std::size_t n, float* dst);

/// IEEE half and bfloat16 bit patterns to float (exact: every value is representable).
float half_to_float(std::uint16_t h);
float bf16_to_float(std::uint16_t b);

/// A read-only memory-mapped safetensors file with its validated header.
class SafetensorsFile {
 public:
  /// Map and validate `path`; throws cf::InvalidArgument for a missing, unreadable or malformed
  /// file (message names the path and the problem).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const Header& header() const { return header_; }
  /// Raw bytes of tensor `t` (a TensorInfo of this file's header).
  const std::uint8_t* bytes(const TensorInfo& t) const { return base_ + header_.data_start + t.begin; }
  /// Tensor `name` converted to float (row-major); throws cf::InvalidArgument naming the file if it
  /// is absent or of a non-float dtype.
  std::vector<float> read_float(const std::string& name) const;

 private:
  std::string path_;
  const std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
  Header header_;
};

/// All tensors of a checkpoint directory or file: a single `model.safetensors`, or the shards of
/// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}; shard names must be plain
/// file names inside the directory and every mapped tensor must be in its shard). A tensor held by
/// two files is refused as duplicated, naming both.
class TensorStore {
 public:
  /// `path`: a directory (model.safetensors preferred, as transformers does, else
  /// model.safetensors.index.json and its shards) or a .safetensors file. Throws
  /// cf::InvalidArgument naming the path and problem.
  explicit TensorStore(const std::string& path);
  /// Number of values of all tensors (the sum of their shape products): an upper bound on the
  /// parameters a configuration may ask for (checked before anything is allocated).
  std::int64_t total_elements() const;
  /// Whether tensor `name` exists.
  bool has(const std::string& name) const;
  /// Header entry of `name` (throws cf::InvalidArgument if absent).
  const TensorInfo& info(const std::string& name) const;
  /// Tensor `name` as float, checking its shape equals `shape` (throws cf::InvalidArgument naming
  /// the tensor, the stored and the expected shape).
  std::vector<float> read(const std::string& name, const std::vector<std::int64_t>& shape) const;
  /// Names of all tensors (sorted).
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<std::size_t, const TensorInfo*>> index_;
};

/// One float32 tensor to write: name, row-major shape, `shape` product values at `data`.
struct TensorView {
  std::string name;
  std::vector<std::int64_t> shape;
  const float* data = nullptr;
};

/// Serialise tensors as a safetensors image (F32, in the given order, header padded with spaces
/// to a multiple of 8 bytes so every tensor starts 8-byte aligned). Names must be distinct and
/// not "__metadata__" (cf::InvalidArgument).
std::string safetensors_bytes(const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata);

/// Write safetensors_bytes(...) to `path` atomically (cf::write_file_atomic).
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace cf::hf
