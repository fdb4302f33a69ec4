#!/usr/bin/env bash
# Every tool's CSV mode (issue 9, acceptance 4; issue 29: every tool and every mode): each CSV report
# is checked by check_csv.py with /usr/bin/python3 (csv module + the documented
# numpy.genfromtxt(f, names=True, dtype=None, delimiter=',', comments=None, encoding='utf-8') call).
# Usage: csv_outputs.sh BIN_DIR CORPUS CHECKER
set -u
BIN="$(cd "$1" && pwd)"; CORPUS="$(realpath "$2")"; CHECK="$(realpath "$3")"
PY=/usr/bin/python3
if ! $PY -c "import numpy" 2>/dev/null; then
  # a CI run must not pass by skipping: a missing numpy there is a failure
  if [ "${CI:-}" = "true" ]; then echo "FAIL: /usr/bin/python3 has no numpy (needed by check_csv.py) and CI=true"; exit 1; fi
  echo "skipped: /usr/bin/python3 has no numpy"; exit 77
fi
export OMP_NUM_THREADS=1
W="$PWD/core_csv_outputs"; rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
run() { "$@" >/dev/null 2>err.txt || { cat err.txt; echo "FAIL: $*"; exit 1; }; }
FILES=()
csv() { FILES+=("$1"); }  # a CSV to check
# prepare-data (corpus and the three probe tasks), train (report and log.csv), capture
run "$BIN/prepare-data" --corpus "$CORPUS" --out set --report prepare.csv; csv prepare.csv
run "$BIN/prepare-data" --task boundary-copy --K 4 --b 4 --seq-len 32 --rows-train 40 --rows-val 20 --out bc \
  --report prepare_bc.csv; csv prepare_bc.csv
run "$BIN/prepare-data" --task passkey --corpus "$CORPUS" --lengths 48 --depths 0,0.5 --reps 1 --rows-train 4 --out pk \
  --report prepare_pk.csv; csv prepare_pk.csv
run "$BIN/prepare-data" --task ranking --corpus "$CORPUS" --context 64 --b 16 --w 32 --out rk --report prepare_rk.csv
csv prepare_rk.csv
run "$BIN/train" --data set --n-layer 2 --d-model 32 --n-head 2 --block-size 32 --seq-len 16 --batch 2 --steps 3 \
  --eval-interval 3 --ckpt-interval 1 --keep-every 1 --quiet --overwrite --out-dir run --out train.csv; csv train.csv
cp run/log.csv train_log.csv; csv train_log.csv
run "$BIN/capture" --checkpoint run/last.h5 --data set --seq-len 16 --n-seq 2 --out cap.h5 --report capture.csv
csv capture.csv
# spectral: one checkpoint and the series over training; spectral-surgery: rank, linearize, sweeps
run "$BIN/spectral" --checkpoint run/last.h5 --out spectral.csv; csv spectral.csv
run "$BIN/spectral" --checkpoint 'run/step_*.h5' --level weight --out spectral_series.csv; csv spectral_series.csv
run "$BIN/spectral-surgery" --checkpoint run/last.h5 --data set --sweep both --max-tokens 256 --out surgery.csv
csv surgery.csv
run "$BIN/spectral-surgery" --checkpoint run/last.h5 --data set --rank 2 --max-tokens 256 --out surgery_rank.csv
csv surgery_rank.csv
# coverage: plain, --compare with runways, --schedule with --verify, closure, probes and accuracies
run "$BIN/coverage" --pattern pbb --n 256 --b 16 --out coverage_plain.csv; csv coverage_plain.csv
run "$BIN/coverage" --pattern pbb --n 256 --b 16 --compare swa --runways 0,40 --out coverage.csv; csv coverage.csv
run "$BIN/coverage" --schedule pbb,pbb,full --n 256 --b 16 --verify --format csv --out coverage_schedule.txt
csv coverage_schedule.txt
run "$BIN/coverage" --pattern swa --w 16 --b 16 --layers 4 --n 256 --coverage closure --out coverage_closure.csv
csv coverage_closure.csv
printf 'd,r,weight\n1,0,1\n20,3,2\n' > probes.csv
run "$BIN/coverage" --pattern pbb --n 256 --b 16 --probes probes.csv --K 8 --accuracy model=0.6,block=0.4,swa=0.7 \
  --out coverage_probes.csv; csv coverage_probes.csv
# rollout: every mode
run "$BIN/rollout" --model bloom --n 64 --out rollout.csv; csv rollout.csv
run "$BIN/rollout" --model cap.h5 --alpha measured --out rollout_capture.csv; csv rollout_capture.csv
run "$BIN/rollout" sweep --model bloom --n 16,32 --out rollout_sweep.csv; csv rollout_sweep.csv
run "$BIN/rollout" monotonicity --model mpt-7b --n 16 --out rollout_monotonicity.csv; csv rollout_monotonicity.csv
run "$BIN/rollout" verify --model bloom --n 16 --seeds 1 --out rollout_verify.csv; csv rollout_verify.csv
run "$BIN/rollout" dichotomy --model bloom --n 4 --depth 100 --out rollout_dichotomy.csv; csv rollout_dichotomy.csv
run "$BIN/rollout" jacobian --model bloom --n 8 --out rollout_jacobian.csv; csv rollout_jacobian.csv
# influence and jacobian on the tiny model; rollout against that influence profile
run "$BIN/influence" --checkpoint run/last.h5 --data set --n 16 --windows 2 --out influence.csv; csv influence.csv
run "$BIN/rollout" --model cap.h5 --alpha measured --influence influence.csv --out rollout_influence.csv
csv rollout_influence.csv
run "$BIN/jacobian" --checkpoint run/last.h5 --data set --n 6 --out jacobian.csv; csv jacobian.csv
# probe: boundary copy with one and two checkpoints, passkey, ranking (tiny models, two steps)
common="--n-layer 1 --n-head 1 --d-model 8 --steps 2 --batch 2 --eval-batches 1 --quiet --warmup 0 --overwrite"
run "$BIN/train" --data bc --attn block --b 4 --block-size 32 $common --out-dir mbc
run "$BIN/train" --data pk --block-size 96 $common --out-dir mpk
run "$BIN/train" --data rk --block-size 96 $common --out-dir mrk
run "$BIN/probe" boundary-copy --data bc --checkpoint mbc/last.h5 --quiet --out probe_bc.csv; csv probe_bc.csv
run "$BIN/probe" boundary-copy --data bc --checkpoint mbc/last.h5 --checkpoint mbc/last.h5 --resamples 200 --quiet \
  --out probe_bc_paired.csv; csv probe_bc_paired.csv
run "$BIN/probe" passkey --data pk --checkpoint mpk/last.h5 --max-new 2 --quiet --out probe_pk.csv; csv probe_pk.csv
run "$BIN/probe" ranking --data rk --checkpoint mrk/last.h5 --quiet --out probe_rk.csv; csv probe_rk.csv
$PY "$CHECK" "${FILES[@]}" || exit 1
echo "ok: every CSV loads (${#FILES[@]} files)"
