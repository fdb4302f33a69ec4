#!/usr/bin/env bash
# End to end for the device trainer's precision policies (docs/gpu.md "Precision policies"):
# `train --device cuda --precision bf16` (and tf32) on the emulated device trainer (CF_GPU_EMULATE=1)
# runs, records its precision in the report and the checkpoint's train_config, starts at the float32
# CPU run's loss within the format's unit roundoff (step 1 is the initial model's loss: no update yet),
# writes a float32 checkpoint that `--device cpu` resumes (in fp32, said on stderr) and that the
# device resumes in bf16; the refusals exit 2 before anything is written: tf32 / bf16 with
# --device cpu, --device auto (train has no auto), an unknown precision, and resuming a bf16
# checkpoint in tf32. Usage: train_device_emu_precision.sh TRAIN_BINARY CORPUS WORKDIR
# CF_TRAIN_DEVICE_EMULATE=0 runs the same checks on a real device (scripts/device/run_checks.sh).
set -u
train="$1"; corpus="$2"; work="$3"
emu="${CF_TRAIN_DEVICE_EMULATE:-1}"
what=emulated; [ "$emu" = 0 ] && what=CUDA
rm -rf "$work"; mkdir -p "$work"
run=(--text "$corpus" --n-layer 2 --n-head 2 --d-model 16 --block-size 64 --seq-len 24 --batch 2 --warmup 1
     --lr 1e-2 --eval-interval 2 --eval-batches 1 --steps 4 --quiet)
fail() { echo "$1"; exit 1; }
"$train" "${run[@]}" --stop-after 2 --device cpu --out-dir "$work/cpu" >/dev/null || fail "cpu run failed"
for prec in tf32 bf16; do
  CF_GPU_EMULATE=$emu "$train" "${run[@]}" --stop-after 2 --device cuda --precision $prec --out-dir "$work/$prec" \
    --out "$work/$prec.json" || fail "$what $prec run failed"
  grep -Eq "\"precision\": ?\"$prec\"" "$work/$prec.json" || fail "$prec: the report does not record the precision"
  # step 1's loss (the initial model's) within the unit roundoff of the format: 2^-11 TF32, 2^-8 bf16
  u=$([ $prec = tf32 ] && echo 0.00048828125 || echo 0.00390625)
  paste -d, "$work/cpu/log.csv" "$work/$prec/log.csv" | awk -F, -v u=$u -v p=$prec 'NR == 2 {
    d = $2 - $8; if (d < 0) d = -d
    if (d > u * $2) { print p ": step 1 loss cpu " $2 ", device " $8; exit 1 }
    print "ok: " p " step 1 loss within " d / $2 " relative (unit roundoff " u ")" }' || fail "$prec: first loss off"
done
# the bf16 checkpoint is the float32 format (every dataset float32, where h5py is installed) ...
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  /usr/bin/python3 - "$work/bf16/last.h5" <<'PY' || fail "the bf16 checkpoint is not all float32"
import sys, h5py
bad = []
h5py.File(sys.argv[1], "r").visititems(lambda n, o: bad.append(n) if isinstance(o, h5py.Dataset) and o.dtype != "float32" else None)
sys.exit(1 if bad else 0)
PY
fi
# ... and the CPU resumes it (in fp32, said), to step 4
CF_GPU_EMULATE=$emu "$train" --text "$corpus" --resume "$work/bf16/last.h5" --device cpu --out-dir "$work/bf16" >/dev/null \
  2>"$work/cpu_resume.err" || { cat "$work/cpu_resume.err"; fail "the CPU does not resume the bf16 checkpoint"; }
grep -q "trained in bf16; this run continues it in fp32" "$work/cpu_resume.err" || fail "no note on the fp32 resume"
grep -q '^4,' "$work/bf16/log.csv" || fail "the CPU resume did not reach step 4"
# the device resumes a bf16 checkpoint in bf16 when --precision is not given
CF_GPU_EMULATE=$emu "$train" "${run[@]}" --stop-after 2 --device cuda --precision bf16 --out-dir "$work/bf16b" >/dev/null ||
  fail "$what bf16 run failed"
CF_GPU_EMULATE=$emu "$train" --text "$corpus" --resume "$work/bf16b/last.h5" --device cuda --quiet \
  --out-dir "$work/bf16b" --out "$work/bf16b.json" || fail "the device does not resume the bf16 checkpoint"
grep -Eq '"precision": ?"bf16"' "$work/bf16b.json" || fail "the device resume left bf16"
# refusals: exit 2, the reason, no output folder
refuse() {  # NAME PATTERN ARGS...
  local name="$1" pat="$2"; shift 2
  CF_GPU_EMULATE=$emu "$train" "$@" 2>"$work/refused.err"
  local rc=$?
  [ "$rc" = 2 ] && grep -Eq -- "$pat" "$work/refused.err" || { echo "$name: exit $rc"; cat "$work/refused.err"; exit 1; }
}
refuse "bf16 on the CPU" "--precision bf16 needs the device trainer \(--device cuda\)" \
  "${run[@]}" --device cpu --precision bf16 --out-dir "$work/never1"
refuse "tf32 on the default device" "--precision tf32 needs the device trainer" \
  "${run[@]}" --precision tf32 --out-dir "$work/never2"
refuse "bf16 with --device auto" "--device: auto not in" "${run[@]}" --device auto --precision bf16 --out-dir "$work/never3"
refuse "an unknown precision" "--precision: fp16 not in" "${run[@]}" --device cuda --precision fp16 --out-dir "$work/never4"
refuse "tf32 over a bf16 checkpoint" "--precision tf32: the --resume checkpoint was trained in bf16" \
  --text "$corpus" --resume "$work/bf16b/last.h5" --steps 6 --replan-schedule --device cuda --precision tf32 \
  --out-dir "$work/bf16b"
for d in never1 never2 never3 never4; do [ -e "$work/$d" ] && fail "a refused run created $d"; done
grep -q '^5,' "$work/bf16b/log.csv" && fail "a refused resume trained"
echo "ok: device trainer ($what) precision policies end to end"
