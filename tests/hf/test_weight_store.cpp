// Weights in their stored dtype (cf/hf/weight_store.hpp, issue 30): a sharded BF16 checkpoint
// written here by a small independent writer (bit patterns chosen by a formula, expected floats from
// the bfloat16 definition evaluated in double, not from the code under test); every tensor's bytes,
// float32 conversion and staged chunks; each corrupt input refused naming the file and the tensor.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "cf/core/error.hpp"
#include "cf/hf/weight_store.hpp"

using namespace cf;
using namespace cf::hf;
namespace fs = std::filesystem;

namespace {

struct Entry {
  std::string name, dtype;  // dtype as the format spells it
  std::vector<std::int64_t> shape;
  std::string bytes;  // stored little-endian bytes
};

// BF16 bit pattern number i of a tensor: spreads over signs, exponents (subnormals included) and
// mantissas; exponent 255 (inf / NaN) is avoided by flipping its top bit.
std::uint16_t bf16_bits(std::uint32_t seed, std::uint32_t i) {
  auto b = static_cast<std::uint16_t>(((i + 1) * 2654435761u + seed * 40503u) >> 9);
  if (((b >> 7) & 0xff) == 0xff) b ^= 0x4000;
  return b;
}

// The bfloat16 value of `b` by its definition (sign, 8-bit exponent with bias 127, 7-bit mantissa).
double bf16_value(std::uint16_t b) {
  const int e = (b >> 7) & 0xff, m = b & 0x7f;
  const double mag = e == 0 ? std::ldexp(double(m), -133) : std::ldexp(1.0 + m / 128.0, e - 127);
  return (b & 0x8000) ? -mag : mag;
}

Entry bf16_entry(const std::string& name, std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  Entry e{name, "BF16", std::move(shape), {}};
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t b = bf16_bits(seed, static_cast<std::uint32_t>(i));
    e.bytes.push_back(static_cast<char>(b & 0xff));
    e.bytes.push_back(static_cast<char>(b >> 8));
  }
  return e;
}

std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// One shard: header (offsets in the given order) then the bytes; `header_fix` may edit the header.
void write_shard(const fs::path& p, const std::vector<Entry>& es,
                 const std::function<void(nlohmann::json&)>& header_fix = {}) {
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& e : es) {
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + e.bytes.size()}}};
    data += e.bytes;
  }
  if (header_fix) header_fix(h);
  const std::string js = h.dump();
  write_text(p, le64(js.size()) + js + data);
}

// The fixture: 3 BF16 shards (one F32 tensor and one scalar among them) and the index.
struct Fixture {
  fs::path dir;
  std::vector<std::vector<Entry>> shards;
  explicit Fixture(const std::string& name) : dir(fs::current_path() / name) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    Entry f32{"model.norm.weight", "F32", {4}, {}};
    for (float v : {1.5f, -0.25f, 3.0f, 65536.f}) f32.bytes.append(reinterpret_cast<const char*>(&v), 4);
    shards = {{bf16_entry("model.embed.weight", {17, 33}, 1), bf16_entry("model.layers.0.bias", {5}, 2)},
              {bf16_entry("model.layers.0.weight", {64, 40}, 3), bf16_entry("model.scale", {}, 4)},
              {bf16_entry("model.layers.1.weight", {3, 7, 11}, 5), f32}};
    nlohmann::json wm = nlohmann::json::object();
    for (std::size_t s = 0; s < shards.size(); ++s) {
      write_shard(dir / shard_name(s), shards[s]);
      for (const auto& e : shards[s]) wm[e.name] = shard_name(s);
    }
    write_text(dir / "model.safetensors.index.json", nlohmann::json({{"weight_map", wm}}).dump());
  }
  ~Fixture() { fs::remove_all(dir); }
  static std::string shard_name(std::size_t s) {
    return "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
  }
  std::string index() const { return (dir / "model.safetensors.index.json").string(); }
  void rewrite_index(const std::function<void(nlohmann::json&)>& edit) const {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(index()));
    edit(j["weight_map"]);
    write_text(index(), j.dump());
  }
};

// The message of the cf::InvalidArgument that opening `dir` throws ("" if it opens).
std::string refusal(const fs::path& dir) {
  try {
    WeightStore ws(dir.string());
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("weight store: sharded bf16 tensors keep their stored bytes and convert exactly to float32", "[hf]") {
  const Fixture fx("ws_fixture");
  const WeightStore ws(fx.dir.string());
  REQUIRE(ws.shards().size() == 3);
  REQUIRE(ws.tensors().size() == 6);
  std::uint64_t total = 0;
  for (std::size_t s = 0; s < 3; ++s)
    for (const auto& e : fx.shards[s]) {
      INFO(e.name);
      const StoredTensor& t = ws.tensor(e.name);
      CHECK(dtype_name(t.dtype) == e.dtype);
      CHECK(t.shape == e.shape);
      CHECK(fs::path(ws.shards()[t.shard]).filename() == Fixture::shard_name(s));
      REQUIRE(t.bytes == e.bytes.size());
      CHECK(std::memcmp(ws.bytes(t), e.bytes.data(), e.bytes.size()) == 0);
      total += e.bytes.size();
      const std::vector<float> f = ws.to_float(e.name);
      REQUIRE(f.size() == static_cast<std::size_t>(t.numel()));
      for (std::size_t i = 0; i < f.size(); ++i) {
        double expect;
        if (e.dtype == "BF16") {
          expect = bf16_value(static_cast<std::uint16_t>(static_cast<std::uint8_t>(e.bytes[2 * i]) |
                                                         (static_cast<std::uint8_t>(e.bytes[2 * i + 1]) << 8)));
        } else {
          float v;
          std::memcpy(&v, e.bytes.data() + 4 * i, 4);
          expect = v;
        }
        REQUIRE(double(f[i]) == expect);
      }
    }
  CHECK(ws.total_bytes() == total);
  CHECK(ws.tensor("model.scale").shape.empty());
  CHECK(ws.tensor("model.scale").numel() == 1);
}

TEST_CASE("weight store: staging walks shards in order in chunks no larger than the buffer", "[hf]") {
  const Fixture fx("ws_stage");
  const WeightStore ws(fx.dir.string());
  for (std::size_t cap : {std::size_t{1}, std::size_t{100}, std::size_t{4096}}) {
    INFO("staging buffer " << cap << " bytes");
    std::vector<std::uint8_t> staging(cap);
    std::map<std::string, std::string> got;
    std::vector<std::size_t> shard_seq;
    const StageStats st = ws.stage({}, staging.data(), cap, [&](const StagedChunk& c) {
      REQUIRE(c.bytes <= cap);
      REQUIRE(c.bytes > 0);
      REQUIRE(c.data == staging.data());
      std::string& s = got[c.tensor->name];
      REQUIRE(c.tensor_offset == s.size());  // a tensor arrives in order
      s.append(reinterpret_cast<const char*>(c.data), c.bytes);
      shard_seq.push_back(c.tensor->shard);
    });
    CHECK(std::is_sorted(shard_seq.begin(), shard_seq.end()));
    CHECK(st.shards == 3);
    CHECK(st.tensors == 6);
    CHECK(st.bytes == ws.total_bytes());
    for (const auto& shard : fx.shards)
      for (const auto& e : shard) CHECK(got.at(e.name) == e.bytes);
    // the store reads the same bytes again after staging released its pages
    const auto& e = fx.shards[1][0];
    CHECK(std::memcmp(ws.bytes(ws.tensor(e.name)), e.bytes.data(), e.bytes.size()) == 0);
  }
  // a chosen subset only, in shard order, and an unknown name refused before anything is staged
  std::vector<std::uint8_t> buf(64);
  std::vector<std::string> seen;
  ws.stage({"model.layers.1.weight", "model.embed.weight"}, buf.data(), buf.size(), [&](const StagedChunk& c) {
    if (c.tensor_offset == 0) seen.push_back(c.tensor->name);
  });
  CHECK(seen == std::vector<std::string>{"model.embed.weight", "model.layers.1.weight"});
  int calls = 0;
  CHECK_THROWS_WITH(
      ws.stage({"model.embed.weight", "nope"}, buf.data(), buf.size(), [&](const StagedChunk&) { ++calls; }),
      Catch::Contains("'nope'"));
  CHECK(calls == 0);
  CHECK_THROWS_AS(ws.stage({}, buf.data(), 0, [](const StagedChunk&) {}), InvalidArgument);
}

TEST_CASE("weight store: a single model.safetensors file or directory opens as one shard", "[hf]") {
  const fs::path d = fs::current_path() / "ws_single";
  fs::remove_all(d);
  fs::create_directories(d);
  write_shard(d / "model.safetensors", {bf16_entry("w", {3, 2}, 9)});
  for (const fs::path& p : {d, d / "model.safetensors"}) {
    const WeightStore ws(p.string());
    CHECK(ws.shards().size() == 1);
    CHECK(ws.to_float("w")[0] == bf16_value(bf16_bits(9, 0)));
  }
  fs::remove_all(d);
}

TEST_CASE("weight store: corrupt shards and indexes are refused naming the file and the tensor", "[hf]") {
  const std::string s2 = Fixture::shard_name(1);
  SECTION("truncated shard") {
    const Fixture fx("ws_bad_trunc");
    fs::resize_file(fx.dir / s2, fs::file_size(fx.dir / s2) - 1);
    const std::string m = refusal(fx.dir);
    CHECK_THAT(m, Catch::Contains(s2) && Catch::Contains("beyond the data region"));
    CHECK_THAT(m, Catch::Contains("'model.scale'"));  // the last tensor of that shard
  }
  SECTION("offset past the end of the file") {
    const Fixture fx("ws_bad_offset");
    write_shard(fx.dir / s2, fx.shards[1], [](nlohmann::json& h) {
      h["model.scale"]["data_offsets"] = {1 << 20, (1 << 20) + 2};
    });
    const std::string m = refusal(fx.dir);
    CHECK_THAT(m, Catch::Contains(s2) && Catch::Contains("'model.scale'") && Catch::Contains("beyond the data region"));
  }
  SECTION("shape that does not match the byte size") {
    const Fixture fx("ws_bad_shape");
    write_shard(fx.dir / s2, fx.shards[1], [](nlohmann::json& h) { h["model.layers.0.weight"]["shape"] = {64, 41}; });
    const std::string m = refusal(fx.dir);
    CHECK_THAT(m, Catch::Contains(s2) && Catch::Contains("'model.layers.0.weight'") &&
                      Catch::Contains("holds 5120 bytes but dtype BF16 x shape [64,41] needs 5248"));
  }
  SECTION("unknown dtype") {
    const Fixture fx("ws_bad_dtype");
    write_shard(fx.dir / s2, fx.shards[1], [](nlohmann::json& h) { h["model.scale"]["dtype"] = "BF17"; });
    CHECK_THAT(refusal(fx.dir),
               Catch::Contains(s2) && Catch::Contains("'model.scale'") && Catch::Contains("unknown dtype 'BF17'"));
  }
  SECTION("overlapping tensors") {
    const Fixture fx("ws_bad_overlap");
    write_shard(fx.dir / s2, fx.shards[1], [](nlohmann::json& h) {
      h["model.scale"]["data_offsets"] = {5118, 5120};  // the last two bytes of the weight
    });
    CHECK_THAT(refusal(fx.dir), Catch::Contains(s2) && Catch::Contains("overlaps the previous tensor"));
  }
  SECTION("index naming a missing shard") {
    const Fixture fx("ws_bad_missing");
    fx.rewrite_index([](nlohmann::json& wm) { wm["model.scale"] = "model-00009-of-00003.safetensors"; });
    const std::string m = refusal(fx.dir);
    CHECK_THAT(m, Catch::Contains("model.safetensors.index.json") && Catch::Contains("'model.scale'") &&
                      Catch::Contains("model-00009-of-00003.safetensors' is missing"));
  }
  SECTION("index naming a tensor its shard lacks") {
    const Fixture fx("ws_bad_lacks");
    fx.rewrite_index([&](nlohmann::json& wm) { wm["model.ghost"] = s2; });
    CHECK_THAT(refusal(fx.dir),
               Catch::Contains("maps tensor 'model.ghost' to '" + s2 + "' but that shard does not hold it"));
  }
  SECTION("index mapping a tensor to the wrong shard") {
    const Fixture fx("ws_bad_wrong");
    fx.rewrite_index([&](nlohmann::json& wm) { wm["model.scale"] = Fixture::shard_name(0); });
    CHECK_THAT(refusal(fx.dir), Catch::Contains("'model.scale'") && Catch::Contains("does not hold it"));
  }
  SECTION("duplicate tensor names across shards") {
    const Fixture fx("ws_bad_dup");
    auto third = fx.shards[2];
    third.push_back(bf16_entry("model.layers.0.bias", {5}, 2));  // also in shard 1
    write_shard(fx.dir / Fixture::shard_name(2), third);
    const std::string m = refusal(fx.dir);
    CHECK_THAT(m, Catch::Contains("'model.layers.0.bias' is duplicated") && Catch::Contains(Fixture::shard_name(0)) &&
                      Catch::Contains(Fixture::shard_name(2)));
  }
  SECTION("shard name that leaves the directory") {
    const Fixture fx("ws_bad_path");
    fx.rewrite_index([](nlohmann::json& wm) { wm["model.scale"] = "../x.safetensors"; });
    CHECK_THAT(refusal(fx.dir), Catch::Contains("'model.scale'") && Catch::Contains("not a plain file name"));
  }
  SECTION("the index given instead of its folder") {
    const Fixture fx("ws_bad_indexfile");
    CHECK_THAT(refusal(fx.index()), Catch::Contains("is not a safetensors file: give the Hugging Face folder itself"));
  }
  SECTION("a directory with no weights") {
    const fs::path d = fs::current_path() / "ws_bad_empty";
    fs::create_directories(d);
    CHECK_THAT(refusal(d), Catch::Contains("neither model.safetensors nor model.safetensors.index.json"));
    fs::remove_all(d);
  }
}

TEST_CASE("weight store: to_float names the shard and tensor for a dtype it cannot convert", "[hf]") {
  const fs::path d = fs::current_path() / "ws_int";
  fs::remove_all(d);
  fs::create_directories(d);
  write_shard(d / "model.safetensors", {{"ids", "I32", {2}, std::string(8, '\1')}});
  const WeightStore ws(d.string());
  CHECK(ws.tensor("ids").bytes == 8);  // stored bytes are still exposed
  CHECK_THROWS_WITH(ws.to_float("ids"), Catch::Contains("model.safetensors") && Catch::Contains("'ids'") &&
                                            Catch::Contains("I32 cannot be read as float"));
  fs::remove_all(d);
}
