#!/usr/bin/env bash
# compare_builds.sh OLD_BUILD NEW_BUILD [ROUNDS]
#
# Before/after pairs of two builds in the same run (issue 28, acceptance 4: no benchmark of
# docs/benchmarks.md slower by more than 3%). Each round runs every item with both builds,
# alternating which goes first (old/new, then new/old), with OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE unset for both sides and OMP_WAIT_POLICY=PASSIVE. Items:
#   train_step   bench_train_step, config (a) of docs/benchmarks/train.md (4 x 256, 4 heads, T 256,
#                B 8, bytes; 8 steps after 3 warm-up), 2 threads: seconds per step
#   rollout      bench_rollout's structured path at n = 1,048,576 (BLOOM-176B, variant (b); the
#                dense paths off): seconds
#   app_rollout  build/bin/rollout --model bloom --alpha measured --n 65536 (the whole tool): wall s
#   app_train    build/bin/train, 2 x 64 model, 60 steps on the Brown corpus (the whole tool): wall s
# Prints each pair and, per item, the median of new/old over the rounds (> 1: new slower), with
# the load average before and after.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-5}
# the items both builds can run (a build without its benchmarks, e.g. a copy of bin/ only, runs
# the tool items; the skipped items are named)
ITEMS=()
for it in train_step:bench/bin/bench_train_step rollout:bench/bin/bench_rollout app_rollout:bin/rollout \
  app_train:bin/train; do
  if [ -x "$OLD/${it#*:}" ] && [ -x "$NEW/${it#*:}" ]; then
    ITEMS+=("${it%%:*}")
  else
    echo "# skipped ${it%%:*}: ${it#*:} missing in a build"
  fi
done
[ "${#ITEMS[@]}" -gt 0 ] || { echo "compare_builds: nothing to compare" >&2; exit 2; }
TMP=$(mktemp -d /tmp/cf_compare.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2)

# item BUILD NAME: one measurement in seconds (smaller is faster)
item() {
  local b=$1 line t0 t1
  case "$2" in
    train_step)
      line=$("${ENV[@]}" "$b/bench/bin/bench_train_step" 4 256 4 256 8 256 8 3)
      sed -n 's/.*[ ]step_s=\([0-9.eE+-]*\).*/\1/p' <<<" $line" ;;
    rollout)
      "${ENV[@]}" "$b/bench/bin/bench_rollout" 1 1 | awk '$1 == "1048576" {print $2}' ;;
    app_rollout)
      t0=$(date +%s.%N)
      "${ENV[@]}" "$b/bin/rollout" --model bloom --alpha measured --n 65536 > /dev/null
      t1=$(date +%s.%N)
      awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}' ;;
    app_train)
      rm -rf "$TMP/run"
      t0=$(date +%s.%N)
      "${ENV[@]}" "$b/bin/train" --corpus brown --n-layer 2 --n-head 2 --d-model 64 --block-size 64 --seq-len 64 \
        --batch 8 --steps 60 --warmup 10 --eval-interval 30 --ckpt-interval 60 --out-dir "$TMP/run" --quiet > /dev/null
      t1=$(date +%s.%N)
      awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}' ;;
  esac
}

echo "# $(date -u '+%F %T UTC') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# old $OLD"
echo "# new $NEW"
for it in "${ITEMS[@]}"; do : > "$TMP/$it.ratios"; done
for r in $(seq "$ROUNDS"); do
  for it in "${ITEMS[@]}"; do
    if [ $((r % 2)) = 1 ]; then
      o=$(item "$OLD" "$it"); n=$(item "$NEW" "$it")
    else
      n=$(item "$NEW" "$it"); o=$(item "$OLD" "$it")
    fi
    awk -v it="$it" -v r="$r" -v o="$o" -v n="$n" 'BEGIN {printf "round %d %-12s old %.4f s  new %.4f s  new/old %.3f\n", r, it, o, n, n / o}'
    awk -v o="$o" -v n="$n" 'BEGIN {printf "%.6f\n", n / o}' >> "$TMP/$it.ratios"
  done
done
echo "# medians of new/old over $ROUNDS rounds (> 1: new slower); load $(cut -d' ' -f1-3 /proc/loadavg)"
for it in "${ITEMS[@]}"; do
  sort -g "$TMP/$it.ratios" | awk -v it="$it" '{v[NR] = $1} END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%-12s median new/old %.3f (min %.3f, max %.3f)\n", it, m, v[1], v[NR] }'
done
