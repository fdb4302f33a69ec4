#!/usr/bin/env bash
# check_identical.sh OLD_BUILD NEW_BUILD [OUT] [--quick] [--compare-only]
#
# Byte-for-byte comparison of what two builds write (issue 28, acceptance 2): every example of
# README.md ("### Examples"), every tool's --help and the main job (scripts/main_job.sh) run with OLD_BUILD's binaries
# in OUT/old and with NEW_BUILD's in OUT/new (OUT defaults to a temporary folder), then every file
# both runs wrote, their stdout and their stderr are compared.
#
# What is compared, and what is masked (the only differences two runs of ONE build show):
#   - text files (reports, CSV, JSON, SVG, log.csv, stdout, stderr): byte for byte after these
#     substitutions, each a wall time, a date or the build's identity:
#       "created_utc": "..."            (JSON meta block: the run's date)
#       "git_revision": "..."           (JSON meta block: the commit each build was made from)
#       created_utc,... / git_revision,... / # created_utc / # git_revision  (CSV and table meta lines)
#       "seconds" / "encode_seconds": N, the `seconds` column of the rollout tables ((a)/(b)/(c) and
#       sweep rows), the `seconds` row of rollout flow's table, prepare-data's `encode time (s)` row
#       "tokens_per_s" / "time_s" / "elapsed_s" / "wall_s": N (JSON), train's "| N tok/s | ETA T"
#       log.csv's tokens_per_s and time columns, the train report's tok/s and wall-time cells
#       `Made by scripts/main_job.sh on DATE (git REV, N cores)` (main job page)
#       the two build folders' paths (commands echoed into the main job page)
#     The masks are applied by mask() below; a line that differs in anything else is a failure.
#   - HDF5 files (checkpoints, captures): every group, dataset (values compared as bytes) and
#     attribute, with /usr/bin/python3 and h5py (HDF5 stores object modification times, so the files'
#     bytes differ between two runs of one build); string attributes get the masks above.
#   - PNG files are not written by the examples; gnuplot's SVGs carry no date and are compared.
#
# --quick: `train --corpus brown --steps 600` also gets --stop-after 20 (same schedule, 20 updates;
# the spectral, spectral-surgery and mc-eval examples then read that checkpoint). Without it the
# full 600 steps run twice (about 10 minutes each on 2 cores).
# --compare-only: compare OUT/old and OUT/new of an earlier run again (after a mask changed).
# Exit 0 when everything is identical, 1 otherwise (the differing files listed, diffs in OUT).
set -euo pipefail

quick=0
compare_only=0
args=()
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --compare-only) compare_only=1 ;;
    *) args+=("$a") ;;
  esac
done
[ "${#args[@]}" -ge 2 ] || { sed -n '2,30p' "$0"; exit 2; }
OLD=$(cd "${args[0]}" && pwd)
NEW=$(cd "${args[1]}" && pwd)
OUT=${args[2]:-$(mktemp -d /tmp/cf_identical.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
for b in "$OLD" "$NEW"; do
  [ -x "$b/bin/rollout" ] || { echo "check_identical: $b/bin/rollout missing (build the main_job target)" >&2; exit 2; }
done

# the README examples, one per line, with BIN for the build's bin folder (README.md "### Examples";
# arc_easy.jsonl is the repository's ARC test file, copied in)
examples() {
  local stop=""
  [ "$quick" = 1 ] && stop=" --stop-after 20"
  cat <<EOF
BIN/coverage --pattern se-bridge --b 128
BIN/coverage --schedule pbb,pbb,pbb,full --n 8192 --format json
BIN/coverage --pattern swa --layers 32 --n 65536 --coverage closure --plot swa.svg
BIN/coverage --pattern se-bridge --compare swa --verify
BIN/rollout --model bloom --alpha measured --plot bloom.svg
BIN/rollout flow --model bloom-7b1 --n 64 --plot flow.svg
BIN/rollout verify
BIN/prepare-data --corpus brown --tokenizer byte --out data_brown
BIN/train --corpus brown --steps 600 --out-dir runs/brown$stop
BIN/spectral --checkpoint runs/brown/best.h5 --plot cascade.svg
BIN/spectral-surgery --checkpoint runs/brown/best.h5 --data data_brown --sweep both
BIN/mc-eval --data arc_easy.jsonl --checkpoint runs/brown/best.h5
EOF
}

# run_side BUILD DIR: every example and the main job with BUILD's binaries, in DIR
run_side() {
  local build=$1 dir=$2 i=0 line
  rm -rf "$dir"
  mkdir -p "$dir/readme" "$dir/main_job"
  cp "$REPO/tests/eval/data/arc.jsonl" "$dir/readme/arc_easy.jsonl"
  while IFS= read -r line; do
    i=$((i + 1))
    local cmd=${line//BIN/$build/bin}
    printf '%02d %s\n' "$i" "$line" >> "$dir/readme/commands.txt"
    # shellcheck disable=SC2086  # the example's words
    (cd "$dir/readme" && $cmd > "$(printf 'ex%02d' $i).stdout" 2> "$(printf 'ex%02d' $i).stderr"; \
      echo "exit $?" > "$(printf 'ex%02d' $i).rc") || true
  done < <(examples)
  # every tool's --help (and each rollout subcommand's): option lists, validators, defaults
  mkdir -p "$dir/help"
  for t in "$build"/bin/*; do
    "$t" --help > "$dir/help/$(basename "$t").txt" 2>&1 || true
  done
  for sub in sweep monotonicity verify dichotomy jacobian flow; do
    "$build/bin/rollout" "$sub" --help > "$dir/help/rollout_$sub.txt" 2>&1 || true
  done
  (cd "$dir/main_job" && bash "$REPO/scripts/main_job.sh" "$build" > main_job.stdout 2> main_job.stderr; \
    echo "exit $?" > main_job.rc) || true
}

# mask FILE: the file with the wall times, dates and build identity of the header replaced
mask() {
  sed -E \
    -e "s#$OLD#BUILD#g; s#$NEW#BUILD#g" \
    -e 's#("created_utc": *)"[^"]*"#\1"DATE"#g' \
    -e 's#("git_revision": *)"[^"]*"#\1"REV"#g' \
    -e 's#^(\#? *created_utc[,:= ]+).*#\1DATE#' \
    -e 's#^(\#? *git_revision[,:= ]+).*#\1REV#' \
    -e 's#("(seconds|encode_seconds|tokens_per_s|mean_tokens_per_s|time_s|elapsed_s|wall_s|step_ms|ms)": *)[-+0-9.eE]+#\1T#g' \
    -e 's#[0-9,.]+ tok/s \| ETA [^ ]+#N tok/s | ETA T#g' \
    -e 's#(mean tokens/s) +[0-9,.]+#\1 T#' \
    -e 's#^( *encode time \(s\)) +[-+0-9.eE]+#\1 T#' \
    -e 's#^( *seconds) +[-+0-9.eE]+ *$#\1 T#' \
    -e 's#^(Made by `scripts/main_job.sh` on ).*#\1DATE#' \
    "$1"
}

# The variable columns of tables and CSV files (found by two runs of one build): the `seconds`
# column of rollout's variant tables (last, or before spearman) and sweep rows; log.csv's time
# columns. Handled by mask_columns (python) after mask.
MASK_COLUMNS=$(cat <<'PY'
import re, sys
# header-driven: in a CSV or a text table whose header names one of these columns, that column's
# cells become T (only these names; every other cell is compared)
TIMED = {"seconds", "tokens_per_s", "tok/s", "time_s", "elapsed_s", "wall_s", "step_ms", "ms/step"}
lines = open(sys.argv[1], encoding="utf-8", errors="surrogateescape").read().split("\n")
out, cols, sep = [], None, None
for ln in lines:
    cells = None
    for s in (",", "|"):
        if s in ln:
            c = [x.strip() for x in ln.split(s)]
            if any(x in TIMED for x in c):
                cols, sep = [i for i, x in enumerate(c) if x in TIMED], s
                cells = None
                break
            if cols and sep == s and len(c) > max(cols):
                cells = c
            break
    if cells is None and cols and sep is None:
        pass
    if cells is not None:
        parts = ln.split(sep)
        for i in cols:
            parts[i] = re.sub(r"[-+0-9.eE,]+", "T", parts[i])
        ln = sep.join(parts)
    elif ln.strip() == "":
        cols, sep = None, None
    out.append(ln)
sys.stdout.write("\n".join(out))
PY
)

# The whitespace-aligned text tables (--format table) align a `seconds` column too: its cells are
# masked by position under the header word.
MASK_TABLE=$(cat <<'PY'
import re, sys
TIMED = ("seconds", "tok/s", "time_s", "wall_s")
text = sys.stdin.read().split("\n")
out, spans = [], None
for ln in text:
    if spans is None or not ln.strip():
        spans = None
        hdr = [(m.start(), m.end()) for m in re.finditer(r"\S+", ln)]
        names = [ln[a:b] for a, b in hdr]
        if any(n in TIMED for n in names) and len(names) > 2:
            # a cell lies between the end of the previous header word and the end of this one
            spans = []
            for k, (a, b) in enumerate(hdr):
                if names[k] in TIMED:
                    lo = hdr[k - 1][1] if k else 0
                    hi = hdr[k + 1][0] if k + 1 < len(hdr) else None
                    spans.append((lo, hi))
            out.append(ln)
            continue
    elif spans:
        for lo, hi in spans:
            seg = ln[lo:hi] if hi is not None else ln[lo:]
            seg2 = re.sub(r"[-+0-9.eE,]+", lambda m: "T".rjust(len(m.group(0))), seg)
            ln = ln[:lo] + seg2 + (ln[hi:] if hi is not None else "")
    out.append(ln)
sys.stdout.write("\n".join(out))
PY
)

normalize() {  # normalize FILE > stdout
  mask "$1" | python3 -c "$MASK_TABLE" > "$OUT/.norm.tmp"
  python3 -c "$MASK_COLUMNS" "$OUT/.norm.tmp"
}

H5CMP=$(cat <<'PY'
import sys, re, h5py, numpy as np
def walk(f):
    items = {}
    def visit(name, obj):
        items[name] = obj
    f.visititems(visit)
    return items
def attrs(obj):
    out = {}
    for k, v in obj.attrs.items():
        if isinstance(v, bytes): v = v.decode("utf-8", "surrogateescape")
        if isinstance(v, str):
            v = re.sub(r'("created_utc": *)"[^"]*"', r'\1"DATE"', v)
            v = re.sub(r'("git_revision": *)"[^"]*"', r'\1"REV"', v)
            v = re.sub(r'("(seconds|tokens_per_s|time_s|elapsed_s|wall_s)": *)[-+0-9.eE]+', r'\1T', v)
            if k in ("created_utc", "git_revision"): v = k.upper()
        elif isinstance(v, np.ndarray):
            v = (v.dtype.str, v.shape, v.tobytes())
        out[k] = v
    return out
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
bad = []
if attrs(a) != attrs(b): bad.append("/ attributes")
ia, ib = walk(a), walk(b)
if sorted(ia) != sorted(ib): bad.append("object lists differ: %s" % sorted(set(ia) ^ set(ib)))
for k in sorted(set(ia) & set(ib)):
    x, y = ia[k], ib[k]
    if type(x) is not type(y): bad.append(k + ": kind"); continue
    if attrs(x) != attrs(y): bad.append(k + ": attributes")
    if isinstance(x, h5py.Dataset):
        if x.dtype != y.dtype or x.shape != y.shape or x[()].tobytes() != y[()].tobytes():
            bad.append(k + ": values")
for m in bad: print(m)
sys.exit(1 if bad else 0)
PY
)

echo "check_identical: old $OLD, new $NEW, folders $OUT/{old,new}$([ "$quick" = 1 ] && echo ' (--quick)')"
if [ "$compare_only" = 0 ]; then
  run_side "$OLD" "$OUT/old"
  run_side "$NEW" "$OUT/new"
fi

fail=0
n=0
cd "$OUT"
while IFS= read -r f; do
  n=$((n + 1))
  if [ ! -e "new/$f" ]; then echo "only in old: $f"; fail=1; continue; fi
  if cmp -s "old/$f" "new/$f"; then continue; fi
  case "$f" in
    *.h5)
      if ! /usr/bin/python3 -c "$H5CMP" "old/$f" "new/$f" > "$OUT/.h5diff" 2>&1; then
        echo "DIFFERS (HDF5): $f"; sed 's/^/    /' "$OUT/.h5diff" | head -20 || true; fail=1
      fi ;;
    *)
      normalize "old/$f" > "$OUT/.a"
      normalize "new/$f" > "$OUT/.b"
      if ! cmp -s "$OUT/.a" "$OUT/.b"; then
        echo "DIFFERS: $f"; { diff "$OUT/.a" "$OUT/.b" || true; } | head -20 | sed 's/^/    /'; fail=1
      fi ;;
  esac
done < <(cd old && find . -type f ! -name '.*' | sed 's#^\./##' | sort)
while IFS= read -r f; do
  [ -e "old/$f" ] || { echo "only in new: $f"; fail=1; }
done < <(cd new && find . -type f ! -name '.*' | sed 's#^\./##' | sort)
rm -f "$OUT/.a" "$OUT/.b" "$OUT/.h5diff" "$OUT/.norm.tmp"
if [ "$fail" = 0 ]; then
  echo "check_identical: all $n files identical (after the masks listed in the header)"
else
  echo "check_identical: differences found (folders $OUT/old and $OUT/new)"
fi
exit "$fail"
