#!/usr/bin/env bash
# End to end for the norm / MLP / residual variants of the device trainer (docs/gpu.md "Device
# trainer"): a model with RMSNorm (eps 1e-6), SwiGLU and a parallel residual, started by one CPU
# step (train_variant_start: the command line has no options for these), is continued by
# `train --device cuda` on the emulated device trainer (CF_GPU_EMULATE=1: the CUDA kernels executed
# on the CPU) and by `train --device cpu`: every logged training and validation loss agrees to
# float tolerance, and the device run's last.h5 resumes on the CPU.
# Usage: train_device_emu_variants.sh TRAIN_BINARY START_BINARY CORPUS WORKDIR
# CF_TRAIN_DEVICE_EMULATE=0 runs the same checks on a real device.
set -u
train="$1"; start="$2"; corpus="$3"; work="$4"
emu="${CF_TRAIN_DEVICE_EMULATE:-1}"
what=emulated; [ "$emu" = 0 ] && what=CUDA
rm -rf "$work"; mkdir -p "$work"
"$start" "$corpus" "$work/start" || { echo "train_variant_start failed"; exit 1; }
common=(--text "$corpus" --resume "$work/start/last.h5" --quiet)
"$train" "${common[@]}" --device cpu --out-dir "$work/cpu" || { echo "cpu run failed"; exit 1; }
CF_GPU_EMULATE=$emu "$train" "${common[@]}" --device cuda --out-dir "$work/emu" ||
  { echo "$what device run failed"; exit 1; }
# loss (column 2) and val_loss (column 3) of every logged step: relative difference < 1e-4
paste -d, "$work/cpu/log.csv" "$work/emu/log.csv" | awk -F, 'NR > 1 {
  for (c = 2; c <= 3; ++c) {
    a = $c; b = $(c + 6); if (a == "" && b == "") continue
    d = a - b; if (d < 0) d = -d
    if (a == "" || b == "" || d > 1e-4 * (a < 0 ? -a : a)) { print "step " $1 " column " c ": cpu " a ", device " b; bad = 1 }
    else n++
  }
} END { if (bad || n < 3) exit 1; print "ok: " n " losses agree" }' || { echo "device losses differ from the CPU's"; exit 1; }
grep -q '^4,' "$work/emu/log.csv" || { echo "device run did not reach step 4"; exit 1; }
# the device run's checkpoint (the variant model and its moments) resumes on the CPU
"$train" --text "$corpus" --resume "$work/emu/last.h5" --steps 5 --replan-schedule --device cpu --quiet \
  --out-dir "$work/emu" || { echo "device checkpoint does not resume on the CPU"; exit 1; }
grep -q '^5,' "$work/emu/log.csv" || { echo "resumed run did not reach step 5"; exit 1; }
echo "ok: device trainer ($what) = CPU trainer end to end, RMSNorm + SwiGLU + parallel residual"
