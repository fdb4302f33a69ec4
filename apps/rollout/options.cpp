// rollout's command line (apps/rollout): the options of the source and of the default mode, and
// the subcommands with their own options. main.cpp adds --device and the common options between
// the two, as every tool does.
#include "options.hpp"

#include "cf/core/validators.hpp"
#include "cf/influence/influence.hpp"
#include "cf/rollout/flow.hpp"

namespace cf::rollout_app {
namespace {

// --model and the options that describe the rollout source (cf::rollout::SourceOptions).
void add_model_options(CLI::App& app, Options& o) {
  rollout::SourceOptions& s = o.src;
  app.add_option("--model", s.model,
                 "Preset (bloom-176b|bloom|bloom-7b1|mpt-7b|mpt-30b|falcon-rw-7b), a capture .h5 file, or a checkpoint "
                 ".h5 or Hugging Face directory (captured in-process on --capture-text)")
      ->capture_default_str();
  app.add_option("--model-config", s.model_config,
                 "Model config (YAML or JSON, the Position bias (Herasimchyk et al.) reference schema): layers, heads, "
                 "slopes, head weights, "
                 "alpha schedule, per-head content, mask; replaces --model");
  app.add_option("--dataset", s.dataset,
                 "Presets: measured alpha schedule and content prior of fineweb-edu (default) | dclm | wikipedia")
      ->check(CLI::IsMember({"fineweb-edu", "dclm", "wikipedia"}));
  app.add_option("--head-weights", s.head_weights,
                 "File with H non-negative head weights (default: uniform mean over heads)");
  app.add_option("--n", s.n,
                 "Sequence length n [default: 256 or the config's sequence_length; verify/monotonicity "
                 "48/64; dichotomy 8; jacobian 16; flow 64]")
      ->check(CLI::Range(1L, 1L << 26));
  app.add_option(
         "--alpha", s.alpha,
         "Residual schedule: measured | const:X | power:A0,BETA (= power0: alpha_l = A0/l^BETA, first layer A0, "
         "as the reference) | power1:A0,BETA (A0/(l+1)^BETA, first layer A0/2^BETA) | file:PATH")
      ->capture_default_str();
  app.add_option(
         "--plot-scale", o.plot_scale,
         "Plot y axis: linear (as the published figures; range of (b), (c), with (a) clipped) | log (every curve)")
      ->check(CLI::IsMember({"linear", "log"}))
      ->capture_default_str();
  app.add_option("--alpha-kind", s.alpha_kind,
                 "Measured alpha of a capture file: token-mean (published) | frobenius (Eq. 1)")
      ->check(CLI::IsMember({"token-mean", "frobenius"}))
      ->capture_default_str();
  app.add_option("--mask", s.mask, "Mask: causal | swa:W (W keys, self included)")->capture_default_str();
  app.add_option("--slopes", s.slopes,
                 "ALiBi slopes: preset (as shipped / as the config) | simple (2^(-8h/H)) | hf (BLOOM recipe)")
      ->check(CLI::IsMember({"preset", "simple", "hf"}))
      ->capture_default_str();
  app.add_flag("--falcon-scale", s.falcon_scale, "Divide ALiBi slopes by sqrt(d_head) (Falcon; presets)");
  app.add_option("--content", s.content,
                 "Content for variant (c): measured (per layer and head; the config's) | mean | none | c,delta")
      ->capture_default_str();
  app.add_option("--content-scale", s.content_scale,
                 "Content scores: raw q.k (as published) | sqrt (divided by sqrt(d_head))")
      ->check(CLI::IsMember({"raw", "sqrt"}))
      ->capture_default_str();
  app.add_option("--kernel-file", s.kernel_file,
                 "Measured kernels: n rows of n numbers (one layer) or L*n rows; dense path");
  app.add_option("--capture-text", o.capture_text,
                 "Checkpoint models: text captured in-process for the measured alpha and kernels (file, brown or kjv; "
                 "bytes, GPT-2 BPE, or a Hugging Face directory's tokenizer.json)")
      ->capture_default_str();
  app.add_option("--capture-seqs", o.capture_seqs, "Checkpoint models: number of captured sequences of n tokens")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--kernels", s.kernels,
                 "Kernels of a capture model: auto (--kernel-file if given, else measured) | measured (uniform head "
                 "mean of the capture's attention probabilities, averaged over its sequences; n = T) | file | alibi "
                 "(ALiBi checkpoints: the content-free ALiBi kernels of the model's slopes, any n; sweep's default)")
      ->check(CLI::IsMember({"auto", "measured", "file", "alibi"}))
      ->capture_default_str();
}

}  // namespace

void add_options(CLI::App& app, Options& o) {
  add_model_options(app, o);
  app.add_option("--path", o.path, "Computation: auto (structured O(L H n) when possible) | dense")
      ->check(CLI::IsMember({"auto", "dense"}))
      ->capture_default_str();
  app.add_option("--influence", o.influence,
                 "Measured influence: a profile file (n numbers, or influence --out CSV/JSON), or auto (--model "
                 "CHECKPOINT: measured in process); Spearman and W1/(n-1) per variant");
  app.add_option(
         "--kernel-source", o.kernel_source,
         "With --model CHECKPOINT --influence: alibi (content-free ALiBi kernels; (c) adds the content measured "
         "from the model) | measured (head-mean attention; (c) not defined) | auto (alibi for ALiBi checkpoints)")
      ->check(CLI::IsMember({"auto", "alibi", "measured"}))
      ->capture_default_str();
  app.add_option("--influence-windows", o.influence_windows,
                 "Windows of --capture-text for --influence auto and the measured kernels")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--influence-target", o.influence_target, "--influence auto: probability | log-probability | logit")
      ->check(app::member_of(influence::kTargets))
      ->capture_default_str();
  app.add_option("--matrix", o.matrix, "Also write the full rollout matrix P(L) of variant (b) as CSV (n <= 2048)");
}

Subcommands add_subcommands(CLI::App& app, Options& o) {
  auto* sweep =
      app.add_subcommand("sweep", "Variants (a), (b), (c) against context length n (structured O(L H n) path)");
  sweep
      ->add_option("--n", o.sweep_n,
                   "Sequence lengths: a list n1,n2,... or a,b,...,c (geometric when b/a is an integer)")
      ->capture_default_str();
  auto* mono = app.add_subcommand("monotonicity", "Stochastic-monotonicity statistics of the model's kernels");
  auto* verify = app.add_subcommand("verify", "Demonstrate Props. 4.2-4.5 on the model and random monotone kernels");
  verify->add_option("--seeds", o.seeds, "Number of random monotone kernel families")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  auto* dich = app.add_subcommand("dichotomy", "Theorem 5.4 at depths 10..--depth in 50-digit arithmetic");
  dich->add_option("--depth", o.depth, "Largest depth (layers)")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1000000L));
  dich->add_option("--schedule", o.deep_alpha, "Non-summable schedule (const:X or power:A0,BETA with BETA <= 1)")
      ->capture_default_str();
  dich->add_option("--schedule2", o.deep_alpha2, "Summable schedule (power:A0,BETA with BETA > 1)")
      ->capture_default_str();
  dich->add_option("--eps", o.eps, "Lemma 5.3 epsilon in [0, 1] [default 0: smallest kernel weight]");
  auto* flow = app.add_subcommand(
      "flow", "Attention flow (max-flow from each input position to the last) beside the rollout variants");
  flow->add_option("--algorithm", o.flow_algorithm,
                   "Max-flow solver: layered (Dinic on the layered causal DAG, the fastest) | push-relabel | bk "
                   "(Boykov-Kolmogorov; both Boost.Graph, kept as references)")
      ->check(app::member_of(rollout::kFlowAlgorithms))
      ->capture_default_str();
  flow->add_option("--target", o.target, "Sink position t in [0, n) [default: n-1]");
  flow->add_option("--flow-matrix", o.flow_matrix,
                   "Also write the flow matrix F[t, j] for every target t as CSV (n <= 512)");
  auto* jac = app.add_subcommand("jacobian", "Runway (Lee & Clark) Theorem 3.3 bound for one target over all sources");
  jac->add_option("--C", o.C, "Per-layer constant C > 0")->capture_default_str();
  jac->add_option("--target", o.target, "Target position d in [0, n) [default: n-1]");
  for (auto* sub : {sweep, mono, verify, dich, jac, flow}) sub->fallthrough();
  app.require_subcommand(0, 1);
  app.footer(
      "Examples:\n"
      "  rollout --model bloom --alpha measured --plot bloom.svg\n"
      "  rollout --model bloom-7b1 --dataset dclm                       # DCLM schedule and content prior\n"
      "  rollout --model-config data/position-bias/config/rollout/alibi/no_content/bloom.yaml\n"
      "  rollout --model bloom --n 1048576 --content none --format json --out p.json\n"
      "  rollout --model mpt-7b --alpha power1:0.5,1.2 --mask swa:64 --format csv\n"
      "  rollout --model bloom --influence influence.txt\n"
      "  rollout sweep --model bloom --n 64,128,...,65536 --plot sweep.svg\n"
      "  rollout --model run/best.h5 --alpha measured --influence auto --n 128   # Position bias (Herasimchyk et al.) "
      "Tables 2-5 layout\n"
      "  rollout --model run/capture.h5 --alpha measured               # measured alpha and kernels\n"
      "  rollout --model run/best.h5 --alpha measured --n 128          # a checkpoint: captured on KJV text first\n"
      "  rollout --model run/capture.h5 --kernel-file kernels.txt --alpha measured\n"
      "  rollout verify --model bloom --n 48\n"
      "  rollout monotonicity --model mpt-30b --n 64\n"
      "  rollout dichotomy --model bloom --n 8 --depth 1000000 --plot dich.svg\n"
      "  rollout jacobian --model bloom-7b1 --n 16 --C 1 --plot jac.svg\n"
      "  rollout flow --model bloom-7b1 --n 64 --plot flow.svg          # attention flow beside (a), (b), (c)\n"
      "  rollout flow --model run/capture.h5 --alpha measured --influence infl.csv --format json\n"
      "  rollout flow --model run/best.h5 --alpha measured --influence auto --n 64   # Tables 2-5 layout with flow\n"
      "  rollout flow --model-config cfg.yaml --n 32 --flow-matrix F.csv --algorithm push-relabel");
  return {sweep, mono, verify, dich, jac, flow};
}

}  // namespace cf::rollout_app
