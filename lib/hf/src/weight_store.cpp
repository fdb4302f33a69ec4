#include "cf/hf/weight_store.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"

namespace cf::hf {

namespace fs = std::filesystem;

constexpr std::size_t kReleaseStep = std::size_t{1} << 20;

std::int64_t StoredTensor::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

WeightStore::WeightStore(const std::string& path) {
  try {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      const std::string name = fs::path(path).filename().string();
      require(name != "model.safetensors.index.json" && name != "config.json", "'", path,
              "' is not a safetensors file: give the Hugging Face folder itself ('",
              fs::path(path).parent_path().string(), "')");
      add_shard(path);
    } else if (fs::exists(fs::path(path) / "model.safetensors", ec)) {
      // transformers' precedence: the single file first, the index only without it
      add_shard((fs::path(path) / "model.safetensors").string());
    } else {
      const fs::path idx = fs::path(path) / "model.safetensors.index.json";
      require(fs::exists(idx, ec), "checkpoint directory '", path,
              "' has neither model.safetensors nor model.safetensors.index.json");
      const nlohmann::json doc = cf::parse_json_file_text(read_file(idx.string()), idx.string());
      const JsonRef wm = JsonRef(doc, "'" + idx.string() + "'").as_object().at("weight_map").as_object();
      std::map<std::string, std::string> wanted;  // tensor -> shard file name
      std::map<std::string, std::string> first;   // shard file name -> a tensor it should hold
      for (auto it = wm.json().begin(); it != wm.json().end(); ++it) {
        const std::string f = wm.at(it.key()).as_string();
        require(!f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos && f != "." &&
                    f != "..",
                "'", idx.string(), "': shard '", f, "' of tensor '", it.key(),
                "' is not a plain file name inside the checkpoint directory");
        wanted[it.key()] = f;
        first.try_emplace(f, it.key());
      }
      // shards are staged in file-name order (model-00001-of-0000N, ...)
      for (const auto& [f, tensor] : first) {
        const fs::path shard = fs::path(path) / f;
        require(fs::is_regular_file(shard, ec), "'", idx.string(), "' maps tensor '", tensor, "' to shard '", f,
                "' but '", shard.string(), "' is missing or not a regular file");
        add_shard(shard.string());
      }
      for (const auto& [name, f] : wanted) {
        const auto it = by_name_.find(name);
        const bool held = it != by_name_.end() && fs::path(paths_[tensors_[it->second].shard]).filename() == f;
        require(held, "'", idx.string(), "' maps tensor '", name, "' to '", f, "' but that shard does not hold it");
      }
    }
  } catch (...) {
    for (const auto& m : maps_) ::munmap(const_cast<std::uint8_t*>(m.base), m.size);
    throw;
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const StoredTensor& a, const StoredTensor& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.offset < b.offset;
  });
  by_name_.clear();
  for (std::size_t i = 0; i < tensors_.size(); ++i) by_name_[tensors_[i].name] = i;
}

WeightStore::~WeightStore() {
  for (const auto& m : maps_) ::munmap(const_cast<std::uint8_t*>(m.base), m.size);
}

void WeightStore::add_shard(const std::string& path) {
  require_regular_input(path, "safetensors file");  // before open(): a FIFO would block it forever
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  require(fd >= 0, "cannot open safetensors file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 8) {
    ::close(fd);
    throw InvalidArgument(
        str("safetensors '", path, "': file has ", st.st_size, " bytes, fewer than the 8-byte header length"));
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw Error(str("cannot map '", path, "': ", std::strerror(errno)));
  maps_.push_back({static_cast<const std::uint8_t*>(p), size});  // unmapped by the destructor or the ctor's catch
  paths_.push_back(path);
  const std::size_t k = maps_.size() - 1;
  const Header h = parse_header(maps_[k].base, size, path);
  release(k, 0, h.data_start);  // the header's pages are not needed again
  for (const auto& t : h.tensors) {
    const auto [it, fresh] = by_name_.try_emplace(t.name, tensors_.size());
    // a tensor in two shards: which copy is meant is undecidable (not require(): its arguments
    // would index tensors_ with the fresh entry's not-yet-pushed position)
    if (!fresh)
      throw InvalidArgument(str("tensor '", t.name, "' is duplicated: it is in both '",
                                paths_[tensors_[it->second].shard], "' and '", path, "'"));
    tensors_.push_back({t.name, t.dtype, t.shape, k, h.data_start + t.begin, t.end - t.begin});
  }
}

const StoredTensor& WeightStore::tensor(const std::string& name) const {
  const auto it = by_name_.find(name);
  require(it != by_name_.end(), "checkpoint has no tensor '", name, "'");
  return tensors_[it->second];
}

std::uint64_t WeightStore::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& t : tensors_) n += t.bytes;
  return n;
}

const std::uint8_t* WeightStore::bytes(const StoredTensor& t) const { return maps_[t.shard].base + t.offset; }

std::vector<float> WeightStore::to_float(const std::string& name) const {
  const StoredTensor& t = tensor(name);
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  try {
    convert_to_float(t.dtype, bytes(t), out.size(), out.data());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("safetensors '", paths_[t.shard], "': tensor '", name, "': ", e.what()));
  }
  return out;
}

// Drop the process's mapping of the pages covering [begin, end) of a shard: they stay in the page
// cache (not charged as RSS) and fault back in if touched again, so rounding outwards is harmless.
void WeightStore::release(std::size_t shard, std::uint64_t begin, std::uint64_t end) const {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const Mapping& m = maps_[shard];
  const std::uint64_t b = begin / page * page, e = std::min<std::uint64_t>((end + page - 1) / page * page, m.size);
  if (e > b) ::madvise(const_cast<std::uint8_t*>(m.base) + b, e - b, MADV_DONTNEED);
}

StageStats WeightStore::stage(const std::vector<std::string>& names, std::uint8_t* staging, std::size_t staging_bytes,
                              const Sink& sink) const {
  require(staging != nullptr && staging_bytes > 0, "staging buffer must be non-empty");
  std::vector<bool> pick(tensors_.size(), names.empty());
  for (const auto& n : names) {
    const auto it = by_name_.find(n);
    require(it != by_name_.end(), "cannot stage tensor '", n, "': the checkpoint has no such tensor");
    pick[it->second] = true;
  }
  StageStats s;
  std::size_t last_shard = SIZE_MAX;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    if (!pick[i]) continue;
    const StoredTensor& t = tensors_[i];
    if (t.shard != last_shard) ++s.shards, last_shard = t.shard;
    ++s.tensors;
    for (std::uint64_t off = 0; off < t.bytes; off += staging_bytes) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(staging_bytes, t.bytes - off));
      // copied in 1 MiB steps, each step's pages released at once: the mapped pages resident at any
      // time stay about 1 MiB, so the peak is one staging buffer, not two
      for (std::size_t done = 0; done < n; done += kReleaseStep) {
        const std::size_t m = std::min(kReleaseStep, n - done);
        std::memcpy(staging + done, bytes(t) + off + done, m);
        release(t.shard, t.offset + off + done, t.offset + off + done + m);
      }
      sink(StagedChunk{&t, off, staging, n});
      s.bytes += n;
      ++s.chunks;
    }
  }
  return s;
}

}  // namespace cf::hf
