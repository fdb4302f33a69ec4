#!/usr/bin/python3
"""The `analysers` step of scripts/device/run_checks.sh (issue 30, docs/gpu.md "The analysers device
check"): random-weight Hugging Face folders of real configs, each analyser with --device cuda
against --device cpu on small windows (tests/gpu/device_vs_cpu.py), the analysers' device runs at
size with their wall time and peak RSS, and the same computations in PyTorch on the same GPU.

Usage: analysers.py run --bin DIR --work DIR [--budget S] [--summary FILE.json] [--dry-run-cpu]
(the steps that need torch run in scripts/device/analysers_torch.py, one process each).
Shapes: gpt2-124m (GPT-2 small, F32), qwen2-0.5b (Qwen2-0.5B, BF16), llama-7b (Llama-2-7B, BF16 in
7 shards of about 2 GB, 13.5 GB); with --dry-run-cpu tiny shapes of the same families (2 layers)
and the device side emulated on the CPU (CF_GPU_EMULATE=1), torch on the CPU.

Every step runs under its own time limit, cut to what is left of --budget (seconds, default 330:
acceptance 2 of issue 30 allows one prepared run of 6 minutes), and the table at the end says where
the time went. No transformers and no safetensors package: the files are written with struct/json
as tests/hf/hf_reference.py writes its fixtures, tensor by tensor, each generated on the GPU in its
stored dtype (the host never holds the 7B model, nor any tensor of it, as float32). Exit 0 when
every step ran and every comparison passed, 1 otherwise (the speed and RSS targets are reported, not
failed on); without torch 77 (CTest: skipped), except under CI=true, where it fails (tests/hf's rule).
"""
import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_PY = os.path.join(HERE, "analysers_torch.py")  # the steps that need torch, each in its own process

# ---------------------------------------------------------------- configs (config.json of each family)
SHAPES = {
    # GPT-2 small (openai-community/gpt2): 124M parameters, learned positions, tied head
    "gpt2-124m": dict(family="gpt2", dtype="F32", shards=1, layers=12, d=768, heads=12, kv=12, ff=3072,
                      vocab=50257, ctx=1024),
    # Qwen2-0.5B: 24 layers, 14 heads of 64, 2 kv heads, SwiGLU 4864, qkv bias, tied, RoPE theta 1e6
    "qwen2-0.5b": dict(family="qwen2", dtype="BF16", shards=1, layers=24, d=896, heads=14, kv=2, ff=4864,
                       vocab=151936, ctx=32768),
    # the GPT-2 small body on a byte vocabulary: the tools that read text (mc-eval, spectral's sequence
    # level) have a tokenizer for it on any machine
    "gpt2-byte": dict(family="gpt2", dtype="F32", shards=1, layers=12, d=768, heads=12, kv=12, ff=3072,
                      vocab=256, ctx=1024),
    # Llama-2-7B: 32 layers, 32 heads of 128, SwiGLU 11008, untied head
    "llama-7b": dict(family="llama", dtype="BF16", shards=7, layers=32, d=4096, heads=32, kv=32, ff=11008,
                     vocab=32000, ctx=4096),
}
TINY = {  # --dry-run-cpu: the same families and dtypes at a size the CPU emulation runs in seconds
    "gpt2-124m": dict(SHAPES["gpt2-124m"], layers=2, d=64, heads=4, kv=4, ff=256, vocab=512, ctx=128),
    "gpt2-byte": dict(SHAPES["gpt2-byte"], layers=2, d=64, heads=4, kv=4, ff=256, ctx=128),
    "qwen2-0.5b": dict(SHAPES["qwen2-0.5b"], layers=2, d=64, heads=4, kv=2, ff=96, vocab=700, ctx=128),
    "llama-7b": dict(SHAPES["llama-7b"], shards=3, layers=2, d=64, heads=4, kv=4, ff=96, vocab=300, ctx=128),
}


def config_json(s):
    if s["family"] == "gpt2":
        return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": s["vocab"],
                "n_positions": s["ctx"], "n_embd": s["d"], "n_layer": s["layers"], "n_head": s["heads"],
                "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "tie_word_embeddings": True}
    qwen = s["family"] == "qwen2"
    return {"model_type": s["family"], "architectures": ["Qwen2ForCausalLM" if qwen else "LlamaForCausalLM"],
            "vocab_size": s["vocab"], "hidden_size": s["d"], "intermediate_size": s["ff"],
            "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"], "num_key_value_heads": s["kv"],
            "hidden_act": "silu", "max_position_embeddings": s["ctx"], "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0 if qwen else 10000.0, "tie_word_embeddings": qwen, "attention_bias": False,
            "rope_scaling": None, "torch_dtype": "bfloat16"}


def tensor_list(s):
    """(name, shape, standard deviation; None = a norm weight near 1) in the HF classes' names and layouts."""
    d, f, v, L = s["d"], s["ff"], s["vocab"], s["layers"]
    if s["family"] == "gpt2":  # Conv1D weights are [in, out]
        out = [("transformer.wte.weight", (v, d), 0.02), ("transformer.wpe.weight", (s["ctx"], d), 0.01)]
        for l in range(L):
            q = f"transformer.h.{l}."
            out += [(q + "ln_1.weight", (d,), None), (q + "ln_1.bias", (d,), 0.02),
                    (q + "attn.c_attn.weight", (d, 3 * d), 0.02), (q + "attn.c_attn.bias", (3 * d,), 0.02),
                    (q + "attn.c_proj.weight", (d, d), 0.02 / math.sqrt(2 * L)), (q + "attn.c_proj.bias", (d,), 0.02),
                    (q + "ln_2.weight", (d,), None), (q + "ln_2.bias", (d,), 0.02),
                    (q + "mlp.c_fc.weight", (d, f), 0.02), (q + "mlp.c_fc.bias", (f,), 0.02),
                    (q + "mlp.c_proj.weight", (f, d), 0.02 / math.sqrt(2 * L)), (q + "mlp.c_proj.bias", (d,), 0.02)]
        return out + [("transformer.ln_f.weight", (d,), None), ("transformer.ln_f.bias", (d,), 0.02)]
    dh = d // s["heads"]
    qwen = s["family"] == "qwen2"
    out = [("model.embed_tokens.weight", (v, d), 0.02)]
    for l in range(L):
        q = f"model.layers.{l}."
        out += [(q + "input_layernorm.weight", (d,), None), (q + "post_attention_layernorm.weight", (d,), None),
                (q + "self_attn.q_proj.weight", (s["heads"] * dh, d), 0.02),
                (q + "self_attn.k_proj.weight", (s["kv"] * dh, d), 0.02),
                (q + "self_attn.v_proj.weight", (s["kv"] * dh, d), 0.02),
                (q + "self_attn.o_proj.weight", (d, s["heads"] * dh), 0.02 / math.sqrt(2 * L)),
                (q + "mlp.gate_proj.weight", (f, d), 0.02), (q + "mlp.up_proj.weight", (f, d), 0.02),
                (q + "mlp.down_proj.weight", (d, f), 0.02 / math.sqrt(2 * L))]
        if qwen:
            out += [(q + "self_attn.q_proj.bias", (s["heads"] * dh,), 0.02),
                    (q + "self_attn.k_proj.bias", (s["kv"] * dh,), 0.02),
                    (q + "self_attn.v_proj.bias", (s["kv"] * dh,), 0.02)]
    out += [("model.norm.weight", (d,), None)]
    return out if qwen else out + [("lm_head.weight", (v, d), 0.02)]


# ---------------------------------------------------------------- the step: tools, comparisons, timings
class Steps:
    """Runs the steps under their limits (cut to what is left of the budget), records wall time,
    exit code and peak RSS of each (os.wait4: the child's own), and prints the table."""

    def __init__(self, budget, work):
        self.t0, self.budget, self.rows, self.work, self.failed = time.monotonic(), budget, [], work, 0
        self.done = {}  # name -> (seconds, peak RSS KiB, verdict)

    def left(self):
        return self.budget - (time.monotonic() - self.t0)

    def run(self, name, limit, cmd, env=None, check=None, quiet=False):
        lim = min(limit, self.left())
        if lim < 1:
            self.rows.append((name, 0.0, "not run (budget spent)", 0, limit))
            self.failed += 1
            return None
        print(f"\n--- {name} (limit {lim:.0f} s)\n$ {' '.join(cmd)}", flush=True)
        e = dict(os.environ, **(env or {}))
        t0 = time.monotonic()
        log = os.path.join(self.work, "step.log")
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, env=e, stdout=f, stderr=subprocess.STDOUT)
        rc, rss = None, 0
        while rc is None:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                rc, rss = os.waitstatus_to_exitcode(status), ru.ru_maxrss
            elif time.monotonic() - t0 > lim:
                p.kill()
                _, status, ru = os.wait4(p.pid, 0)
                rc, rss = 124, ru.ru_maxrss
            else:
                time.sleep(0.02)
        p.returncode = rc  # reaped by wait4: Popen must not wait again
        sec = time.monotonic() - t0
        text = open(log, errors="replace").read()
        print(text if not quiet else text[-3000:], end="" if text.endswith("\n") else "\n")
        verdict = "ok" if rc == 0 else ("timed out" if rc == 124 else f"exit {rc}")
        if rc == 0 and check:
            verdict = check(text) or "ok"
        if verdict != "ok":
            self.failed += 1
        print(f"--- {name}: {verdict}, {sec:.2f} s, peak RSS {rss / 1024:.0f} MiB", flush=True)
        self.rows.append((name, sec, verdict, rss, lim))
        self.done[name] = (sec, rss, verdict)
        return text if rc == 0 else None

    def table(self):
        print("\n=== analysers: where the time went")
        print(f"{'step':72s} {'seconds':>8s} {'limit':>6s} {'peak RSS MiB':>12s}  result")
        for name, sec, verdict, rss, lim in self.rows:
            print(f"{name:72s} {sec:8.2f} {lim:6.0f} {rss / 1024:12.0f}  {verdict}")
        print(f"{'total':72s} {time.monotonic() - self.t0:8.2f} {self.budget:6.0f}")


def last_json(text):
    """The last line of `text` that is a JSON object (the torch side's result), or None."""
    for line in reversed((text or "").splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def acceptance(st, torch_g, torch_q, sizes, llama, torch_b=None):
    """Acceptance 2 of issue 30, point by point (`sizes`: the device runs at size and their PyTorch
    task): the tool's whole run (process start, model load,
    work) against PyTorch's load + work on the same GPU in the same run; None = not measured."""
    def sec(name):
        r = st.done.get(name)
        return r[0] if r and r[2] == "ok" else None

    def tsec(res, task):
        return res[task]["seconds"] + res["load_s"] if res and task in res else None

    print("\n=== analysers: acceptance 2 of issue 30 (tool = the whole process; PyTorch = weights to the GPU + the work)")
    print(f"{'point':66s} {'tool s':>8s} {'PyTorch s':>9s} {'speed-up':>8s}  target")
    def row(point, t, ref, target):
        f = lambda v: f"{v:8.2f}" if v is not None else "       -"
        ratio = f"{ref / t:7.2f}x" if t and ref else "       -"
        print(f"{point:66s} {f(t)} {f(ref):>9s} {ratio}  {target}")
    for name, task in sizes:
        row(name, sec(f"device: {name}"), tsec(torch_g, task), "< 10 s, >= 1.0x PyTorch")
    for name, task in sizes:  # --precision bf16 against PyTorch's bf16 model (bf16 tensor cores both)
        if st.done.get(f"device: {name}, --precision bf16"):
            row(f"{name}, bf16", sec(f"device: {name}, --precision bf16"), tsec(torch_b, task),
                "< 10 s, >= 1.0x PyTorch bf16")
    dev = sec("device: spectral --level weight qwen2-0.5b")
    row("spectral --level weight qwen2-0.5b", dev, tsec(torch_q, "eigh"), "< 2 s, >= 1.0x PyTorch")
    row("spectral --level weight qwen2-0.5b against Eigen on the host", dev,
        sec("cpu: spectral --level weight qwen2-0.5b (Eigen on the host)"), ">= 5x Eigen (column PyTorch = Eigen)")
    r7 = st.done.get(llama)
    if r7:
        print(f"capture llama-7b BF16: host peak RSS {r7[1] / 2**20:.2f} GiB (target < 4 GB), {r7[0]:.1f} s, {r7[2]}")


def run_all(a):
    need = subprocess.run([sys.executable, TORCH_PY, "--help"], capture_output=True, text=True)
    if need.returncode in (1, 77) and "torch" in need.stdout:  # no torch: skipped (77), or failed under CI=true
        print(need.stdout.strip())
        return need.returncode
    tiny = a.dry_run_cpu
    shapes = TINY if tiny else SHAPES
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    st = Steps(a.budget, work)
    bin_ = lambda t: os.path.join(a.bin, t)
    vs = [sys.executable, os.path.join(ROOT, "tests/gpu/device_vs_cpu.py")]
    # device_vs_cpu.py runs --device cuda emulated unless told it has a real device
    env_vs = {"CF_DEVICE_VS_CPU_EMULATE": "1" if tiny else "0"}
    env_dev = {"CF_GPU_EMULATE": "1"} if tiny else {}
    has = lambda m: subprocess.run([sys.executable, "-c", f"import {m}"], capture_output=True).returncode == 0
    h5 = has("h5py")
    print(f"h5py {'yes' if h5 else 'no (capture files not compared)'}; transformers "
          f"{'importable (not used: the PyTorch side is written from the HF equations)' if has('transformers') else 'absent'}; "
          f"this driver's own peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (inherited "
          "by each step's peak RSS at fork)")
    dirs = {k: os.path.join(work, k) for k in shapes}

    # 1. the models and their tokens
    for k, d in dirs.items():
        s = shapes[k]
        st.run(f"make {k} ({s['dtype']}, {s['shards']} shard(s))", 90 if k == "llama-7b" else 40,
               [sys.executable, TORCH_PY, "make", k, d] + (["--dry-run-cpu"] if tiny else []))
    G, Gb, Q, Ll = dirs["gpt2-124m"], dirs["gpt2-byte"], dirs["qwen2-0.5b"], dirs["llama-7b"]
    T_big = shapes["gpt2-124m"]["ctx"]  # 1024 (tiny: 128)
    n_big = (1 << 16) // T_big if not tiny else 4  # 64 windows of 1024 = 64k tokens

    # 2. device = CPU on small windows (float32 round-off; qwen2 and llama read BF16 weights, converted
    # exactly to float32 on both sides, so the same tolerance)
    def cmp(name, rtol, atol, args, h5prefix=None, limit=60, csvprefix=None):
        pre = ["--h5", h5prefix] if h5prefix and h5 else ["--csv", csvprefix] if csvprefix else []
        pre += [] if args[0] == "--device-arg" else ["--"] if pre else []
        if h5prefix and not h5:  # the reports only: both runs write one file, the second run's stays
            args = [f"{h5prefix}_noh5.h5" if x == "@OUT@" else x for x in args]
        st.run(f"= cpu: {name}", limit, vs + [str(rtol), str(atol)] + pre + args, env=env_vs,
               check=lambda t: None if "ok: device = cpu" in t else "no agreement line")

    cmp("capture gpt2-124m, T 64 x 2, every head with Q and K", 1e-5, 1e-7,
        [bin_("capture"), "--checkpoint", G, "--tokens", f"{G}/tokens.txt", "--seq-len", "64", "--n-seq", "2",
         "--out", "@OUT@"], os.path.join(work, "cap_gpt2"))
    last = shapes["qwen2-0.5b"]["heads"] - 1
    cmp(f"capture qwen2-0.5b, T 32 x 2, heads 0 and {last}", 1e-5, 1e-7,
        [bin_("capture"), "--checkpoint", Q, "--tokens", f"{Q}/tokens.txt", "--seq-len", "32", "--n-seq", "2",
         "--heads", f"0,{last}", "--out", "@OUT@"], os.path.join(work, "cap_qwen"))
    cmp(f"spectral-surgery gpt2-124m, rank 8 on layer 0, {256 if tiny else 512} tokens", 1e-5, 1e-4,
        [bin_("spectral-surgery"), "--checkpoint", G, "--data", f"{G}/data", "--rank", "8", "--layers", "0",
         "--context", "128", "--stride", "128", "--max-tokens", "256" if tiny else "512"])
    cmp("spectral --level weight qwen2-0.5b (every head)", 1e-4, 1e-9,
        [bin_("spectral"), "--checkpoint", Q, "--level", "weight"], limit=90)
    n_roll, win = (2048, 129) if not tiny else (100, 33)
    cmp(f"rollout structured ALiBi, BLOOM preset, window {win}, n {n_roll}", 1e-12, 1e-300,
        [bin_("rollout"), "--model", "bloom", "--n", str(n_roll), "--mask", f"swa:{win}"])
    cap = os.path.join(work, "cap_gpt2_cpu.h5" if h5 else "cap_gpt2_noh5.h5")
    cmp("rollout on the measured kernels of the gpt2-124m capture", 1e-12, 1e-300,
        [bin_("rollout"), "--model", cap, "--alpha", "measured"])
    n_mat = 512 if not tiny else 48  # the full rollout: 70 products of n x n kernels in double
    cmp(f"rollout --matrix, BLOOM preset, n {n_mat} (the n x n products in double)", 1e-12, 1e-300,
        [bin_("rollout"), "--model", "bloom", "--n", str(n_mat), "--matrix", "@OUT@"],
        csvprefix=os.path.join(work, "matrix"))
    cmp(f"rollout monotonicity, BLOOM preset, n {n_mat // 4} (the triple sums in double)", 1e-12, 1e-300,
        [bin_("rollout"), "monotonicity", "--model", "bloom", "--n", str(n_mat // 4)])
    bc = os.path.join(work, "bc")
    st.run("prepare-data boundary-copy task", 30,
           [bin_("prepare-data"), "--task", "boundary-copy", "--K", "4", "--b", "4", "--seq-len", str(T_big),
            "--rows-train", "8", "--rows-val", str(n_big), "--out", bc])
    cmp("probe boundary-copy gpt2-124m, 2 rows", 1e-5, 1e-6,
        [bin_("probe"), "boundary-copy", "--data", bc, "--checkpoint", G, "--max-rows", "2", "--quiet"])
    cmp("mc-eval gpt2-byte, the ARC-layout items of tests/eval", 1e-5, 1e-6,
        [bin_("mc-eval"), "--data", os.path.join(ROOT, "tests/eval/data/arc.jsonl"), "--checkpoint", Gb, "--quiet"])
    cmp("spectral --level sequence gpt2-byte, the six texts of Routing/filtering App. A, 128 tokens", 1e-5, 1e-7,
        [bin_("spectral"), "--checkpoint", Gb, "--level", "sequence", "--texts",
         os.path.join(ROOT, "data/texts/routing_eval.txt"), "--max-tokens", "128"], limit=90)
    # influence and jacobian: the device trainer's seeded backward (the CTests' tolerances); the
    # Jacobian's d_model seeds x n (n + 1) / 2 prefixes are kept small for the CPU side
    texts = os.path.join(ROOT, "data/texts/routing_eval.txt")
    cmp("influence gpt2-byte, n 64, 4 windows", 1e-4, 1e-6,
        [bin_("influence"), "--checkpoint", Gb, "--text", texts, "--n", "64", "--windows", "4"])
    cmp("jacobian gpt2-byte, layer 0 to the top, n 3, one window", 1e-4, 1e-7,
        [bin_("jacobian"), "--checkpoint", Gb, "--text", texts, "--n", "3", "--windows", "1", "--quiet"], limit=90)

    # 3. at size, on the device, beside PyTorch on the same GPU (acceptance 2's points)
    T_p, n_p = (256, 8) if not tiny else (64, 2)  # every head's probabilities: 300 MB of capture file
    k_tok = f"{n_big * T_big // 1024}k" if not tiny else str(n_big * T_big)
    dev_runs = [
        (f"capture gpt2-124m, alpha_l over {k_tok} tokens (no probabilities)", "alpha",
         [bin_("capture"), "--checkpoint", G, "--tokens", f"{G}/tokens.txt", "--seq-len", str(T_big),
          "--n-seq", str(n_big), "--no-probs", "--no-qk", "--out", os.path.join(work, "alpha.h5")]),
        (f"capture gpt2-124m, every head's probabilities, T {T_p} x {n_p}", "capture",
         [bin_("capture"), "--checkpoint", G, "--tokens", f"{G}/tokens.txt", "--seq-len", str(T_p),
          "--n-seq", str(n_p), "--no-qk", "--out", os.path.join(work, "probs.h5")]),
        (f"spectral-surgery gpt2-124m, baseline perplexity over {k_tok} tokens", "ppl",
         [bin_("spectral-surgery"), "--checkpoint", G, "--data", f"{G}/data", "--context", str(T_big),
          "--stride", str(T_big), "--max-tokens", str(n_big * T_big + 1)]),
        (f"probe boundary-copy gpt2-124m over {k_tok} tokens", "probe",
         [bin_("probe"), "boundary-copy", "--data", bc, "--checkpoint", G, "--quiet"]),
    ]
    reports = {}
    for name, kind, cmd in dev_runs:  # probe: every position's logits come back to the host's softmax
        reports[kind] = st.run(f"device: {name}", 45 if kind == "probe" else 60, cmd + ["--device", "cuda", "--format", "json"], env=env_dev,
                               quiet=True)
    st.run("device: spectral --level weight qwen2-0.5b", 60,
           [bin_("spectral"), "--checkpoint", Q, "--level", "weight", "--device", "cuda", "--format", "json"],
           env=env_dev, quiet=True)
    st.run("cpu: spectral --level weight qwen2-0.5b (Eigen on the host)", 90,
           [bin_("spectral"), "--checkpoint", Q, "--level", "weight", "--device", "cpu", "--format", "json"], quiet=True)
    n7 = 256 if not tiny else 32
    llama = f"device: capture llama-7b BF16, alpha_l, T {n7} x 1 (host peak RSS: acceptance < 4 GB)"
    st.run(llama, 150,
           [bin_("capture"), "--checkpoint", Ll, "--tokens", f"{Ll}/tokens.txt", "--seq-len", str(n7), "--n-seq", "1",
            "--no-probs", "--no-qk", "--out", os.path.join(work, "alpha7b.h5"), "--device", "cuda",
            "--format", "json"], env=env_dev, quiet=True)
    lg = 20 if not tiny else 8
    for where, e in (("device", env_dev), ("cpu", {})):
        st.run(f"{where}: rollout structured ALiBi, MPT-7B preset, n 2^{lg}", 60,
               [bin_("rollout"), "--model", "mpt-7b", "--n", str(1 << lg), "--device", "cuda" if where == "device" else "cpu",
                "--format", "json"], env=e, quiet=True)
    tasks = [f"alpha:{T_big}:{n_big}", f"capture:{T_p}:{n_p}", f"ppl:{T_big}:{n_big}", f"probe:{T_big}:{n_big}"]
    dry = ["--dry-run-cpu"] if tiny else []
    torch_g = last_json(st.run("pytorch: gpt2-124m capture hooks, perplexity, probe", 120,
                               [sys.executable, TORCH_PY, "torch", "gpt2-124m", G] + tasks + dry))
    torch_q = last_json(st.run("pytorch: qwen2-0.5b per-head cores, QR + eigh", 60,
                               [sys.executable, TORCH_PY, "torch", "qwen2-0.5b", Q, "eigh"] + dry))
    if h5:  # the capture files (--device cpu's; = the device's above) against PyTorch's hooks
        for k, d, f in (("gpt2-124m", G, "cap_gpt2_cpu.h5"), ("qwen2-0.5b", Q, "cap_qwen_cpu.h5")):
            st.run(f"pytorch hooks = the capture file of {k} (probabilities, Q, K, residual norms)", 60,
                   [sys.executable, TORCH_PY, "torch", k, d, "vs-capture:" + os.path.join(work, f)] + dry)
    # 4. bf16 (after every float32 step: the budget cuts the last steps first)
    # --precision bf16 (bf16 weights and GEMM inputs, float32 accumulation) against the float32 CPU:
    # the bf16 tolerance of tests/gpu/test_analysis_precision_emu.cpp, 2u (4 L + 1) of each tensor's
    # scale with u = 2^-8 (L = 12: 98u = 0.38; the tiny shapes' L = 2: 18u = 0.07)
    L_g = shapes["gpt2-124m"]["layers"]
    tol_b = 2 * 2 ** -8 * (4 * L_g + 1)
    cmp(f"capture gpt2-124m --precision bf16, T 64 x 2, every head with Q and K (tolerance {tol_b:.3g})", tol_b,
        tol_b, ["--device-arg", "--precision", "--device-arg", "bf16", "--",
                bin_("capture"), "--checkpoint", G, "--tokens", f"{G}/tokens.txt", "--seq-len", "64", "--n-seq",
                "2", "--out", "@OUT@"], os.path.join(work, "cap_gpt2_bf16"))
    for name, kind, cmd in dev_runs[:3]:  # the same at --precision bf16 (beside PyTorch's bf16 model)
        reports[kind + "_bf16"] = st.run(f"device: {name}, --precision bf16", 60,
                                         cmd + ["--device", "cuda", "--precision", "bf16", "--format", "json"],
                                         env=env_dev, quiet=True)
    torch_b = last_json(st.run("pytorch bf16: gpt2-124m capture hooks, perplexity (weights and activations in bf16)",
                               120, [sys.executable, TORCH_PY, "torch", "gpt2-124m", G] + tasks[:3] + dry + ["--bf16"]))
    print("pytorch:", json.dumps(torch_g), json.dumps(torch_b), json.dumps(torch_q))
    st.table()
    acceptance(st, torch_g, torch_q, [(name, task) for (name, _, _), task in zip(dev_runs, tasks)], llama, torch_b)
    if reports.get("ppl") and torch_g and tasks[2] in torch_g:  # the same windows: float32 round-off apart
        ppl, ref = json.loads(reports["ppl"])["baseline"]["ppl"], torch_g[tasks[2]]["value"]
        ok = abs(ppl - ref) <= 1e-4 * ref
        st.failed += not ok
        print(f"perplexity over the same windows: spectral-surgery --device cuda {ppl:.8g}, PyTorch {ref:.8g}, "
              f"relative difference {abs(ppl - ref) / ref:.2g} ({'ok' if ok else 'FAILED'}: 1e-4)")
    if reports.get("ppl_bf16") and torch_b and tasks[2] in torch_b:  # recorded, not a pass/fail: PyTorch
        # rounds every activation, norm and softmax to bf16, the tool its GEMM inputs only
        ppl, ref = json.loads(reports["ppl_bf16"])["baseline"]["ppl"], torch_b[tasks[2]]["value"]
        print(f"perplexity in bf16 over the same windows: spectral-surgery --precision bf16 {ppl:.8g}, "
              f"PyTorch bf16 {ref:.8g}, relative difference {abs(ppl - ref) / ref:.2g}")
    if a.summary:  # the numbers for docs/gpu.md, beside the log
        json.dump({"steps": [dict(zip(("step", "seconds", "result", "peak_rss_kib", "limit_s"), r)) for r in st.rows],
                   "pytorch": [torch_g, torch_q, torch_b], "failed": st.failed}, open(a.summary, "w"), indent=1)
    for k, d in dirs.items():  # 13.5 GB: the machine's disk is 64 GB
        shutil.rmtree(d, ignore_errors=True)
    print(f"analysers: {st.failed} step(s) failed" if st.failed else "ok: analysers step")
    return 1 if st.failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--bin", required=True, help="folder of the tools (the bundle's bin, or a build's bin)")
    r.add_argument("--work", required=True, help="scratch folder (emptied first; up to 14 GB)")
    r.add_argument("--budget", type=float, default=330, help="seconds for every step together")
    r.add_argument("--dry-run-cpu", action="store_true", help="tiny shapes, emulated device, torch on the CPU")
    r.add_argument("--summary", help="also write the steps' table and PyTorch's results to this JSON file")
    return run_all(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
