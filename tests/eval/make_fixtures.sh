#!/usr/bin/env bash
# Models of the eval app tests (tests/eval/CMakeLists.txt): small byte-level checkpoints trained for
# a few steps on the fixtures' own text (the point is that the pipeline equals the oracle, not
# skill): mA (full attention, block_size 256), mB (block attention b = 16, another seed) for the
# paired test, m32 (block_size 32) for the truncation cases, hfA (mA exported to a Hugging Face
# folder), a model with vocab_size 300 (no tokenizer for text) and a file that is not a checkpoint.
# Usage: make_fixtures.sh BINDIR DATADIR OUTDIR
set -eu
bin="$1"; data="$2"; out="$3"
mkdir -p "$out"; cd "$out"
for i in 1 2 3 4; do cat "$data"/arc.jsonl "$data"/hellaswag.jsonl "$data"/piqa.jsonl "$data"/csqa.jsonl "$data"/generic.jsonl; done > corpus.txt
common="--n-layer 2 --n-head 2 --d-model 32 --steps 12 --batch 4 --eval-batches 1 --quiet --warmup 0 --lr 3e-3 --overwrite"
"$bin/train" --text corpus.txt --block-size 256 --seq-len 128 --attn full $common --out-dir mA >/dev/null
"$bin/train" --text corpus.txt --block-size 256 --seq-len 128 --attn block --b 16 --seed 2 $common --out-dir mB >/dev/null
"$bin/train" --text corpus.txt --block-size 32 --seq-len 32 --attn full $common --out-dir m32 >/dev/null
"$bin/train" --text corpus.txt --block-size 32 --seq-len 32 --vocab 300 $common --out-dir mv300 >/dev/null
rm -rf hfA
"$bin/export" --checkpoint mA/last.h5 --to hfA --quiet >/dev/null
echo "not a checkpoint" > not_a_checkpoint.h5
echo fixtures ok
