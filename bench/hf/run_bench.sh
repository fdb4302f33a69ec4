#!/bin/sh
# Issue 13 acceptance 4: load time of a GPT-2-124M-sized safetensors file (random weights written
# here) and the full `spectral --level weight` run on it, against numpy reading the same bytes in
# Python (no safetensors package) and computing the same metrics. Usage:
#   bench/hf/run_bench.sh BUILD_DIR [WORK_DIR]
# Results: docs/benchmarks.md ("Hugging Face checkpoints"). OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are
# unset for every side alike.
set -eu
build=${1:?usage: run_bench.sh BUILD_DIR [WORK_DIR]}
work=${2:-/tmp/cf_bench_hf}
here=$(cd "$(dirname "$0")" && pwd)
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
if [ ! -f "$work/model.safetensors" ]; then
  mkdir -p "$work"
  /usr/bin/python3 - "$work" <<'PY'
import json, os, struct, sys
import numpy as np
d = sys.argv[1]
V, P, C, L = 50257, 1024, 768, 12
rng = np.random.default_rng(0)
ws = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (P, C))]
for l in range(L):
    p = f"transformer.h.{l}."
    ws += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)), (p + "attn.c_attn.weight", (C, 3 * C)),
           (p + "attn.c_attn.bias", (3 * C,)), (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
           (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)), (p + "mlp.c_fc.weight", (C, 4 * C)),
           (p + "mlp.c_fc.bias", (4 * C,)), (p + "mlp.c_proj.weight", (4 * C, C)), (p + "mlp.c_proj.bias", (C,))]
ws += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
header, pos = {"__metadata__": {"format": "pt"}}, 0
for n, s in ws:
    size = 4 * int(np.prod(s))
    header[n] = {"dtype": "F32", "shape": list(s), "data_offsets": [pos, pos + size]}
    pos += size
h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for n, s in ws:
        f.write((0.02 * rng.standard_normal(s)).astype(np.float32).tobytes())
json.dump({"model_type": "gpt2", "vocab_size": V, "n_positions": P, "n_embd": C, "n_layer": L, "n_head": 12},
          open(os.path.join(d, "config.json"), "w"))
print(f"wrote {pos / 1e6:.1f} MB of tensors")
PY
fi
echo "load: $(uptime)"
cat "$work/model.safetensors" > /dev/null  # page cache warm for every side
# benchmarks are built into BUILD/bench/bin (the top-level CMakeLists.txt), not BUILD/bin
loader="$build/bench/bin/bench_hf_load"
if [ ! -x "$loader" ]; then
  echo "run_bench.sh: $loader not found (build first: cmake --build $build --target bench_hf_load spectral)" >&2
  exit 2
fi
"$loader" "$work" 3
spectral="$build/bin/spectral"
best=1e30
for i in 1 2 3; do
  t0=$(date +%s.%N)
  "$spectral" --checkpoint "$work" --level weight --format json > /tmp/cf_bench_hf_spectral.json
  t1=$(date +%s.%N)
  best=$(echo "$t0 $t1 $best" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
done
echo "spectral_cli_s $best"
OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$here/bench_numpy.py" "$work" 3
echo "load: $(uptime)"
