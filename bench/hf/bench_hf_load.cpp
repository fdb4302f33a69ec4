// Benchmark (issue 13 acceptance 4): load time of a Hugging Face safetensors checkpoint.
//   bench_hf_load DIR [REPEATS]
// Prints, best of REPEATS (default 3): (a) safetensors: map + validate + every tensor converted to
// float (cf::hf::TensorStore), (b) load_model: the whole import into a cf::nn model (transposes
// included). Run by bench/hf/run_bench.sh beside numpy reading the same bytes.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "cf/core/app.hpp"
#include "cf/core/error.hpp"
#include "cf/hf/safetensors.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/model.hpp"

namespace {

int bench(const std::string& dir, int reps) {
  using clk = std::chrono::steady_clock;
  double best_st = 1e30, best_model = 1e30;
  std::size_t values = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clk::now();
    {
      const cf::hf::TensorStore st(dir);
      values = 0;
      for (const auto& n : st.names()) values += st.read(n, st.info(n).shape).size();
    }
    auto t1 = clk::now();
    const auto m = cf::model::load_model(dir);
    auto t2 = clk::now();
    best_st = std::min(best_st, std::chrono::duration<double>(t1 - t0).count());
    best_model = std::min(best_model, std::chrono::duration<double>(t2 - t1).count());
    if (m.params.empty()) return 1;
  }
  std::printf("safetensors_read_s %.4f values %zu\nload_model_s %.4f\n", best_st, values, best_model);
  return 0;
}

}  // namespace

// Command line through CLI11 and cf::app::run like the tools: --help exits 0, unknown options and
// bad numbers exit 2.
int main(int argc, char** argv) {
  CLI::App app{"Load time of a Hugging Face safetensors checkpoint (issue 13); not a test", "bench_hf_load"};
  std::string dir;
  int reps = 3;
  app.add_option("DIR", dir, "checkpoint folder (config.json + *.safetensors)");
  app.add_option("REPEATS", reps, "best of this many runs")->check(CLI::Range(1, 1000))->capture_default_str();
  int rc = 0;
  const int code = cf::app::run(app, argc, argv, [&] {
    if (dir.empty()) throw cf::InvalidArgument("DIR is required (a checkpoint folder)");
    rc = bench(dir, reps);
  });
  return code != 0 ? code : rc;
}
