// Benchmark (issue 13 acceptance 4): load time of a Hugging Face safetensors checkpoint.
//   bench_hf_load DIR [REPEATS]
// Prints, best of REPEATS (default 3): (a) safetensors: map + validate + every tensor converted to
// float (cf::hf::TensorStore), (b) load_model: the whole import into a cf::nn model (transposes
// included). Run by bench/hf/run_bench.sh beside numpy reading the same bytes.
#include <chrono>
#include <cstdio>
#include <string>

#include "cf/hf/safetensors.hpp"
#include "cf/nn/model.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_hf_load DIR [REPEATS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int reps = argc > 2 ? std::stoi(argv[2]) : 3;
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
    const auto m = cf::nn::load_model(dir);
    auto t2 = clk::now();
    best_st = std::min(best_st, std::chrono::duration<double>(t1 - t0).count());
    best_model = std::min(best_model, std::chrono::duration<double>(t2 - t1).count());
    if (m.params.empty()) return 1;
  }
  std::printf("safetensors_read_s %.4f values %zu\nload_model_s %.4f\n", best_st, values, best_model);
  return 0;
}
