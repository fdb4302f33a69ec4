// Helpers of the stored-dtype CTests (issue 30; docs/gpu.md "Weights in their stored dtype"):
//   stored_weights_tool bf16 SRC DST SHARDS   SRC (a Hugging Face directory) copied with every
//                                             tensor rounded to bfloat16, over SHARDS shards + index
//   stored_weights_tool rss DIR MIB           peak RSS of loading DIR into the emulated stored-dtype
//                                             device model through an MIB-MiB staging buffer; fails
//                                             unless the growth over the baseline stays below the
//                                             weights on the emulated device (host memory here) +
//                                             the staging buffer + 8 MiB, i.e. no float32 copy
#include <cstdio>
#include <iostream>

#include "cf/gpu/analysis_model.hpp"
#include "cf_test/peak_rss.hpp"
#include "stored_fixture.hpp"

namespace {

using cf_test::mib;
using cf_test::peak_rss;

std::uint64_t shard_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") n += e.file_size();
  return n;
}

int rss(const std::string& dir, double staging_mib) {
  const std::uint64_t base = peak_rss(), file = shard_bytes(dir);
  const auto staging = static_cast<std::size_t>(staging_mib * (1 << 20));
  const cf::gpu::AnalysisModel dev(cf::gpu::Placement::Emulated, dir, cf::gpu::default_context(), staging);
  const std::uint64_t grow = peak_rss() - base, held = dev.weight_bytes();
  std::printf(
      "stored-dtype device model: %s matrices, %.1f MiB of weights on the emulated device (%.1f MiB of shards)\n",
      cf::gpu::weight_type_name(dev.weight_type()).c_str(), mib(held), mib(file));
  std::printf(
      "stored-dtype device model: peak RSS %.1f MiB over a baseline of %.1f MiB (bound: weights + %.1f MiB "
      "staging + 8 MiB = %.1f MiB)\n",
      mib(grow), mib(base), staging_mib, mib(held + staging + (std::uint64_t{8} << 20)));
  if (grow >= held + staging + (std::uint64_t{8} << 20)) return std::printf("FAIL: peak over the bound\n"), 1;
  std::printf("rss ok: no float32 copy of the model on the host\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "bf16" && argc == 5) {
      cf_test_stored::convert(
          argv[2], argv[3], [](const std::string&) { return std::string("BF16"); }, std::stoi(argv[4]));
      std::printf("bf16 shards written\n");
      return 0;
    }
    if (mode == "rss" && argc == 4) return rss(argv[2], std::stod(argv[3]));
  } catch (const std::exception& e) {
    std::cerr << "stored_weights_tool: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: stored_weights_tool bf16 SRC DST SHARDS | rss DIR STAGING_MIB\n";
  return 2;
}
