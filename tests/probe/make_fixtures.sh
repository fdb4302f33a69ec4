#!/usr/bin/env bash
# Fixtures of the probe app tests: two boundary-copy task files (32 and 16 positions), a model per
# file (block size 32 and 16) trained for 2 steps, a model with another vocabulary, a text corpus
# and a file that is not a checkpoint, a passkey task with a mislabelled tokeniser and a model with
# a larger vocabulary than that task's. Usage: make_fixtures.sh BINDIR OUTDIR
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
# task metadata edited by hand: b = 0 divided by zero (SIGFPE) and K = 10^12 was read as a wrapped int
for bad in b0 Khuge alpha16; do
  for f in train.bin val.bin train.mask.bin val.mask.bin; do cp bc32.$f bc_$bad.$f; done
done
sed 's/"b": 4,/"b": 0,/' bc32.meta.json > bc_b0.meta.json
sed 's/"K": 4,/"K": 1000000000000,/' bc32.meta.json > bc_Khuge.meta.json
# a task whose meta.json was cut short (a full disk, an interrupted copy): reported as bad JSON
for f in train.bin val.bin train.mask.bin val.mask.bin; do cp bc32.$f bc_trunc.$f; done
head -c 60 bc32.meta.json > bc_trunc.meta.json
# an alphabet id past 16 bits (65539 was read as 3, the uint16 token wrapped)
sed '/"alphabet": \[/,/\]/ s/^      3$/      65539/' bc32.meta.json > bc_alpha16.meta.json
grep -q '"b": 0,' bc_b0.meta.json && grep -q '"K": 1000000000000,' bc_Khuge.meta.json && grep -q '^      65539$' bc_alpha16.meta.json
# a passkey task whose metadata names the gpt2 tokeniser over byte token ids (decoded every answer wrongly)
"$bin/prepare-data" --task passkey --corpus corpus.txt --lengths 48 --depths 0 --reps 1 --rows-train 4 --out pk48 >/dev/null
for f in train.bin val.bin train.mask.bin val.mask.bin items.json; do cp pk48.$f pk_gpt2.$f; done
sed 's/"tokenizer": "byte"/"tokenizer": "gpt2"/' pk48.meta.json > pk_gpt2.meta.json
grep -q '"tokenizer": "gpt2"' pk_gpt2.meta.json
# a model with a larger vocabulary than the passkey task's tokenizer (its answers could not be decoded)
"$bin/train" --data pk48 --block-size 64 --vocab 300 $common --overwrite --out-dir pkv300 >/dev/null
echo fixtures ok
