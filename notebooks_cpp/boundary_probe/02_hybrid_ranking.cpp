// Boundary repair (Yang) §6.9 hybrid schedules on the candidate-ranking families (issue 11): a 3:1 local/full
// schedule (block, block, block, full) vs all-local (block x 4) of the same size and steps,
// trained on the ranking rows (prompt + correct candidate, loss on the candidate), evaluated on
// held-out items: accuracy per family (chance 0.25), margins, prompt-token NLL by position, and
// paired McNemar / bootstrap per family. Reports what it finds.
//
// Usage: nb_boundary_probe_02_hybrid [--mode quick|full] [--out DIR] [--threads N]

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/task_file.hpp"
#include "cf/nn/trainer.hpp"
#include "cf/notebook/cli.hpp"
#include "cf/probe/ranking.hpp"
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
  probe::RankingSpec s;
  s.families = probe::ranking_families();
  s.items_val = full ? 100 : 8;
  s.rows_train = full ? 3000 : 48;
  s.context = 96;
  s.b = 32;
  s.w = 32;
  s.seed = 2;
  const data::TaskData td = probe::generate_ranking(s, tok, tok.encode(text));
  const std::string prefix = out + "/task";
  data::write_task_files(prefix, td);
  const nn::TrainData data = nn::load_token_files(prefix);
  const char* schedules[] = {"block*3,full", "block*4"};
  const char* names[] = {"hybrid_3to1", "all_local"};
  std::vector<std::string> ckpts;
  for (int m = 0; m < 2; ++m) {
    nn::ModelConfig mc;
    mc.vocab_size = 256;
    mc.block_size = td.row_len - 1;
    mc.n_layer = 4;
    mc.n_head = 4;
    mc.d_model = 64;
    nn::LayerConfig lc;
    lc.b = 32;
    lc.w = 32;
    mc.layers = nn::parse_schedule(schedules[m], 4, lc);
    nn::TrainConfig tc;
    tc.out_dir = out + "/" + names[m];
    tc.max_steps = full ? 1000 : 4;  // the planned 1,000 steps (300 before 2026-11-27)
    tc.batch = 16;
    tc.seq_len = td.row_len - 1;
    tc.lr = 2e-3;
    tc.min_lr = 2e-4;
    tc.warmup = full ? 100 : 2;
    tc.eval_interval = tc.max_steps;
    tc.eval_batches = 2;
    tc.ckpt_interval = tc.max_steps;
    tc.seed = 5;
    const auto ts = std::chrono::steady_clock::now();
    const auto r = nn::train(mc, tc, data, "", {}, nullptr);
    std::printf("trained %-12s (%s) %lld steps: candidate loss %.4f (val %.4f), %.1f s\n", names[m], schedules[m],
                (long long)r.steps_done, r.last_loss, r.final_val_loss,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count());
    ckpts.push_back(tc.out_dir + "/last.h5");
  }
  probe::ProbeOptions o;
  o.task = "ranking";
  o.data = prefix;
  o.checkpoints = ckpts;
  o.quiet = true;
  o.plot = out + "/ranking_prompt_nll.svg";
  const auto rep = probe::run_probe(o);
  std::printf("\n%s", rep.render(output::Format::Table).c_str());
  nlohmann::json res = rep.body;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res["seconds"] = secs;
  res["mode"] = mode;
  write_file_atomic(out + "/results.json", res.dump(2) + "\n");
  std::printf("mode %s, total %.1f s; figures and results.json in %s\n", mode.c_str(), secs, out.c_str());
  const auto& p = res["paired"]["all"];
  const double d = p["accuracy_a"].get<double>() - p["accuracy_b"].get<double>();
  const double dn = double(p["a_only"].get<long long>() - p["b_only"].get<long long>()) / p["items"].get<double>();
  if (std::abs(d - dn) > 1e-12) {
    std::printf("FAIL: paired statistics inconsistent\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return notebook::run(
      argc, argv, "nb_boundary_probe_02_hybrid",
      "Notebook: Boundary repair (Yang) hybrid 3:1 local/full schedule vs all-local on candidate ranking",
      "results/boundary_hybrid_ranking", report);
}
