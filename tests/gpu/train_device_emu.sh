#!/usr/bin/env bash
# End to end: `train --device cuda` on the emulated device trainer (CF_GPU_EMULATE=1: the CUDA
# kernels executed on the CPU, docs/gpu.md "Device trainer") against `train --device cpu` on the
# same run: every logged training loss and the validation losses agree to float tolerance, the
# device run's last.h5 resumes on the CPU, and a config the device trainer lacks is refused with
# exit 2 naming the feature. Usage: train_device_emu.sh TRAIN_BINARY CORPUS WORKDIR
# CF_TRAIN_DEVICE_EMULATE=0 runs the same checks on a real device (scripts/device/run_checks.sh).
set -u
train="$1"; corpus="$2"; work="$3"
emu="${CF_TRAIN_DEVICE_EMULATE:-1}"
what=emulated; [ "$emu" = 0 ] && what=CUDA
rm -rf "$work"; mkdir -p "$work"
run=(--text "$corpus" --n-layer 2 --attn swa,bridge --b 12 --w 10 --block-size 64
     --seq-len 37 --batch 2 --warmup 1 --lr 1e-2 --eval-interval 3 --eval-batches 1 --quiet)
base=("${run[@]}" --n-head 2 --d-model 16)
common=("${base[@]}" --steps 3)
"$train" "${common[@]}" --device cpu --out-dir "$work/cpu" || { echo "cpu run failed"; exit 1; }
CF_GPU_EMULATE=$emu "$train" "${common[@]}" --device cuda --out-dir "$work/emu" || { echo "$what device run failed"; exit 1; }
# loss (column 2) and val_loss (column 3) of every logged step: relative difference < 1e-4
paste -d, "$work/cpu/log.csv" "$work/emu/log.csv" | awk -F, 'NR > 1 {
  for (c = 2; c <= 3; ++c) {
    a = $c; b = $(c + 6); if (a == "" && b == "") continue
    d = a - b; if (d < 0) d = -d
    if (a == "" || b == "" || d > 1e-4 * (a < 0 ? -a : a)) { print "step " $1 " column " c ": cpu " a ", device " b; bad = 1 }
    else n++
  }
} END { if (bad || n < 4) exit 1; print "ok: " n " losses agree" }' || { echo "device losses differ from the CPU's"; exit 1; }
# the device run's checkpoint resumes on the CPU (same format)
"$train" "${base[@]}" --device cpu --resume "$work/emu/last.h5" --steps 4 --replan-schedule --out-dir "$work/emu" ||
  { echo "device checkpoint does not resume on the CPU"; exit 1; }
grep -q '^4,' "$work/emu/log.csv" || { echo "resumed run did not reach step 4"; exit 1; }
# refusal of a feature the kernels lack (exit 2, one line naming it)
CF_GPU_EMULATE=$emu "$train" "${run[@]}" --steps 3 --device cuda --n-head 1 --d-model 160 --out-dir "$work/wide" 2>"$work/wide.err"
rc=$?
[ "$rc" = 2 ] && grep -q "does not support head dimension 160 > 128" "$work/wide.err" ||
  { echo "head dimension 160: exit $rc"; cat "$work/wide.err"; exit 1; }
[ -e "$work/wide" ] && { echo "a refused run created its output folder"; exit 1; }
echo "ok: device trainer ($what) = CPU trainer end to end"
