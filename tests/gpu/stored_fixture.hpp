#pragma once
// Test fixtures for weights kept in their stored dtype (issue 30): a Hugging Face directory copied
// with its tensors rounded to bfloat16 or IEEE half and spread over several shards with an index,
// by a small writer of its own (round to nearest even from the float32 values lib/hf reads; the
// CPU oracle then reads the same bits back exactly). Used by test_analysis_stored_emu.cpp and
// stored_weights_tool.cpp.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/hf/weight_store.hpp"

namespace cf_test_stored {

namespace fs = std::filesystem;

// float -> bfloat16 bits, round to nearest even (finite inputs).
inline std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// float -> IEEE half bits, round to nearest (|f| < 65504; below 2^-14 as subnormals).
inline std::uint16_t to_f16(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<std::uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  long mant = std::lround((2 * m - 1) * 1024);
  int ex = e - 1 + 15;
  if (mant == 1024) mant = 0, ++ex;
  return sign | static_cast<std::uint16_t>(ex << 10) | static_cast<std::uint16_t>(mant);
}

inline std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

struct Tensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};

// The tensor's float32 values in `dtype` ("BF16", "F16" or "F32") as little-endian bytes.
inline Tensor encode(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<float>& v,
                     const std::string& dtype) {
  Tensor t{name, dtype, shape, {}};
  for (float f : v) {
    if (dtype == "F32") {
      char b[4];
      std::memcpy(b, &f, 4);
      t.bytes.append(b, 4);
    } else {
      const std::uint16_t h = dtype == "BF16" ? to_bf16(f) : to_f16(f);
      t.bytes.push_back(static_cast<char>(h & 0xff));
      t.bytes.push_back(static_cast<char>(h >> 8));
    }
  }
  return t;
}

inline void write_shard(const fs::path& p, const std::vector<Tensor>& ts) {
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  const std::string js = h.dump();
  std::ofstream(p, std::ios::binary) << le64(js.size()) << js << data;
}

// Copy `src` (a Hugging Face directory) to `dst` with every tensor in `dtype_of(name)` (BF16, F16,
// F32, or I32 for a refusal test), spread round-robin over `shards` shards (model-0000k-of-
// 0000n.safetensors) with model.safetensors.index.json; config.json (without an export's record of
// its weights) and tokens.txt are copied.
// `keep(name)` false leaves a tensor out.
inline void convert(const std::string& src, const std::string& dst,
                    const std::function<std::string(const std::string&)>& dtype_of, int shards,
                    const std::function<bool(const std::string&)>& keep = {}) {
  fs::remove_all(dst);
  fs::create_directories(dst);
  const cf::hf::WeightStore ws(src);
  std::vector<std::vector<Tensor>> part(static_cast<std::size_t>(shards));
  nlohmann::json wm = nlohmann::json::object();
  std::size_t k = 0;
  for (const cf::hf::StoredTensor& st : ws.tensors()) {
    if (keep && !keep(st.name)) continue;
    const std::string name =
        "model-0000" + std::to_string(k % shards + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    const std::string dt = dtype_of(st.name);
    std::vector<float> v = ws.to_float(st.name);
    if (dt == "I32") {  // the same byte count as F32: only the dtype is wrong
      Tensor t = encode(st.name, st.shape, v, "F32");
      t.dtype = "I32";
      part[k % shards].push_back(t);
    } else {
      part[k % shards].push_back(encode(st.name, st.shape, v, dt));
    }
    wm[st.name] = name;
    ++k;
  }
  for (int s = 0; s < shards; ++s)
    write_shard(
        fs::path(dst) / ("model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors"),
        part[static_cast<std::size_t>(s)]);
  std::ofstream(fs::path(dst) / "model.safetensors.index.json") << nlohmann::json({{"weight_map", wm}}).dump();
  // an export's record of its model.safetensors does not describe these shards
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fs::path(src) / "config.json"));
  cfg.erase("causalflow_weights");
  std::ofstream(fs::path(dst) / "config.json") << cfg.dump(2);
  if (fs::exists(fs::path(src) / "tokens.txt"))
    fs::copy_file(fs::path(src) / "tokens.txt", fs::path(dst) / "tokens.txt");
}

}  // namespace cf_test_stored
