// Helpers of the stored-dtype CTests (issue 30; docs/gpu.md "Weights in their stored dtype"):
//   stored_weights_tool bf16 SRC DST SHARDS   SRC (a Hugging Face directory) copied with every
//                                             tensor rounded to bfloat16, over SHARDS shards + index
//   stored_weights_tool rss DIR MIB           peak RSS of loading DIR into the emulated stored-dtype
//                                             device model through an MIB-MiB staging buffer; fails
//                                             unless the growth over the baseline stays below the
//                                             weights on the emulated device (host memory here) +
//                                             the staging buffer + 8 MiB, i.e. no float32 copy
//   stored_weights_tool tool-rss DIR SLACK_MIB -- TOOL ARGS...
//                                             peak RSS of a whole analyser run on DIR (TOOL ARGS,
//                                             e.g. CF_GPU_EMULATE=1 probe ... --device cuda) over
//                                             the same binary's `TOOL --help`; fails unless it stays
//                                             below the weights on the emulated device + its
//                                             float32 GEMM scratch + the tool's 16 MiB staging
//                                             buffer + SLACK_MIB, a bound itself below the float32
//                                             model
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cf/gpu/analysis_model.hpp"
#include "cf/nn/params.hpp"
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

// Peak RSS (bytes) of `argv` run as a child, its stdout to /dev/null; -1 if it does not exit 0. The
// child's ru_maxrss counts this process's pages before the exec too: call before any large allocation.
long long child_peak_rss(char** argv) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen("/dev/null", "w", stdout)) _exit(127);
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return static_cast<long long>(ru.ru_maxrss) * 1024;  // KiB on Linux
}

int tool_rss(const std::string& dir, double slack_mib, char** cmd) {
  char* help[] = {cmd[0], const_cast<char*>("--help"), nullptr};
  const long long base = child_peak_rss(help), peak = child_peak_rss(cmd);
  if (base < 0 || peak < 0) return std::printf("FAIL: %s did not run (exit status not 0)\n", cmd[0]), 1;
  // what the emulated device holds (host memory here), measured after the runs: the weights, and
  // the float32 scratch a GEMM's matrix is widened into, at most the largest matrix of this
  // GPT-2-shaped folder (wte / the head [V, C] or c_fc [4C, C])
  const cf::gpu::AnalysisModel dev(cf::gpu::Placement::Emulated, dir);
  const cf::nn::ModelConfig c = cf::gpu::hf_model_config(dir);
  const std::uint64_t held = dev.weight_bytes(), staging = std::uint64_t{16} << 20;
  const std::uint64_t wide = static_cast<std::uint64_t>(std::max(c.vocab_size, 4 * c.d_model)) * c.d_model * 4;
  const std::uint64_t float_model = static_cast<std::uint64_t>(cf::nn::make_layout(c).total) * sizeof(float);
  const std::uint64_t bound = held + wide + staging + static_cast<std::uint64_t>(slack_mib * (1 << 20));
  const double grow = mib(static_cast<std::uint64_t>(peak - base));
  std::printf("%s: peak RSS %.1f MiB, %.1f MiB over `--help` (%.1f MiB)\n", cmd[0], mib(peak), grow, mib(base));
  std::printf(
      "bound: %.1f MiB of %s weights on the emulated device + %.1f MiB float32 GEMM scratch + 16 MiB staging + "
      "%.0f MiB = %.1f MiB; the float32 model alone: %.1f MiB\n",
      mib(held), cf::gpu::weight_type_name(dev.weight_type()).c_str(), mib(wide), slack_mib, mib(bound),
      mib(float_model));
  if (bound >= float_model) return std::printf("FAIL: the bound does not exclude a float32 copy\n"), 1;
  if (static_cast<std::uint64_t>(peak - base) >= bound) return std::printf("FAIL: peak over the bound\n"), 1;
  std::printf("tool rss ok: no float32 copy of the model on the host\n");
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
    if (mode == "tool-rss" && argc >= 6 && std::string(argv[4]) == "--")
      return tool_rss(argv[2], std::stod(argv[3]), argv + 5);
  } catch (const std::exception& e) {
    std::cerr << "stored_weights_tool: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: stored_weights_tool bf16 SRC DST SHARDS | rss DIR STAGING_MIB | tool-rss DIR SLACK_MIB -- TOOL "
               "ARGS...\n";
  return 2;
}
