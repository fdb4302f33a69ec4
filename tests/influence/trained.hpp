#pragma once
// Small models trained in-process for the tests of lib/influence (byte level, tests/nn/data).
#include <filesystem>
#include <string>

#include "cf/model/load.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/trainer.hpp"

namespace cf::test {

/// Train a byte model of `n_layer` layers (schedule `attn`, positions `pos`, d_model 16, 2 heads,
/// block 24) for `steps` updates on the tiny test corpus; the model is returned, files removed.
inline nn::Model<float> train_tiny(const std::string& name, const std::string& attn, nn::PosKind pos, int n_layer,
                                   int steps) {
  nn::ModelConfig c;
  c.vocab_size = 256;
  c.block_size = 24;
  c.n_layer = n_layer;
  c.n_head = 2;
  c.d_model = 16;
  c.pos = pos;
  nn::LayerConfig proto;
  proto.b = 6;
  proto.w = 6;
  proto.e = 3;
  c.layers = nn::parse_schedule(attn, n_layer, proto);
  nn::TrainConfig tc;
  tc.out_dir = (std::filesystem::temp_directory_path() / ("cf_influence_" + name)).string();
  tc.max_steps = steps;
  tc.batch = 4;
  tc.seq_len = 24;
  tc.lr = 3e-3;
  tc.warmup = 5;
  tc.eval_interval = steps;
  tc.ckpt_interval = steps;
  tc.eval_batches = 1;
  const nn::TrainData data = nn::load_text_bytes(CF_TEST_CORPUS, 0.2);
  nn::train(c, tc, data, "", nullptr, nullptr);
  nn::Model<float> m = cf::model::load_model(tc.out_dir + "/last.h5");
  std::filesystem::remove_all(tc.out_dir);
  return m;
}

}  // namespace cf::test
