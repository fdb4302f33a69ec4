#!/usr/bin/env bash
# Thread default under load (issue 9, acceptance 3): 30 training steps with the default thread count
# (--threads 0, measured at start) and with --threads 1, REPEATS times each, interleaved, while two
# CPU burners compete for the cores; then once --threads $(nproc) (the old default: one OpenMP /
# OpenBLAS thread per core), capped at 20x. Numbers go to docs/benchmarks.md ("Thread default under
# load"). Usage: bench/threads/train_under_load.sh [BUILD_DIR] [REPEATS]
# --help prints this text.
set -eu
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
BUILD="${1:-build}"; REPEATS="${2:-3}"
TRAIN="$BUILD/bin/train"
[ -x "$TRAIN" ] || { echo "no $TRAIN (build the train target first)"; exit 1; }
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OMP_NUM_THREADS OMP_WAIT_POLICY GOMP_SPINCOUNT
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CORPUS="$ROOT/tests/nn/data/tiny_corpus.txt"
W="$(mktemp -d)"
BURNERS=()
cleanup() { for p in "${BURNERS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
trap "exit 130" INT TERM
MODEL=(--n-layer 2 --n-head 2 --d-model 64 --block-size 64 --seq-len 64 --batch 8 --steps 30 --warmup 5
       --eval-interval 1000 --ckpt-interval 1000 --quiet)
run() {  # THREADS -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$TRAIN" --text "$CORPUS" "${MODEL[@]}" --threads "$1" --overwrite --out-dir "$W/run" >/dev/null 2>&1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }' 
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "machine: $(nproc) cores; load before burners: $(uptime | sed 's/.*load average: //')"
for _ in 1 2; do sh -c 'while :; do :; done' & BURNERS+=($!); done
sleep 1
echo "two burners running (pids ${BURNERS[*]}); load: $(uptime | sed 's/.*load average: //')"
N=$(nproc)
d=(); one=()
for r in $(seq 1 "$REPEATS"); do
  d+=("$(run 0)"); one+=("$(run 1)")
  echo "repeat $r: default ${d[-1]} s, --threads 1 ${one[-1]} s"
done
md=$(median "${d[@]}"); m1=$(median "${one[@]}")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "median: default $md s, --threads 1 $m1 s"
echo "ratio default / --threads 1 = $(ratio "$md" "$m1") (acceptance: <= 2)"
# The old default (one thread per core), once, capped at 20x the one-thread time: it collapses.
cap=$(awk -v a="$m1" 'BEGIN { printf "%d", 20 * a + 1 }')
t0=$(date +%s.%N)
if timeout "$cap" "$TRAIN" --text "$CORPUS" "${MODEL[@]}" --threads "$N" --overwrite --out-dir "$W/run" >/dev/null 2>&1; then
  mn=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  echo "--threads $N (the old default): $mn s, ratio to --threads 1 = $(ratio "$mn" "$m1")"
else
  echo "--threads $N (the old default): stopped after the cap of $cap s, ratio to --threads 1 > $(ratio "$cap" "$m1")"
fi
echo "load after: $(uptime | sed 's/.*load average: //')"
