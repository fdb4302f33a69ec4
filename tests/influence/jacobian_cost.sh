#!/bin/sh
# jacobian states its cost before the work (issue 29). The expected counts are computed here from
# the formula, not read from the tool: a span r = 2 from layer 0 is r one-layer runs plus the span
# run (3 Jacobian runs); each run makes n ceil(d_model / B) backward calls over the prefixes 1..n,
# d_model n (n + 1) / 2 token passes. --quiet drops the line.
# Usage: jacobian_cost.sh JACOBIAN CHECKPOINT CORPUS WORKDIR  (checkpoint: d_model 32, 2 layers)
set -u
jac="$1"; ck="$2"; corpus="$3"; work="$4"
n=12; C=32; B=5; runs=3
calls=$((runs * n * ((C + B - 1) / B)))
passes=$((runs * C * n * (n + 1) / 2))
"$jac" --checkpoint "$ck" --text "$corpus" --n $n --seed-batch $B 2>"$work/jac_cost.txt" >/dev/null || {
  cat "$work/jac_cost.txt"; exit 1; }
line="$(sed 's/\([0-9]\),\([0-9]\)/\1\2/g' "$work/jac_cost.txt" | grep '^jacobian: ')"  # 7,488 -> 7488
echo "$line"
echo "$line" | grep -q "^jacobian: $calls backward passes ($passes token passes, n = $n, d_model = $C, 3 Jacobian runs); about [0-9hms]* (a timed pass of [0-9.e-]* s)$" ||
  { echo "expected $calls backward passes and $passes token passes"; exit 1; }
"$jac" --checkpoint "$ck" --text "$corpus" --n $n --seed-batch $B --quiet 2>"$work/jac_quiet.txt" >/dev/null || exit 1
[ ! -s "$work/jac_quiet.txt" ] || { echo "--quiet printed:"; cat "$work/jac_quiet.txt"; exit 1; }
echo "ok: $calls backward passes, $passes token passes stated"
