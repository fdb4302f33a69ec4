// Peak host memory of loading a sharded BF16 checkpoint (issue 30 acceptance 1), one process per
// measurement so each peak (VmHWM) is its own:
//   weight_store_rss make DIR             a GPT-2-shaped BF16 checkpoint in 3 shards (~187 MB),
//                                         config.json and the index, written in 1 MiB pieces; the
//                                         expected byte count and checksum go to DIR/expected.txt
//   weight_store_rss stage DIR MB FRAC    WeightStore::stage through an MB-MiB staging buffer into
//                                         a sink that only checksums; fails unless the bytes and
//                                         checksum equal expected.txt and the peak RSS growth over
//                                         the baseline before the load is below FRAC x file size
//                                         and below the staging buffer + 8 MiB
//   weight_store_rss float DIR            the float32 loader (load_hf_model) on the same folder,
//                                         reported for comparison (no bound: it holds 2x the file)
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cf/hf/checkpoint.hpp"
#include "cf/hf/weight_store.hpp"
#include "cf_test/peak_rss.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kLayers = 6, kEmbd = 1024, kVocab = 16384, kPositions = 1024, kShards = 3;

using cf_test::mib;
using cf_test::peak_rss;

struct Spec {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t bytes() const {
    std::uint64_t n = 2;
    for (auto s : shape) n *= static_cast<std::uint64_t>(s);
    return n;
  }
};

std::vector<Spec> gpt2_tensors() {
  const std::int64_t C = kEmbd;
  std::vector<Spec> t = {{"transformer.wte.weight", {kVocab, C}}, {"transformer.wpe.weight", {kPositions, C}}};
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    for (Spec s : std::vector<Spec>{{"ln_1.weight", {C}},
                                    {"ln_1.bias", {C}},
                                    {"attn.c_attn.weight", {C, 3 * C}},
                                    {"attn.c_attn.bias", {3 * C}},
                                    {"attn.c_proj.weight", {C, C}},
                                    {"attn.c_proj.bias", {C}},
                                    {"ln_2.weight", {C}},
                                    {"ln_2.bias", {C}},
                                    {"mlp.c_fc.weight", {C, 4 * C}},
                                    {"mlp.c_fc.bias", {4 * C}},
                                    {"mlp.c_proj.weight", {4 * C, C}},
                                    {"mlp.c_proj.bias", {C}}}) {
      s.name = p + s.name;
      t.push_back(s);
    }
  }
  t.push_back({"transformer.ln_f.weight", {C}});
  t.push_back({"transformer.ln_f.bias", {C}});
  return t;
}

// Small finite BF16 values (|x| < 2): exponent 112..127, any sign and mantissa.
std::uint16_t value_bits(std::uint64_t i) {
  const std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
  return static_cast<std::uint16_t>(((h >> 40) & 0x807f) | ((112 + ((h >> 20) & 15)) << 7));
}

int make(const fs::path& dir) {
  fs::create_directories(dir);
  const auto specs = gpt2_tensors();
  std::uint64_t total = 0;
  for (const auto& s : specs) total += s.bytes();
  std::uint64_t checksum = 0, element = 0;
  nlohmann::json wm = nlohmann::json::object();
  std::size_t next = 0;
  for (int k = 0; k < kShards; ++k) {
    // tensors in file order until the shard holds its third of the bytes
    std::vector<Spec> mine;
    std::uint64_t bytes = 0;
    while (next < specs.size() && (k == kShards - 1 || bytes < total / kShards)) {
      bytes += specs[next].bytes();
      mine.push_back(specs[next++]);
    }
    const std::string name =
        "model-0000" + std::to_string(k + 1) + "-of-0000" + std::to_string(kShards) + ".safetensors";
    nlohmann::json h = nlohmann::json::object();
    std::uint64_t off = 0;
    for (const auto& s : mine) {
      h[s.name] = {{"dtype", "BF16"}, {"shape", s.shape}, {"data_offsets", {off, off + s.bytes()}}};
      off += s.bytes();
      wm[s.name] = name;
    }
    const std::string js = h.dump();
    std::ofstream out(dir / name, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((js.size() >> (8 * i)) & 0xff));
    out << js;
    std::vector<std::uint16_t> buf(1 << 19);  // 1 MiB: the writer stays small in memory
    for (std::uint64_t left = bytes / 2; left > 0;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
      for (std::size_t i = 0; i < n; ++i) checksum += buf[i] = value_bits(element++);
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(2 * n));
      left -= n;
    }
    if (!out) return std::cerr << "cannot write " << (dir / name) << "\n", 1;
  }
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json({{"weight_map", wm}}).dump();
  std::ofstream(dir / "config.json") << nlohmann::json({{"model_type", "gpt2"},
                                                        {"vocab_size", kVocab},
                                                        {"n_embd", kEmbd},
                                                        {"n_layer", kLayers},
                                                        {"n_head", 16},
                                                        {"n_positions", kPositions}})
                                            .dump();
  std::ofstream(dir / "expected.txt") << total << " " << checksum << "\n";
  std::cout << "fixture: " << kShards << " BF16 shards, " << mib(total) << " MiB of tensors\n";
  return 0;
}

std::uint64_t shard_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") n += e.file_size();
  return n;
}

int stage(const fs::path& dir, double staging_mib, double frac) {
  const std::uint64_t file = shard_bytes(dir), base = peak_rss();
  std::uint64_t want_bytes = 0, want_sum = 0;
  std::ifstream(dir / "expected.txt") >> want_bytes >> want_sum;
  const cf::hf::WeightStore ws(dir.string());
  std::vector<std::uint8_t> staging(static_cast<std::size_t>(staging_mib * (1 << 20)));
  std::uint64_t sum = 0;
  const auto st = ws.stage({}, staging.data(), staging.size(), [&](const cf::hf::StagedChunk& c) {
    for (std::size_t i = 0; i + 1 < c.bytes; i += 2)
      sum += static_cast<std::uint16_t>(c.data[i] | (c.data[i + 1] << 8));
  });
  const std::uint64_t grow = peak_rss() - base;
  std::printf("stage: %zu shards, %zu tensors, %zu chunks, %.1f MiB staged through a %.1f MiB buffer\n", st.shards,
              st.tensors, st.chunks, mib(st.bytes), staging_mib);
  std::printf(
      "stage: peak RSS %.1f MiB over a baseline of %.1f MiB = %.1f%% of the %.1f MiB of shards (bound %.0f%%)\n",
      mib(grow), mib(base), 100.0 * static_cast<double>(grow) / static_cast<double>(file), mib(file), 100 * frac);
  if (st.bytes != want_bytes || sum != want_sum)
    return std::printf("FAIL: staged %llu bytes, checksum %llu; expected %llu, %llu\n",
                       static_cast<unsigned long long>(st.bytes), static_cast<unsigned long long>(sum),
                       static_cast<unsigned long long>(want_bytes), static_cast<unsigned long long>(want_sum)),
           1;
  if (static_cast<double>(grow) >= frac * static_cast<double>(file)) return std::printf("FAIL: peak over bound\n"), 1;
  // about one staging buffer: the mapped pages are released as they are copied (a few MiB of
  // allocator and header overhead on top)
  if (grow >= staging.size() + (std::uint64_t{8} << 20))
    return std::printf("FAIL: peak over the staging buffer + 8 MiB\n"), 1;
  std::printf("stage ok: bytes and checksum equal the writer's\n");
  return 0;
}

int load_float(const fs::path& dir) {
  const std::uint64_t file = shard_bytes(dir), base = peak_rss();
  const auto m = cf::hf::load_hf_model(dir.string());
  const std::uint64_t grow = peak_rss() - base;
  std::printf(
      "float32 loader: %zu parameters, peak RSS %.1f MiB over a baseline of %.1f MiB = %.1f%% of the %.1f MiB "
      "of shards\n",
      m.params.size(), mib(grow), mib(base), 100.0 * static_cast<double>(grow) / static_cast<double>(file), mib(file));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[1] : "";
  try {
    if (mode == "make" && argc == 3) return make(argv[2]);
    if (mode == "stage" && argc == 5) return stage(argv[2], std::stod(argv[3]), std::stod(argv[4]));
    if (mode == "float" && argc == 3) return load_float(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "weight_store_rss: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: weight_store_rss make DIR | stage DIR STAGING_MIB MAX_FRACTION | float DIR\n";
  return 2;
}
