#!/usr/bin/env bash
# Every tool's CSV mode (issue 9, acceptance 4): each CSV report is checked by check_csv.py with
# /usr/bin/python3 (csv module + numpy). Usage: csv_outputs.sh BIN_DIR CORPUS CHECKER
set -u
BIN="$(cd "$1" && pwd)"; CORPUS="$(realpath "$2")"; CHECK="$(realpath "$3")"
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || { echo "skipped: /usr/bin/python3 has no numpy"; exit 77; }
export OMP_NUM_THREADS=1
W="$PWD/core_csv_outputs"; rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
run() { "$@" >/dev/null 2>err.txt || { cat err.txt; echo "FAIL: $*"; exit 1; }; }
run "$BIN/prepare-data" --corpus "$CORPUS" --out set --report prepare.csv
run "$BIN/train" --data set --n-layer 2 --d-model 32 --n-head 2 --block-size 32 --seq-len 16 --batch 2 --steps 3 \
  --eval-interval 3 --ckpt-interval 3 --quiet --overwrite --out-dir run --out train.csv
run "$BIN/capture" --checkpoint run/last.h5 --data set --seq-len 16 --n-seq 2 --out cap.h5 --report capture.csv
run "$BIN/spectral" --checkpoint run/last.h5 --out spectral.csv
run "$BIN/spectral-surgery" --checkpoint run/last.h5 --data set --sweep both --max-tokens 256 --out surgery.csv
run "$BIN/coverage" --pattern pbb --n 256 --b 16 --compare swa --runways 0,40 --out coverage.csv
run "$BIN/coverage" --schedule pbb,pbb,full --n 256 --b 16 --verify --format csv --out coverage_schedule.txt
run "$BIN/rollout" --model bloom --n 64 --out rollout.csv
run "$BIN/rollout" --model cap.h5 --alpha measured --out rollout_capture.csv
run "$BIN/rollout" monotonicity --model mpt-7b --n 16 --out rollout_monotonicity.csv
run "$BIN/rollout" verify --model bloom --n 16 --seeds 1 --out rollout_verify.csv
run "$BIN/rollout" dichotomy --model bloom --n 4 --depth 100 --out rollout_dichotomy.csv
run "$BIN/rollout" jacobian --model bloom --n 8 --out rollout_jacobian.csv
cp run/log.csv train_log.csv
$PY "$CHECK" prepare.csv train.csv capture.csv spectral.csv surgery.csv coverage.csv coverage_schedule.txt rollout.csv \
  rollout_capture.csv rollout_monotonicity.csv rollout_verify.csv rollout_dichotomy.csv rollout_jacobian.csv train_log.csv || exit 1
echo "ok: every CSV loads"
