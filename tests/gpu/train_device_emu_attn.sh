#!/usr/bin/env bash
# End to end, issue 31: `train --device cuda` on the emulated device trainer (CF_GPU_EMULATE=1,
# docs/gpu.md "Device trainer") against `train --device cpu` for the attention features: a
# Llama-like model (RoPE, grouped-query attention with 2 key/value heads of 4, RMSNorm, SwiGLU; the
# command line has no GQA option, so `train_variant_start ... llama` writes its first CPU step) and
# a runway-bilinear model. Every logged loss agrees to float tolerance, and checkpoints cross both
# ways: the CPU's resumes on the device and the device's on the CPU, each equal to the same resume
# on the other side. Usage: train_device_emu_attn.sh TRAIN_BINARY START_BINARY CORPUS WORKDIR
# CF_TRAIN_DEVICE_EMULATE=0 runs the same checks on a real device (tolerance 1e-4 there).
set -u
train="$1"; start="$2"; corpus="$3"; work="$4"
emu="${CF_TRAIN_DEVICE_EMULATE:-1}"
tol=1e-5; [ "$emu" = 0 ] && tol=1e-4
rm -rf "$work"; mkdir -p "$work"
run=(--text "$corpus" --n-layer 2 --n-head 4 --d-model 16 --block-size 64 --seq-len 37 --batch 2 --warmup 1
     --lr 1e-2 --eval-interval 2 --eval-batches 1 --quiet)
# cpu: train "$@" --device cpu; dev: the same on the (emulated) device trainer
cpu() { "$train" "$@" --device cpu >/dev/null || { echo "cpu run failed: $*"; exit 1; }; }
dev() { CF_GPU_EMULATE=$emu "$train" "$@" --device cuda >/dev/null || { echo "device run failed: $*"; exit 1; }; }
# loss and val_loss of every step logged in both runs agree to $tol relative; at least $3 values
same() {
  paste -d, "$1/log.csv" "$2/log.csv" | awk -F, -v need="$3" -v tol="$tol" -v what="$1 vs $2" 'NR > 1 {
    if ($1 != $7) { print what ": step " $1 " against " $7; bad = 1 }
    for (c = 2; c <= 3; ++c) {
      a = $c; b = $(c + 6); if (a == "" && b == "") continue
      d = a - b; if (d < 0) d = -d
      if (a == "" || b == "" || d > tol * (a < 0 ? -a : a)) { print what ": step " $1 " column " c ": " a " vs " b; bad = 1 }
      else n++
    }
  } END { if (bad || n < need) { print what ": " n " losses agree, need " need; exit 1 } }' || exit 1
}
resume=(--text "$corpus" --quiet --replan-schedule)

# Llama-like: its first step resumed on both sides (to step 4, its schedule), then the CPU's
# result resumed on both (to step 6)
"$start" "$corpus" "$work/llama0" llama || { echo "train_variant_start llama failed"; exit 1; }
cpu --text "$corpus" --quiet --resume "$work/llama0/last.h5" --out-dir "$work/llama_cpu"
dev --text "$corpus" --quiet --resume "$work/llama0/last.h5" --out-dir "$work/llama_dev"
same "$work/llama_cpu" "$work/llama_dev" 4
cpu "${resume[@]}" --resume "$work/llama_cpu/last.h5" --steps 6 --out-dir "$work/llama_cpu2"
dev "${resume[@]}" --resume "$work/llama_cpu/last.h5" --steps 6 --out-dir "$work/llama_dev2"
same "$work/llama_cpu2" "$work/llama_dev2" 3

# runway bilinear: 3 steps on both sides, then the device's checkpoint resumed on both
cpu "${run[@]}" --attn runway-bilinear,full --steps 3 --out-dir "$work/rw_cpu"
dev "${run[@]}" --attn runway-bilinear,full --steps 3 --out-dir "$work/rw_dev"
same "$work/rw_cpu" "$work/rw_dev" 4
cpu "${resume[@]}" --resume "$work/rw_dev/last.h5" --steps 5 --out-dir "$work/rw_cpu2"
dev "${resume[@]}" --resume "$work/rw_dev/last.h5" --steps 5 --out-dir "$work/rw_dev2"
same "$work/rw_cpu2" "$work/rw_dev2" 3
echo "ok: device trainer = CPU trainer end to end for a Llama-like model (RoPE + GQA) and runway-bilinear"
