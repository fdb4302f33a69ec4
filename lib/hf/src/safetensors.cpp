#include "cf/hf/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"

namespace cf::hf {

namespace {

struct DtypeRow {
  Dtype d;
  const char* name;
  std::size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {Dtype::Bool, "BOOL", 1},       {Dtype::U8, "U8", 1},   {Dtype::I8, "I8", 1},   {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::I16, "I16", 2}, {Dtype::U16, "U16", 2}, {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},       {Dtype::I32, "I32", 4}, {Dtype::U32, "U32", 4}, {Dtype::F32, "F32", 4},
    {Dtype::F64, "F64", 8},         {Dtype::I64, "I64", 8}, {Dtype::U64, "U64", 8}};

std::uint64_t read_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::uint64_t as_u64(const nlohmann::json& v, const std::string& label, const std::string& what) {
  require(v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0), "safetensors '", label,
          "': ", what, " must be a non-negative integer (got ", v.dump(), ")");
  return v.get<std::uint64_t>();
}

}  // namespace

std::string dtype_name(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.d == d) return r.name;
  return "?";
}

Dtype parse_dtype(const std::string& s) {
  for (const auto& r : kDtypes)
    if (s == r.name) return r.d;
  std::string known;
  for (const auto& r : kDtypes) known += std::string(known.empty() ? "" : ", ") + r.name;
  throw InvalidArgument(str("unknown dtype '", s, "' (known: ", known, ")"));
}

std::size_t dtype_size(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.d == d) return r.size;
  return 1;
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

const TensorInfo* Header::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Header parse_header(const std::uint8_t* data, std::size_t size, const std::string& label) {
  require(size >= 8, "safetensors '", label, "': file has ", size, " bytes, fewer than the 8-byte header length");
  const std::uint64_t n = read_le64(data);
  require(n <= kMaxHeaderBytes, "safetensors '", label, "': header length ", n, " exceeds the limit of ",
          kMaxHeaderBytes, " bytes (oversized or corrupt header)");
  require(n >= 2, "safetensors '", label, "': header length ", n, " is too small for a JSON object");
  require(n <= size - 8, "safetensors '", label, "': header length ", n, " runs past the end of the file (", size,
          " bytes): truncated file");
  const char* hs = reinterpret_cast<const char*>(data + 8);
  require(hs[0] == '{', "safetensors '", label, "': header does not start with '{'");
  // a header needs 3 levels (root, entry, shape); unbounded nesting is a stack/time hazard
  check_json_nesting(std::string_view(hs, static_cast<std::size_t>(n)), 3, "safetensors header of " + label);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(hs, hs + n);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("safetensors '", label, "': header is not valid JSON (", e.what(), ")"));
  }
  require(j.is_object(), "safetensors '", label, "': header is not a JSON object");
  Header h;
  h.data_start = 8 + n;
  h.data_size = size - h.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      require(v.is_object(), "safetensors '", label, "': __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        require(m.value().is_string(), "safetensors '", label, "': __metadata__ value of '", m.key(),
                "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    require(v.is_object(), "safetensors '", label, "': ", where, " is not an object");
    for (auto k = v.begin(); k != v.end(); ++k)
      require(k.key() == "dtype" || k.key() == "shape" || k.key() == "data_offsets", "safetensors '", label,
              "': ", where, " has unknown field '", k.key(), "'");
    require(v.contains("dtype") && v["dtype"].is_string(), "safetensors '", label, "': ", where,
            " lacks a string dtype");
    require(v.contains("shape") && v["shape"].is_array(), "safetensors '", label, "': ", where, " lacks a shape array");
    require(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
            "safetensors '", label, "': ", where, " needs data_offsets [begin, end]");
    TensorInfo t;
    t.name = name;
    try {
      t.dtype = parse_dtype(v["dtype"].get<std::string>());
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(str("safetensors '", label, "': ", where, ": ", e.what()));
    }
    std::uint64_t bytes = dtype_size(t.dtype);
    for (const auto& s : v["shape"]) {
      const std::uint64_t d = as_u64(s, label, where + " shape entry");
      std::uint64_t prod = 0;
      require(!__builtin_mul_overflow(bytes, d, &prod) && prod <= static_cast<std::uint64_t>(INT64_MAX),
              "safetensors '", label, "': ", where, " shape ", v["shape"].dump(), " overflows 64-bit sizes");
      bytes = prod;
      t.shape.push_back(static_cast<std::int64_t>(d));
    }
    t.begin = as_u64(v["data_offsets"][0], label, where + " data_offsets[0]");
    t.end = as_u64(v["data_offsets"][1], label, where + " data_offsets[1]");
    require(t.begin <= t.end, "safetensors '", label, "': ", where, " data_offsets [", t.begin, ", ", t.end,
            "] end before begin");
    require(t.end <= h.data_size, "safetensors '", label, "': ", where, " data_offsets end ", t.end,
            " beyond the data region of ", h.data_size, " bytes (truncated file?)");
    require(t.end - t.begin == bytes, "safetensors '", label, "': ", where, " holds ", t.end - t.begin,
            " bytes but dtype ", dtype_name(t.dtype), " x shape ", v["shape"].dump(), " needs ", bytes);
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t pos = 0;
  for (const auto& t : h.tensors) {
    require(t.begin >= pos, "safetensors '", label, "': tensor '", t.name, "' [", t.begin, ", ", t.end,
            ") overlaps the previous tensor (ends at ", pos, ")");
    require(t.begin == pos, "safetensors '", label, "': bytes [", pos, ", ", t.begin,
            ") of the data region belong to no tensor (gap before '", t.name, "')");
    pos = t.end;
  }
  require(pos == h.data_size, "safetensors '", label, "': data region has ", h.data_size,
          " bytes but the tensors cover ", pos, " (trailing bytes or truncated header)");
  return h;
}

float half_to_float(std::uint16_t hbits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(hbits & 0x8000u) << 16;
  std::uint32_t exp = (hbits >> 10) & 0x1f, man = hbits & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void convert_to_float(Dtype d, const std::uint8_t* src, std::size_t n, float* dst) {
  if (n == 0 && (d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16 || d == Dtype::F64))
    return;  // empty tensor: dst may be null (found by fuzz_safetensors: memcpy(nullptr, ..., 0) is UB)
  switch (d) {
    case Dtype::F32:
      std::memcpy(dst, src, n * 4);  // little-endian host (x86-64, aarch64)
      return;
    case Dtype::F16:
      for (std::size_t i = 0; i < n; ++i)
        dst[i] = half_to_float(static_cast<std::uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    case Dtype::BF16:
      for (std::size_t i = 0; i < n; ++i)
        dst[i] = bf16_to_float(static_cast<std::uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    case Dtype::F64:
      for (std::size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    default:
      throw InvalidArgument(str("dtype ", dtype_name(d), " cannot be read as float (supported: F32, F16, BF16, F64)"));
  }
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  require_regular_input(path, "safetensors file");  // before open(): a FIFO would block it forever
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  require(fd >= 0, "cannot open safetensors file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InvalidArgument(str("'", path, "' is not a regular file"));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw InvalidArgument(
        str("safetensors '", path, "': file has ", size_, " bytes, fewer than the 8-byte header length"));
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw Error(str("cannot map '", path, "': ", std::strerror(errno)));
  base_ = static_cast<const std::uint8_t*>(p);
  try {
    header_ = parse_header(base_, size_, path);
  } catch (...) {
    ::munmap(const_cast<std::uint8_t*>(base_), size_);
    base_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (base_) ::munmap(const_cast<std::uint8_t*>(base_), size_);
}

std::vector<float> SafetensorsFile::read_float(const std::string& name) const {
  const TensorInfo* t = header_.find(name);
  require(t != nullptr, "safetensors '", path_, "' has no tensor '", name, "'");
  std::vector<float> out(static_cast<std::size_t>(t->numel()));
  try {
    convert_to_float(t->dtype, bytes(*t), out.size(), out.data());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("safetensors '", path_, "': tensor '", name, "': ", e.what()));
  }
  return out;
}

TensorStore::TensorStore(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto add_file = [&](const fs::path& p) {
    files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
    const std::size_t k = files_.size() - 1;
    for (const auto& t : files_[k]->header().tensors) {
      const auto [it, fresh] = index_.try_emplace(t.name, k, &t);
      // a tensor in two shards: which copy is meant is undecidable (it was reported as missing)
      require(fresh, "tensor '", t.name, "' is duplicated: it is in both '", files_[it->second.first]->path(),
              "' and '", p.string(), "'");
    }
  };
  if (!fs::is_directory(path, ec)) {
    const std::string name = fs::path(path).filename().string();
    require(name != "model.safetensors.index.json" && name != "config.json", "'", path,
            "' is not a safetensors file: give the Hugging Face folder itself (--checkpoint '",
            fs::path(path).parent_path().string(), "')");
    add_file(path);
    return;
  }
  const fs::path dir(path);
  // transformers' precedence (modeling_utils): the single model.safetensors first, the index of
  // shards only without it. causalflow read the shards where transformers reads the single file.
  const fs::path single = dir / "model.safetensors";
  if (fs::exists(single, ec)) {
    add_file(single);
    return;
  }
  const fs::path idx = dir / "model.safetensors.index.json";
  if (fs::exists(idx, ec)) {
    const nlohmann::json doc = cf::parse_json_file_text(read_file(idx.string()), idx.string());
    const JsonRef j(doc, "'" + idx.string() + "'");
    const JsonRef wm = j.as_object().at("weight_map").as_object();
    std::map<std::string, std::size_t> shard;
    std::map<std::string, std::string> wanted;
    for (auto it = wm.json().begin(); it != wm.json().end(); ++it) {
      const std::string f = wm.at(it.key()).as_string();
      require(
          !f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos && f != "." && f != "..",
          "'", idx.string(), "': shard '", f, "' is not a plain file name inside the checkpoint directory");
      wanted[it.key()] = f;
      if (!shard.count(f)) {
        add_file(dir / f);
        shard[f] = files_.size() - 1;
      }
    }
    for (const auto& [name, f] : wanted) {
      const auto it = index_.find(name);
      require(it != index_.end() && it->second.first == shard[f], "'", idx.string(), "' maps tensor '", name, "' to '",
              f, "' but that shard does not hold it");
    }
    return;
  }
  throw InvalidArgument(
      str("checkpoint directory '", path, "' has neither model.safetensors nor model.safetensors.index.json"));
}

std::int64_t TensorStore::total_elements() const {
  std::int64_t n = 0;
  for (const auto& kv : index_) n += kv.second.second->numel();
  return n;
}

bool TensorStore::has(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo& TensorStore::info(const std::string& name) const {
  const auto it = index_.find(name);
  require(it != index_.end(), "checkpoint has no tensor '", name, "'");
  return *it->second.second;
}

std::vector<float> TensorStore::read(const std::string& name, const std::vector<std::int64_t>& shape) const {
  const auto it = index_.find(name);
  require(it != index_.end(), "checkpoint has no tensor '", name, "'");
  const SafetensorsFile& f = *files_[it->second.first];
  const TensorInfo& t = *it->second.second;
  auto shape_str = [](const std::vector<std::int64_t>& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  };
  require(t.shape == shape, "safetensors '", f.path(), "': tensor '", name, "' has shape ", shape_str(t.shape),
          ", expected ", shape_str(shape));
  return f.read_float(name);
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> r;
  for (const auto& kv : index_) r.push_back(kv.first);
  return r;
}

std::string safetensors_bytes(const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::uint64_t pos = 0;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    require(t.name != "__metadata__" && !t.name.empty(), "tensor name '", t.name, "' is reserved or empty");
    require(seen.insert(t.name).second, "duplicate tensor name '", t.name, "'");
    std::int64_t n = 1;
    for (auto s : t.shape) {
      require(s >= 0, "tensor '", t.name, "' has a negative dimension");
      n *= s;
    }
    const std::uint64_t bytes = static_cast<std::uint64_t>(n) * 4;
    h[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {pos, pos + bytes}}};
    pos += bytes;
  }
  std::string js = h.dump();
  js.append((8 - js.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + js.size() + pos);
  const std::uint64_t n = js.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += js;
  for (const auto& t : tensors) {
    std::int64_t cnt = 1;
    for (auto s : t.shape) cnt *= s;
    out.append(reinterpret_cast<const char*>(t.data), static_cast<std::size_t>(cnt) * 4);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace cf::hf
