#!/usr/bin/env bash
# The main job on embedded defaults (README command 1): each tool's headline report, printed and
# gathered with its figures on one page, results/README.md (tables as printed, figures beside them).
set -euo pipefail
BUILD="${1:-build}"
BIN="$BUILD/bin"
mkdir -p results
REPORT=results/README.md
RUN=results/main_job_run
rev=unknown
[ -d .git ] && rev=$(git rev-parse --short HEAD)
{
  echo "# causalflow main job"
  echo
  echo "Made by \`scripts/main_job.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') (git $rev, $(nproc) cores). Each"
  echo "section shows the command, its report as printed, and its figure. Papers: docs/papers.md."
} > "$REPORT"

# section TITLE: a heading on the terminal and in the report
section() { printf '== %s ==\n' "$1"; printf '\n## %s\n' "$1" >> "$REPORT"; }
# run CMD...: runs a command, its output to the terminal and, as a code block, to the report
run() {
  printf '\n    %s\n\n```\n' "$*" >> "$REPORT"
  "$@" 2>&1 | tee -a "$REPORT"
  printf '```\n' >> "$REPORT"
}
# figure FILE CAPTION: a figure in the report (path relative to results/)
figure() { echo "(plot: $1)"; printf '\n![%s](%s)\n' "$2" "${1#results/}" >> "$REPORT"; }

section "coverage: SE-Bridge at the paper's geometry (n=1024, b=128, e=64), Boundary repair (Yang)"
run "$BIN/coverage" --pattern se-bridge --b 128 --compare swa --plot results/coverage_se-bridge.svg
figure results/coverage_se-bridge.svg "coverage C(d, r) of SE-Bridge against SWA"
echo
section "notebook: Boundary repair (Yang) Table 2 (score accounting)"
run "$BUILD/notebooks/bin/nb_boundary_01_table2_scores"  # notebooks live in build/notebooks/bin
echo
section "rollout: BLOOM-176B position prior, measured alpha (Position bias (Herasimchyk et al.) figure, n = 256)"
run "$BIN/rollout" --model bloom --alpha measured --plot results/rollout_bloom.svg
figure results/rollout_bloom.svg "BLOOM-176B rollout profiles (a), (b), (c)"
echo
section "prepare-data -> train -> capture -> rollout -> spectral -> spectral-surgery: a tiny byte-level GPT on the Brown corpus (seconds)"
run "$BIN/prepare-data" --corpus brown --tokenizer byte --out results/brown_byte --report results/brown_byte.report.txt
run "$BIN/train" --data results/brown_byte --n-layer 2 --n-head 2 --d-model 64 --block-size 64 --seq-len 64 --batch 8 \
  --steps 120 --warmup 20 --eval-interval 40 --ckpt-interval 120 --out-dir "$RUN" --overwrite --quiet
figure "$RUN/loss.svg" "training and validation loss"
run "$BIN/capture" --checkpoint "$RUN/best.h5" --text kjv --out "$RUN/capture.h5"
run "$BIN/rollout" --model "$RUN/capture.h5" --alpha measured --plot "$RUN/rollout.svg"
figure "$RUN/rollout.svg" "rollout of the trained model's measured kernels"
run "$BIN/spectral" --checkpoint "$RUN/best.h5" --summary-only --plot "$RUN/cascade.svg"
figure "$RUN/cascade.svg" "routing/filtering cascade per head"
run "$BIN/spectral-surgery" --checkpoint "$RUN/best.h5" --data results/brown_byte --sweep both --max-tokens 4096 \
  --plot "$RUN/surgery.svg"
figure "$RUN/surgery.svg" "perplexity under routing/filtering surgery"
echo "(files: $RUN/: checkpoints, log.csv, loss.svg, capture.h5, rollout.svg, cascade.svg, surgery.svg)"
echo "(report with every table and figure: $REPORT)"
