#!/usr/bin/env bash
# The figure gallery (issue 29): builds tiny inputs (a corpus file of the repository, tiny models
# trained for a few steps, tiny probe tasks) and renders EVERY plot kind of every tool as SVG, then
# writes a Markdown page with each figure, the command that made it and one line on what it shows.
#
#   scripts/figures.sh                       # build/bin -> docs/figures/gallery/*.svg + docs/figures.md
#   scripts/figures.sh BIN_DIR OUT_DIR [MD]  # any folders (the CTest renders into the build tree)
#
# FIGURES_EXT=png renders PNG instead of SVG (same pictures: one gnuplot script, only the terminal
# differs). OUT_DIR also receives manifest.tsv (file, expected title text, description, command), which
# tests/docs/check_figures.py checks: every file a non-empty, well-formed SVG holding its title.
# Numbers in the tiny models' figures mean nothing (a few training steps); the figures show what
# each plot kind looks like. Runs in about a minute on one core.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$(cd "${1:-$ROOT/build/bin}" && pwd)"
OUT="${2:-$ROOT/docs/figures/gallery}"
MD="${3:-}"
EXT="${FIGURES_EXT:-svg}"
[ $# -eq 0 ] && MD="$ROOT/docs/figures.md"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cf_figures.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=1
CORPUS="$ROOT/tests/nn/data/tiny_corpus.txt"
MANIFEST="$OUT/manifest.tsv"
: > "$MANIFEST"
quiet() { "$@" >/dev/null 2>err.txt || { cat err.txt >&2; echo "figures.sh: FAILED: $*" >&2; exit 1; }; }
SETUP="$OUT/setup.txt"
: > "$SETUP"
# input: run a command that builds an input and record it (repository-relative) for the page
input() {
  quiet "$BIN/$1" "${@:2}"
  local shown="$*"
  echo "${shown//$ROOT\//}" >> "$SETUP"
}

# fig FILE 'title text' 'what it shows' TOOL ARGS... : run the tool (its --plot names $OUT/FILE via @)
fig() {
  local file="${1%.svg}.$EXT" title="$2" what="$3"; shift 3
  local args=() shown="" a
  for a in "$@"; do
    [[ "$a" == @* ]] && a="${a%.svg}.$EXT"
    args+=("${a//@/$OUT/}")
    a="${a//@/}"
    shown+=" ${a//$ROOT\//}"  # repository-relative: the page names no path outside the repository
  done
  quiet "$BIN/${args[0]}" "${args[@]:1}"
  printf '%s\t%s\t%s\t%s\n' "$file" "$title" "$what" "${shown# }" >> "$MANIFEST"
}
# a second file written by the same command (heat map per model, the bound map of jacobian)
also() { printf '%s\t%s\t%s\t%s\n' "${1%.svg}.$EXT" "$2" "$3" "(written by the command above)" >> "$MANIFEST"; }

# ---- tiny inputs -------------------------------------------------------------------------------
input prepare-data --corpus "$CORPUS" --out set
train="--n-layer 2 --n-head 2 --d-model 32 --block-size 32 --seq-len 32 --batch 4 --quiet --overwrite --warmup 5"
input prepare-data --task boundary-copy --K 4 --b 4 --seq-len 32 --rows-train 200 --rows-val 64 --out bc
input prepare-data --task passkey --corpus "$CORPUS" --lengths 48,56,64 --depths 0,0.5,1 --reps 2 \
  --rows-train 16 --out pk
input prepare-data --task ranking --corpus "$CORPUS" --context 64 --b 16 --w 32 --out rk
tiny="--n-layer 1 --n-head 1 --d-model 16 --steps 20 --batch 4 --eval-batches 1 --quiet --warmup 0 --overwrite"
input train --data bc --attn block --b 4 --block-size 32 $tiny --out-dir bc_block
input train --data bc --attn full --block-size 32 $tiny --out-dir bc_full
input train --data pk --block-size 96 $tiny --out-dir pk_a
input train --data pk --block-size 96 --pos alibi $tiny --out-dir pk_b
input train --data rk --block-size 96 $tiny --out-dir rk_a

# ---- train, capture, spectral, spectral-surgery --------------------------------------------------
fig train_loss.svg "train: loss" "Training and validation loss per step against the unigram entropy of the data." \
  train --data set $train --steps 40 --eval-interval 10 --ckpt-interval 10 --keep-every 10 --out-dir run \
  --plot @train_loss.svg
fig capture_alpha.svg "Residual mixing alpha_l by layer" "Measured residual share alpha per layer (token mean and Frobenius) of a capture." \
  capture --checkpoint run/last.h5 --data set --seq-len 32 --n-seq 4 --out cap.h5 --plot @capture_alpha.svg
fig spectral_cascade.svg "Spectral cascade: effective routing rank by layer" "Mean effective rank of the routing matrix R per layer, weight level and sequence level, of one checkpoint." \
  spectral --checkpoint run/last.h5 --summary-only --plot @spectral_cascade.svg
fig spectral_series.svg "Spectral cascade over training" "Mean effective routing rank of each layer across the checkpoints kept during training." \
  spectral --checkpoint 'run/step_*.h5' --level weight --plot @spectral_series.svg
fig surgery_sweep.svg "cost by layer" "Perplexity cost (%) of linearising the attention of one layer at a time and of layers 0..l cumulatively." \
  spectral-surgery --checkpoint run/last.h5 --data set --sweep both --max-tokens 512 --plot @surgery_sweep.svg

# ---- coverage ----------------------------------------------------------------------------------
fig coverage_direct.svg "Coverage C(d, r): pbb" "Phase-conditioned coverage C(d, r) of one PBB layer: which distance d each phase r reads directly." \
  coverage --pattern pbb --n 256 --b 16 --plot @coverage_direct.svg
fig coverage_compare.svg "pbb(b=16,w=16) vs swa(w=16)" "Which of two patterns (PBB, SWA) covers each (d, r) cell: neither, only one, or both (Prop. 4)." \
  coverage --pattern pbb --n 256 --b 16 --compare swa --plot @coverage_compare.svg
fig coverage_closure.svg "8-layer closure" "Coverage of an 8-layer SWA closure; the d range follows the closure's reach (README example, smaller)." \
  coverage --pattern swa --w 16 --b 16 --layers 8 --n 1024 --coverage closure --plot @coverage_closure.svg

# ---- rollout -----------------------------------------------------------------------------------
fig rollout_bloom.svg "Rollout of the last position, bloom-176b" "Last-row rollout p_j of BLOOM's ALiBi prior, variants (a)-(c); (a) clipped and named in the title." \
  rollout --model bloom --alpha measured --n 256 --plot @rollout_bloom.svg
fig rollout_bloom_log.svg "Rollout of the last position, bloom-176b" "The same on a log axis: every variant visible, no clipping." \
  rollout --model bloom --alpha measured --n 256 --plot-scale log --plot @rollout_bloom_log.svg
fig rollout_capture.svg "Rollout of the last position" "Rollout variants from a capture's measured kernels and alpha." \
  rollout --model cap.h5 --alpha measured --plot @rollout_capture.svg
fig rollout_agreement.svg "Rollout vs measured influence" "Rollout variants against the influence measured on the checkpoint (Spearman, W1 in the report)." \
  rollout --model run/last.h5 --alpha measured --influence auto --influence-windows 4 --capture-text "$CORPUS" --n 32 \
  --plot @rollout_agreement.svg
fig rollout_sweep.svg "Last-row rollout against context length" "p_0, primacy and recency mass of each variant against context length n (log2), 12 decades shown." \
  rollout sweep --model bloom --n 64,256,1024,4096 --plot @rollout_sweep.svg
fig rollout_dichotomy.svg "Theorem 5.4 at depth" "Infinite-depth dichotomy: masses and bounds against depth, one panel per alpha schedule, -log10 mass on a log axis." \
  rollout dichotomy --model bloom --n 8 --depth 100000 --plot @rollout_dichotomy.svg
fig rollout_jacobian.svg "Jacobian bound (Runway (Lee & Clark) Theorem 3.3)" "Runway bound of one target over all sources, split into the self term and gate x runway." \
  rollout jacobian --model bloom --n 32 --plot @rollout_jacobian.svg

# ---- influence, jacobian -----------------------------------------------------------------------
fig influence_profile.svg "Measured influence (Position bias" "Measured influence profile (Eq. 6) of the last position on each input position." \
  influence --checkpoint run/last.h5 --data set --n 32 --windows 4 --plot @influence_profile.svg
fig influence_series.svg "Measured influence over training" "Influence summaries (first, last, primacy and recency mass) across the checkpoints of training." \
  influence --checkpoint 'run/step_*.h5' --data set --n 32 --windows 2 --plot @influence_series.svg
fig jacobian_measured.svg "Measured Jacobian norms" "log10 ||J_ds||_F of the exact Jacobian blocks; grey: s > d, not causal." \
  jacobian --checkpoint run/last.h5 --data set --n 16 --span 2 --plot @jacobian_measured.svg
also jacobian_measured_bound.svg "bound C*^r B_ds" "log10 of the bound C*^r B_ds on the same pairs, same grey mask."

# ---- probe -------------------------------------------------------------------------------------
fig probe_boundary_copy.svg "boundary copy: accuracy per phase" "Per-phase accuracy of two models with exact binomial intervals, and each model's coverage bound (dashed)." \
  probe boundary-copy --data bc --checkpoint bc_block/last.h5 --checkpoint bc_full/last.h5 --resamples 200 --quiet \
  --plot @probe_boundary_copy.svg
fig probe_passkey.svg "passkey: exact match by depth" "Passkey exact match by needle depth, one curve per model." \
  probe passkey --data pk --checkpoint pk_a/last.h5 --checkpoint pk_b/last.h5 --max-new 4 --quiet --plot @probe_passkey.svg
also probe_passkey_heatmap1.svg "colour scale 0..1" "Exact match by context length and depth (%), model 1, on the 0..1 scale both maps share."
also probe_passkey_heatmap2.svg "colour scale 0..1" "The same for model 2: equal colours mean equal accuracy."
fig probe_ranking.svg "ranking: mean prompt-token NLL by position" "Mean prompt-token NLL by position and task family; grey where no prompt reaches." \
  probe ranking --data rk --checkpoint rk_a/last.h5 --quiet --plot @probe_ranking.svg

# every manifest file must exist (the 'also' ones are named by convention of their tool)
while IFS=$'\t' read -r f _; do
  [ -s "$OUT/$f" ] || { echo "figures.sh: $OUT/$f was not written" >&2; exit 1; }
done < "$MANIFEST"

if [ -n "$MD" ]; then
  rel="$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], os.path.dirname(sys.argv[2])))' "$OUT" "$MD")"
  {
    echo "# Figure gallery"
    echo
    echo "Every plot kind of every tool, rendered by \`scripts/figures.sh\` (regenerate it after a change to a"
    echo "plot; the CTest \`docs: figure gallery renders every plot kind\` renders the same set into the build"
    echo "tree and checks each file). The inputs are tiny: a corpus file of the repository"
    echo "(\`tests/nn/data/tiny_corpus.txt\` as \`set\`), models trained for a few steps (\`run/\`, \`bc_block/\`,"
    echo "\`bc_full/\`, \`pk_a/\`, \`pk_b/\`, \`rk_a/\`) and tiny probe tasks (\`bc\`, \`pk\`, \`rk\`): the numbers mean"
    echo "nothing, the figures show what each plot looks like. Commands are shown as run in the work folder"
    echo "(\`build/bin/\` omitted); conventions in docs/conventions.md \"Plots\"."
    echo
    echo "The inputs:"
    echo
    sed 's/^/    /' "$SETUP"
    echo
    while IFS=$'\t' read -r f title what cmd; do
      echo "## ${f%.*}"
      echo
      echo "$what"
      echo
      echo "    $cmd"
      echo
      echo "![${f%.*}]($rel/$f)"
      echo
    done < "$MANIFEST"
  } > "$MD.tmp"
  mv "$MD.tmp" "$MD"
fi
echo "figures.sh: $(wc -l < "$MANIFEST") figures in $OUT"
