#!/usr/bin/env bash
# End to end, issue 31: `train --device cuda` on the emulated device trainer (CF_GPU_EMULATE=1,
# docs/gpu.md "Device trainer") against `train --device cpu` for the attention features: a
# RoPE + grouped-query model (the CLI has no GQA option: a RoPE checkpoint of the CPU is cut to
# 2 key/value heads of 4 by make_gqa_checkpoint.py) and a runway-bilinear model. Every logged loss
# agrees to float tolerance, and checkpoints cross both ways: the CPU's resumes on the device and
# the device's on the CPU, each equal to the same resume on the other side.
# Usage: train_device_emu_attn.sh TRAIN_BINARY CORPUS WORKDIR MAKE_GQA_PY
set -u
train="$1"; corpus="$2"; work="$3"; make_gqa="$4"
rm -rf "$work"; mkdir -p "$work"
run=(--text "$corpus" --n-layer 2 --n-head 4 --d-model 16 --block-size 64 --seq-len 37 --batch 2 --warmup 1
     --lr 1e-2 --eval-interval 2 --eval-batches 1 --quiet)
# cpu: train "$@" --device cpu; emu: the same on the emulated device trainer
cpu() { "$train" "$@" --device cpu >/dev/null || { echo "cpu run failed: $*"; exit 1; }; }
emu() { CF_GPU_EMULATE=1 "$train" "$@" --device cuda >/dev/null || { echo "device run failed: $*"; exit 1; }; }
# loss and val_loss of every step logged in both runs agree to 1e-5 relative (float32); at least $3 values
same() {
  paste -d, "$1/log.csv" "$2/log.csv" | awk -F, -v need="$3" -v what="$1 vs $2" 'NR > 1 {
    if ($1 != $7) { print what ": step " $1 " against " $7; bad = 1 }
    for (c = 2; c <= 3; ++c) {
      a = $c; b = $(c + 6); if (a == "" && b == "") continue
      d = a - b; if (d < 0) d = -d
      if (a == "" || b == "" || d > 1e-5 * (a < 0 ? -a : a)) { print what ": step " $1 " column " c ": " a " vs " b; bad = 1 }
      else n++
    }
  } END { if (bad || n < need) { print what ": " n " losses agree, need " need; exit 1 } }' || exit 1
}
resume=(--text "$corpus" --quiet --replan-schedule)

# RoPE + GQA: the cut checkpoint resumed on both sides, then the CPU's result resumed on both
cpu "${run[@]}" --pos rope --attn full,swa --w 10 --steps 1 --out-dir "$work/rope0"
/usr/bin/python3 "$make_gqa" "$work/rope0/last.h5" "$work/gqa.h5" 2 || { echo "make_gqa_checkpoint failed"; exit 1; }
cpu "${resume[@]}" --resume "$work/gqa.h5" --steps 4 --out-dir "$work/gqa_cpu"
emu "${resume[@]}" --resume "$work/gqa.h5" --steps 4 --out-dir "$work/gqa_emu"
same "$work/gqa_cpu" "$work/gqa_emu" 5
cpu "${resume[@]}" --resume "$work/gqa_cpu/last.h5" --steps 6 --out-dir "$work/gqa_cpu2"
emu "${resume[@]}" --resume "$work/gqa_cpu/last.h5" --steps 6 --out-dir "$work/gqa_emu2"
same "$work/gqa_cpu2" "$work/gqa_emu2" 3

# runway bilinear: 3 steps on both sides, then the device's checkpoint resumed on both
cpu "${run[@]}" --attn runway-bilinear,full --steps 3 --out-dir "$work/rw_cpu"
emu "${run[@]}" --attn runway-bilinear,full --steps 3 --out-dir "$work/rw_emu"
same "$work/rw_cpu" "$work/rw_emu" 4
cpu "${resume[@]}" --resume "$work/rw_emu/last.h5" --steps 5 --out-dir "$work/rw_cpu2"
emu "${resume[@]}" --resume "$work/rw_emu/last.h5" --steps 5 --out-dir "$work/rw_emu2"
same "$work/rw_cpu2" "$work/rw_emu2" 3
echo "ok: device trainer (emulated) = CPU trainer end to end for RoPE + GQA and runway-bilinear"
