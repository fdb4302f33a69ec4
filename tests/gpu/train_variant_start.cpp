// Writes the starting point of tests/gpu/train_device_emu_variants.sh: one CPU training step
// (cf::nn::train) of a model whose norm / MLP / residual options the `train` command line does not
// expose (RMSNorm at eps 1e-6, SwiGLU, parallel residual, as in the Llama and GPT-NeoX families),
// on the byte data of a text file read as `train --text` reads it, so that `train --resume` can
// continue it on the CPU and on the device trainer. Usage: train_variant_start TEXT OUT_DIR [llama]
// (writes OUT_DIR/last.h5 at step 1 of a 4-step schedule; OUT_DIR must not exist). `llama`: a
// Llama-like block instead, for tests/gpu/train_device_emu_attn.sh: RoPE, grouped-query attention
// (2 key/value heads of 4), RMSNorm, SwiGLU, no biases.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "cf/nn/config.hpp"
#include "cf/nn/trainer.hpp"

int main(int argc, char** argv) {
  const bool llama = argc == 4 && std::string(argv[3]) == "llama";
  if (argc != 3 && !llama) {
    std::fprintf(stderr, "usage: train_variant_start TEXT OUT_DIR [llama]\n");
    return 2;
  }
  const std::string out = argv[2];
  if (std::filesystem::exists(out)) {
    std::fprintf(stderr, "train_variant_start: %s exists (never overwritten)\n", out.c_str());
    return 2;
  }
  try {
    using namespace cf::nn;
    ModelConfig c;
    c.vocab_size = 256;
    c.block_size = 64;
    c.n_layer = 2;
    c.n_head = 2;
    c.d_model = 16;
    c.norm = NormKind::RMSNorm;
    c.arch.norm_eps = 1e-6;
    c.arch.mlp = MlpKind::SwiGLU;
    c.arch.parallel_residual = true;
    LayerConfig p;
    p.b = 12, p.w = 10;
    c.layers = parse_schedule("swa,bridge", c.n_layer, p);
    if (llama) {
      c.n_head = 4;
      c.arch.n_kv_head = 2;
      c.pos = PosKind::Rope;
      c.arch.parallel_residual = false;
      c.bias = c.proj_bias = c.arch.mlp_bias = false;
      c.layers = parse_schedule("full,swa", c.n_layer, p);
    }
    TrainConfig tc;
    tc.max_steps = 4;
    tc.stop_after = 1;
    tc.batch = 2;
    tc.seq_len = 37;
    tc.warmup = 1;
    tc.lr = 1e-2;
    tc.eval_interval = 3;
    tc.eval_batches = 1;
    tc.out_dir = out;
    train(c, tc, load_text_bytes(argv[1], 0.1), "", nullptr, nullptr);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_variant_start: %s\n", e.what());
    return 2;
  }
}
