#!/usr/bin/env bash
# Side-by-side tokens/s of one training step (forward + backward + clip + AdamW): causalflow vs
# Debian python3-torch, the same model on the same machine, alternating runs, at 1 and 2 threads.
# Usage: bench/train/run_bench.sh BUILD_DIR [a|b] [REPS] [CORETYPE]
#   CORETYPE: empty (default) = OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for both sides (OpenBLAS
#   picks its kernels from the CPU model; on CPUs it does not know it falls back to Prescott/SSE3);
#   a name (e.g. Cooperlake, SkylakeX, Haswell) = OPENBLAS_CORETYPE set to it for BOTH sides alike.
#   a: 4 layers, d_model 256, 4 heads, T 256, B 8, byte vocabulary (issue 4 config a)
#   b: GPT-2 124M shape (12 x 768, 12 heads, vocab 50257) at T 1024, B 1
set -eu
build="$1"; which="${2:-a}"; reps="${3:-3}"; core="${4:-}"
coreenv=(-u OPENBLAS_CORETYPE)
[ -n "$core" ] && coreenv=(OPENBLAS_CORETYPE="$core")
here="$(cd "$(dirname "$0")" && pwd)"
# STEPS WARMUP: PyTorch's first two or three steps are 5-30% slower than the rest (its allocator
# and autograd caches warming up; measured 2026-11-26, docs/benchmarks/train.md), so both sides
# get three warm-up steps before the timed ones (one warm-up step flattered causalflow by ~10%).
if [ "$which" = a ]; then args=(4 256 4 256 8 256 8 3); else args=(12 768 12 1024 1 50257 3 3); fi
# the same model's GEMMs alone (bench_gemm_ceiling LAYERS D_MODEL T B VOCAB): the floor both sides share
gargs=("${args[0]}" "${args[1]}" "${args[3]}" "${args[4]}" "${args[5]}")
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
# The PyTorch side needs two packages the toolkit itself does not (kept out of scripts/deps/apt.txt
# so that set-up and CI stay small).
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || [ ! -f "$tc" ]; then
  echo "run_bench.sh: the baseline needs Debian python3-torch and libtcmalloc-minimal4:" >&2
  echo "  sudo apt-get install python3-torch libtcmalloc-minimal4" >&2
  exit 2
fi
if [ ! -x "$build/bench/bin/bench_train_step" ]; then
  echo "run_bench.sh: $build/bench/bin/bench_train_step not found (build first: cmake --build $build --target bench_train_step)" >&2
  exit 2
fi
# OPENBLAS_THREAD_TIMEOUT=4 for both sides: OpenBLAS's pthread workers otherwise spin ~2^28 cycles
# after every GEMM, through the ops that follow, on the cores the OpenMP threads need; PyTorch at 2
# threads is 16-24% faster with it (measured 2026-11-26, docs/benchmarks/train.md). causalflow
# threads its GEMMs through OpenMP (cf::nn::sgemm_omp) and is unaffected; the tuning is the baseline's.
tmo=(OPENBLAS_THREAD_TIMEOUT=4)
field() { sed -n "s/.*[ ]$1=\([0-9.eE+-]*\).*/\1/p" <<<" $2"; }  # field NAME LINE: the value of NAME=...
echo "# $(date -u '+%F %T UTC') load:$(cut -d' ' -f1-3 /proc/loadavg) OPENBLAS_CORETYPE=${core:-<unset>} ${tmo[*]}"
for th in 1 2; do
  # GEMM floor of one step and the FMA peak per thread at this moment (on a VM the second vCPU's
  # throughput moves with the host's load; a low peak explains a slow pair)
  if [ -x "$build/bench/bin/bench_gemm_ceiling" ]; then
    floor_line=$(env -u OPENBLAS_L2_SIZE "${coreenv[@]}" "${tmo[@]}" OMP_NUM_THREADS=$th OMP_WAIT_POLICY=PASSIVE "$build/bench/bin/bench_gemm_ceiling" "${gargs[@]}" 3 | tail -1)
    echo "threads=$th gemm floor: $floor_line"
    floor_s=$(field gemm_step_s "$floor_line")
  fi
  for rep in $(seq "$reps"); do
    cf_line=$(env -u OPENBLAS_L2_SIZE "${coreenv[@]}" "${tmo[@]}" OMP_NUM_THREADS=$th OMP_WAIT_POLICY=PASSIVE "$build/bench/bin/bench_train_step" "${args[@]}")
    echo "threads=$th rep=$rep $cf_line"
    torch_line=$(env -u OPENBLAS_L2_SIZE "${coreenv[@]}" "${tmo[@]}" OMP_NUM_THREADS=$th OMP_WAIT_POLICY=PASSIVE LD_PRELOAD="$tc" \
      /usr/bin/python3 "$here/torch_train_step.py" "${args[@]}")
    echo "threads=$th rep=$rep $torch_line"
    # ratio of the pair, and the ceiling: the ratio a step doing nothing but the GEMM floor would
    # reach against this PyTorch step (passing it needs GEMMs faster than this sgemm)
    awk -v th="$th" -v rep="$rep" -v a="$(field tokens_per_s "$cf_line")" -v b="$(field tokens_per_s "$torch_line")" \
      -v ts="$(field step_s "$torch_line")" -v fs="${floor_s:-}" 'BEGIN {
        printf "threads=%s rep=%s ratio=%.2f", th, rep, a / b
        if (fs != "") printf " ceiling=%.2f (torch step / gemm floor)", ts / fs
        printf "\n" }'
  done
done
