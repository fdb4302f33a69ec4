#!/usr/bin/env bash
# The main job on embedded defaults (README command 1): each tool's headline report.
set -euo pipefail
BUILD="${1:-build}"
BIN="$BUILD/bin"
mkdir -p results
echo "== coverage: SE-Bridge at the paper's geometry (n=1024, b=128, e=64) =="
"$BIN/coverage" --pattern se-bridge --b 128 --compare swa --plot results/coverage_se-bridge.svg
echo "(plot: results/coverage_se-bridge.svg)"
echo
echo "== notebooks: Boundary repair (Yang) Table 2 (score accounting) =="
"$BUILD/notebooks/bin/nb_boundary_01_table2_scores"  # notebooks live in build/notebooks/bin
echo
echo "== rollout: BLOOM-176B position prior, measured alpha (Position bias (Herasimchyk et al.) figure, n = 256) =="
"$BIN/rollout" --model bloom --alpha measured --plot results/rollout_bloom.svg
echo "(plot: results/rollout_bloom.svg)"
echo
echo "== prepare-data -> train -> capture -> rollout -> spectral -> spectral-surgery: a tiny byte-level GPT on the Brown corpus (seconds) =="
RUN=results/main_job_run
"$BIN/prepare-data" --corpus brown --tokenizer byte --out results/brown_byte --report results/brown_byte.report.txt
"$BIN/train" --data results/brown_byte --n-layer 2 --n-head 2 --d-model 64 --block-size 64 --seq-len 64 --batch 8 \
  --steps 120 --warmup 20 --eval-interval 40 --ckpt-interval 120 --out-dir "$RUN" --overwrite --quiet
"$BIN/capture" --checkpoint "$RUN/best.h5" --text kjv --out "$RUN/capture.h5"
"$BIN/rollout" --model "$RUN/capture.h5" --alpha measured --plot "$RUN/rollout.svg"
"$BIN/spectral" --checkpoint "$RUN/best.h5" --summary-only --plot "$RUN/cascade.svg"
"$BIN/spectral-surgery" --checkpoint "$RUN/best.h5" --data results/brown_byte --sweep both --max-tokens 4096 \
  --plot "$RUN/surgery.svg"
echo "(files: $RUN/: checkpoints, log.csv, loss.svg, capture.h5, rollout.svg, cascade.svg, surgery.svg)"
