// Runway (Lee & Clark) §5.3 / App. C.2 on small models (issue 11): standard causal attention vs runway-aware
// rewiring (dot and bilinear, docs/spec.md §4) trained on the same passkey rows (Brown filler, byte
// tokens, loss on the five answer digits only), then exact-match passkey retrieval over context
// length x depth with greedy decoding, heatmaps side by side, the depth curve, and paired McNemar
// / bootstrap of standard vs each rewired model on the same items. Reports what it finds.
//
// Usage: nb_runway_passkey_01 [--mode quick|full] [--out DIR] [--threads N]
//   quick (CTest): tiny data, 20 steps: the pipeline and the statistics' consistency only.
//   full: the documented run of docs/probe.md.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/core/plot.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/task_file.hpp"
#include "cf/nn/trainer.hpp"
#include "cf/notebook/cli.hpp"
#include "cf/probe/passkey.hpp"
#include "cf/probe/report.hpp"

using namespace cf;

namespace {

int report(const notebook::Options& opt) {
  const std::string& mode = opt.mode;
  const std::string& out = opt.out;
  const bool full = opt.full();
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<std::string> brown = notebook::brown_text(full);
  if (!brown) return 77;
  const std::string& text = *brown;
  const auto tok = data::Tokenizer::create("byte");
  probe::PasskeySpec s;
  s.lengths = full ? std::vector<int>{64, 96, 128} : std::vector<int>{64, 96};
  s.depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  s.reps = full ? 20 : 2;
  s.rows_train = full ? 6000 : 64;
  s.seed = 0;
  const data::TaskData td = probe::generate_passkey(s, tok, tok.encode(text));
  const std::string prefix = out + "/task";
  data::write_task_files(prefix, td);
  const nn::TrainData data = nn::load_token_files(prefix);
  const char* kinds[] = {"full", "runway-dot", "runway-bilinear"};
  std::vector<std::string> ckpts;
  for (const char* k : kinds) {
    nn::ModelConfig mc;
    mc.vocab_size = 256;
    mc.block_size = td.row_len - 1;
    mc.n_layer = 2;
    mc.n_head = 4;
    mc.d_model = 64;
    mc.layers = nn::parse_schedule(k, 2, nn::LayerConfig{});
    nn::TrainConfig tc;
    tc.out_dir = out + "/" + k;
    tc.max_steps = full ? 1200 : 4;
    tc.batch = 16;
    tc.seq_len = td.row_len - 1;
    tc.lr = 2e-3;
    tc.min_lr = 2e-4;
    tc.warmup = full ? 100 : 2;
    tc.eval_interval = tc.max_steps;
    tc.eval_batches = 2;
    tc.ckpt_interval = tc.max_steps;
    tc.seed = 11;
    const auto ts = std::chrono::steady_clock::now();
    const auto r = nn::train(mc, tc, data, "", {}, nullptr);
    std::printf("trained %-16s %lld steps: answer-token loss %.4f (val %.4f), %.1f s\n", k, (long long)r.steps_done,
                r.last_loss, r.final_val_loss,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count());
    ckpts.push_back(tc.out_dir + "/last.h5");
  }
  nlohmann::json res = {{"mode", mode}};
  for (int m = 1; m < 3; ++m) {
    probe::ProbeOptions o;
    o.task = "passkey";
    o.data = prefix;
    o.checkpoints = {ckpts[0], ckpts[static_cast<std::size_t>(m)]};
    o.quiet = true;
    o.plot = out + "/passkey_std_vs_" + kinds[m] + ".svg";
    const auto rep = probe::run_probe(o);
    std::printf("\n%s", rep.render(output::Format::Table).c_str());
    res[std::string("std_vs_") + kinds[m]] = rep.body;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res["seconds"] = secs;
  write_file_atomic(out + "/results.json", res.dump(2) + "\n");
  std::printf("mode %s, total %.1f s; figures and results.json in %s\n", mode.c_str(), secs, out.c_str());
  // consistency of the paired statistics with the per-model accuracies
  for (int m = 1; m < 3; ++m) {
    const auto& p = res[std::string("std_vs_") + kinds[m]]["paired"]["all"];
    const double d = p["accuracy_a"].get<double>() - p["accuracy_b"].get<double>();
    const double dn = double(p["a_only"].get<long long>() - p["b_only"].get<long long>()) / p["items"].get<double>();
    if (std::abs(d - dn) > 1e-12 || std::abs(d - p["difference"].get<double>()) > 1e-12) {
      std::printf("FAIL: paired statistics inconsistent\n");
      return 1;
    }
  }
  std::printf("OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return notebook::run(argc, argv, "nb_runway_passkey_01",
                       "Notebook: Runway (Lee & Clark) passkey retrieval, standard vs runway-rewired models",
                       "results/runway_passkey", report);
}
