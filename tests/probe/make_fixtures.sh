#!/usr/bin/env bash
# Fixtures of the probe app tests: two boundary-copy task files (32 and 16 positions), a model per
# file (block size 32 and 16) trained for 2 steps, a model with another vocabulary, a text corpus
# and a file that is not a checkpoint. Usage: make_fixtures.sh BINDIR OUTDIR
set -eu
bin="$1"; out="$2"
mkdir -p "$out"; cd "$out"
"$bin/prepare-data" --task boundary-copy --K 4 --b 4 --seq-len 32 --rows-train 40 --rows-val 20 --out bc32 >/dev/null
"$bin/prepare-data" --task boundary-copy --K 4 --b 4 --seq-len 16 --rows-train 40 --rows-val 20 --out bc16 >/dev/null
common="--n-layer 1 --n-head 1 --d-model 8 --steps 2 --batch 2 --eval-batches 1 --quiet --warmup 0"
"$bin/train" --data bc32 --attn block --b 4 --block-size 32 $common --overwrite --out-dir m32 >/dev/null
"$bin/train" --data bc16 --attn block --b 4 --block-size 16 $common --overwrite --out-dir m16 >/dev/null
"$bin/train" --data bc32 --attn se-bridge --b 4 --e 2 --block-size 32 --vocab 300 $common --overwrite --out-dir mv300 >/dev/null
for i in $(seq 1 200); do echo "Some filler text line $i for the passkey fixture."; done > corpus.txt
echo "not a checkpoint" > not_a_checkpoint.h5
echo fixtures ok
