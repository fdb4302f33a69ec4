#!/usr/bin/env bash
# Tool-level tests of the hostile-user findings of issue 29 (docs/conventions.md): each refusal
# exits 2 with its message checked, and every user file the run must not touch is compared byte for
# byte before and after.
# Fixtures are written by the tools themselves, tests/hostile/make_shards.py (stdlib only) and, for
# the damaged checkpoints of `overflow`, h5py (skipped with exit 77 without it; a failure when CI=true).
# Usage: hostile_tools.sh MODE BIN_DIR CORPUS SRC_DIR
#   derived   jacobian's FILE_bound.svg and probe's FILE_heatmapM.svg / FILE_model2.svg are checked
#             against every input and output, and for writability, before any work
#   hffolder  every file a Hugging Face folder is read by is an input (a shard named weights.bin, a
#             not-yet-existing model.safetensors.index.json); DIR/model.safetensors points at DIR;
#             an empty config.json, sizes beyond the tensors and a tensor in two shards exit 2; the
#             single model.safetensors wins over an index (transformers' precedence)
#   export    export --to refuses a user's folder without --overwrite; with it a foreign
#             tokenizer.json is removed; its own earlier export is replaced
#   resume    train --resume R/step_000001.h5 --out-dir R refuses to replace the run's newer files
#   capture   a capture larger than ulimit -f is refused before the work naming the estimate; a write
#             past ulimit -f (SIGXFSZ ignored) exits 1 leaving no temporary
#   tokenizer a dangling tokenizer.json link and a mistyped field exit 2 naming them; spectral and
#             spectral-surgery read the folder's tokenizer.json
#   series    influence / spectral take existing paths with '[' ',' literally; one file twice is refused
#   overflow  finite weights that overflow the forward pass exit 2 naming the layer (jacobian,
#             capture, influence, probe); a model of weights 1e-40 exits 2 saying it is degenerate
set -u
mode="$1"; BIN="$(cd "$2" && pwd)"; CORPUS="$(realpath "$3")"; SRC="$(realpath "$4")"
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
W="$PWD/hostile_$mode"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# expect2 REGEX CMD...: exit 2 and stderr matching REGEX
expect2() {
  local re="$1"; shift
  "$@" >out.txt 2>err.txt; local rc=$?
  [ $rc -eq 2 ] || { cat err.txt; fail "expected exit 2, got $rc: $*"; }
  grep -Eq -- "$re" err.txt || { cat err.txt; fail "stderr does not match /$re/: $*"; }
}
same() { cmp -s "$1" "$2" || fail "$1 changed (must be byte-identical to $2)"; }
no_temps() { if find . -name '*.tmp.*' | grep -q .; then find . -name '*.tmp.*'; fail "temporary left ($1)"; fi; }
TINY="--n-layer 1 --d-model 16 --n-head 2 --block-size 32 --seq-len 16 --batch 2 --threads 1 --quiet"
model() { "$BIN/train" --text "$CORPUS" $TINY --steps "${2:-2}" --out-dir "$1" "${@:3}" >/dev/null || fail "train $1"; }

case "$mode" in
derived)
  model r
  cp "$CORPUS" notes_bound.svg; cp notes_bound.svg keep.txt
  expect2 "--plot \(its bound heat map\) 'notes_bound.svg' is the same file as --text" \
    "$BIN/jacobian" --checkpoint r/last.h5 --text notes_bound.svg --n 8 --plot notes.svg
  same notes_bound.svg keep.txt
  [ -e notes.svg ] && fail "notes.svg written by a refused run"
  echo previous > j_bound.svg; cp j_bound.svg keep2
  expect2 "is the same file as --out 'j_bound.svg'" \
    "$BIN/jacobian" --checkpoint r/last.h5 --text "$CORPUS" --n 8 --plot j.svg --out j_bound.svg
  same j_bound.svg keep2
  # a read-only derived name is found before anything is written (the report and j.svg stay)
  echo old-plot > j.svg; cp j.svg keep3; chmod 444 j_bound.svg
  expect2 "--plot \(its bound heat map\)" \
    "$BIN/jacobian" --checkpoint r/last.h5 --text "$CORPUS" --n 8 --plot j.svg --out rep.json
  same j.svg keep3; same j_bound.svg keep2
  [ -e rep.json ] && fail "rep.json written by a refused run"
  chmod 644 j_bound.svg
  # probe: P_heatmap1.svg (passkey) and P_model2.svg (ranking) against the inputs
  for i in $(seq 1 200); do echo "Some filler text line $i for the passkey fixture."; done > corpus.txt
  "$BIN/prepare-data" --task passkey --corpus corpus.txt --lengths 48 --depths 0 --reps 1 --rows-train 4 --out pk >/dev/null ||
    fail "prepare-data passkey"
  "$BIN/train" --data pk --n-layer 1 --d-model 16 --n-head 2 --block-size 64 --batch 2 --threads 1 --quiet --steps 1 \
    --out-dir pm >/dev/null || fail "train pk"
  cp pm/last.h5 p_heatmap1.svg; cp p_heatmap1.svg keep4
  expect2 "--plot \(heat map of checkpoint 1\) 'p_heatmap1.svg' is the same file as --checkpoint" \
    "$BIN/probe" passkey --data pk --checkpoint p_heatmap1.svg --plot p.svg --quiet
  same p_heatmap1.svg keep4
  "$BIN/prepare-data" --task ranking --corpus corpus.txt --out rk >/dev/null 2>err.txt || { cat err.txt; fail "prepare-data ranking"; }
  cp pm/last.h5 q_model2.svg; cp q_model2.svg keep5
  expect2 "--plot \(heat map of checkpoint 2\) 'q_model2.svg' is the same file as --checkpoint" \
    "$BIN/probe" ranking --data rk --checkpoint pm/last.h5 --checkpoint q_model2.svg --plot q.svg --quiet
  same q_model2.svg keep5
  # train: the files it writes into --out-dir are outputs, never an input
  mkdir -p t; cp "$CORPUS" t/log.csv; cp t/log.csv keep6
  expect2 "--out-dir \(its log.csv\) 't/log.csv' is the same file as --text" \
    "$BIN/train" --text t/log.csv $TINY --steps 1 --out-dir t --overwrite
  same t/log.csv keep6
  no_temps derived
  echo "ok: derived outputs checked before the work"
  ;;
hffolder)
  model r
  "$BIN/export" --checkpoint r/last.h5 --to m1 --quiet || fail "export"
  $PY "$SRC/tests/hostile/make_shards.py" m1 m2 model-00001.safetensors weights.bin >/dev/null || fail "shards"
  cp m2/weights.bin keep.bin
  expect2 "--out 'm2/weights.bin' is the same file as --checkpoint 'm2'" \
    "$BIN/jacobian" --checkpoint m2 --text "$CORPUS" --n 8 --out m2/weights.bin
  same m2/weights.bin keep.bin
  # a name the loader probes, not yet there: an index written into a single-file folder
  expect2 "--out 'm1/model.safetensors.index.json' is the same file as --checkpoint 'm1'" \
    "$BIN/jacobian" --checkpoint m1 --text "$CORPUS" --n 8 --out m1/model.safetensors.index.json
  [ -e m1/model.safetensors.index.json ] && fail "an index was written into m1"
  expect2 "--checkpoint 'm1/model.safetensors' is a file of the Hugging Face folder 'm1'.*--checkpoint 'm1'" \
    "$BIN/jacobian" --checkpoint m1/model.safetensors --text "$CORPUS" --n 8
  expect2 "--checkpoint 'm1/model.safetensors' is a file of the Hugging Face folder 'm1'" \
    "$BIN/spectral" --checkpoint m1/model.safetensors --level weight
  # the sharded copy loads, and gives the single file's numbers
  "$BIN/spectral" --checkpoint m1 --level weight --format json --out a.json || fail "spectral m1"
  "$BIN/spectral" --checkpoint m2 --level weight --format json --out b.json || fail "spectral m2"
  # both the single file and an index of OTHER weights: the single file is read (transformers' rule)
  model r2 2 --seed 7
  "$BIN/export" --checkpoint r2/last.h5 --to o --quiet || fail "export r2"
  $PY "$SRC/tests/hostile/make_shards.py" o m3 s1.safetensors s2.safetensors >/dev/null || fail "shards o"
  cp m1/model.safetensors m3/model.safetensors; cp m1/config.json m3/config.json
  "$BIN/spectral" --checkpoint m3 --level weight --format json --out c.json || fail "spectral m3"
  $PY - <<'EOF' || fail "the single file was not the one read"
import json
a, b, c = (json.load(open(f)) for f in ("a.json", "b.json", "c.json"))
for x in (a, b, c):
    x.pop("meta")
assert a == b, "the sharded copy differs"
assert a == c, "the index's shards were read instead of model.safetensors"
print("same numbers")
EOF
  # a tensor in two shards is duplicated, naming both
  $PY "$SRC/tests/hostile/make_shards.py" m1 m4 a.safetensors b.safetensors --dup >/dev/null || fail "dup shards"
  expect2 "tensor '.*' is duplicated: it is in both '.*a.safetensors' and '.*b.safetensors'" \
    "$BIN/spectral" --checkpoint m4 --level weight
  # an empty config.json names the file, exit 2 (was exit 1 with a raw JSON message)
  mkdir -p m5; cp m1/model.safetensors m5/; : > m5/config.json
  expect2 "m5/config.json' is not valid JSON \(the file is empty\)" "$BIN/jacobian" --checkpoint m5 --text "$CORPUS" --n 8
  # sizes far beyond the tensors: exit 2 before any allocation (was exit 1, out of memory)
  $PY -c "import json; c = json.load(open('m1/config.json')); c.pop('causalflow_weights'); \
c.update(n_layer=256, n_inner=1000000); json.dump(c, open('m6.json', 'w'))"
  mkdir -p m6; cp m1/model.safetensors m6/; mv m6.json m6/config.json
  expect2 "config.json describes [0-9]+ parameters .* but its safetensors hold only" \
    "$BIN/jacobian" --checkpoint m6 --text "$CORPUS" --n 8
  $PY -c "import json; c = json.load(open('m1/config.json')); c.pop('causalflow_weights'); \
c.update(n_embd=65536, vocab_size=1000000, n_head=64); json.dump(c, open('m7.json', 'w'))"
  mkdir -p m7; cp m1/model.safetensors m7/; mv m7.json m7/config.json
  expect2 "tensor 'transformer.wte.weight' has 2 dimensions \[256, 16\] but config.json says \[vocab_size, d_model\] = \[1000000, 65536\]" \
    "$BIN/jacobian" --checkpoint m7 --text "$CORPUS" --n 8
  no_temps hffolder
  echo "ok: model folder files are inputs; precedence, duplicates, sizes"
  ;;
export)
  model r
  mkdir -p user; echo '{"my": "own config"}' > user/config.json; cp user/config.json keep.json
  expect2 "--to 'user' is not empty \(config.json\) and is not an earlier export of this tool.*--overwrite" \
    "$BIN/export" --checkpoint r/last.h5 --to user
  same user/config.json keep.json
  [ -e user/model.safetensors ] && fail "model.safetensors written into the user's folder"
  # its own earlier export is replaced without --overwrite
  "$BIN/export" --checkpoint r/last.h5 --to e --quiet || fail "export e"
  "$BIN/export" --checkpoint r/last.h5 --to e --quiet || fail "re-export into its own export"
  # another model's tokenizer beside an export: refused; with --overwrite removed, not kept
  printf '{"model": {}}' > e/tokenizer.json; cp e/tokenizer.json keep_tok.json
  expect2 "holds files of another model beside an earlier export" "$BIN/export" --checkpoint r/last.h5 --to e
  same e/tokenizer.json keep_tok.json
  "$BIN/export" --checkpoint r/last.h5 --to e --overwrite >out.txt || fail "export --overwrite"
  grep -q "removed e/tokenizer.json" out.txt || fail "the removal is not reported"
  [ -e e/tokenizer.json ] && fail "a foreign tokenizer.json was kept"
  "$BIN/export" --checkpoint r/last.h5 --to user --overwrite --quiet || fail "export --overwrite into user"
  grep -q causalflow_weights user/config.json || fail "--overwrite did not replace config.json"
  no_temps export
  echo "ok: export guards --to"
  ;;
resume)
  model r 3 --keep-every 1
  for f in last.h5 best.h5 step_000002.h5 step_000003.h5 log.csv; do cp "r/$f" "keep_$f"; done
  expect2 "--resume 'r/step_000001.h5' is at step 1 but --out-dir 'r' holds newer files of that run \(last.h5 \(step 3\).*--out-dir NEW" \
    "$BIN/train" --text "$CORPUS" --threads 1 --quiet --resume r/step_000001.h5 --out-dir r --steps 3
  for f in last.h5 best.h5 step_000002.h5 step_000003.h5 log.csv; do same "r/$f" "keep_$f"; done
  # --overwrite does not make it replace them either
  expect2 "holds newer files of that run" \
    "$BIN/train" --text "$CORPUS" --threads 1 --quiet --resume r/step_000001.h5 --out-dir r --steps 3 --overwrite
  # a new folder is fine, and so is continuing last.h5 in place
  "$BIN/train" --text "$CORPUS" --threads 1 --quiet --resume r/step_000001.h5 --out-dir r_new --steps 3 >/dev/null ||
    fail "resume into a new folder"
  "$BIN/train" --text "$CORPUS" --threads 1 --quiet --resume r/last.h5 --out-dir r --steps 4 --replan-schedule >/dev/null ||
    fail "continue last.h5 in place"
  no_temps resume
  echo "ok: resume never replaces newer files"
  ;;
capture)
  model r
  ( ulimit -f 100  # 100 KiB
    expect2 "--out 'big.h5': the capture \(200 sequences x 32 tokens.*needs about .* MB but the file size limit \(ulimit -f, RLIMIT_FSIZE\)" \
      "$BIN/capture" --checkpoint r/last.h5 --text "$CORPUS" --seq-len 32 --n-seq 200 --out big.h5 ) || exit 1
  [ -e big.h5 ] && fail "big.h5 written"
  # an estimate below the limit whose file still passes it (HDF5's own metadata): the write fails
  # with EFBIG (SIGXFSZ is ignored), exit 1, and the temporary is removed
  ( ulimit -f 1
    "$BIN/capture" --checkpoint r/last.h5 --text "$CORPUS" --seq-len 4 --n-seq 1 --no-probs --no-qk --out small.h5 \
      >/dev/null 2>err.txt; rc=$?
    [ $rc -eq 1 ] || { cat err.txt; fail "capture past ulimit -f: exit $rc (want 1; 153 = killed by SIGXFSZ)"; } ) || exit 1
  no_temps capture
  [ -e small.h5 ] && fail "small.h5 written"
  echo "ok: capture size checked up front; SIGXFSZ leaves no temporary"
  ;;
tokenizer)
  model r 1
  "$BIN/export" --checkpoint r/last.h5 --to m --quiet || fail "export"
  ln -s missing_tokenizer.json m/tokenizer.json
  expect2 "m/tokenizer.json' is a symbolic link to 'missing_tokenizer.json', which does not exist" \
    "$BIN/jacobian" --checkpoint m --text "$CORPUS" --n 8
  expect2 "which does not exist" "$BIN/spectral" --checkpoint m --level sequence --texts "$CORPUS"
  rm m/tokenizer.json
  # a byte-level tokenizer.json whose ids are the bytes reversed (id = 255 - byte): the texts must be
  # read through it, so the numbers differ from the byte tokenizer's
  $PY - <<'EOF' || fail "tokenizer fixture"
import json
def b2u():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
u = b2u()
tok = {"model": {"type": "BPE", "vocab": {u[b]: 255 - b for b in range(256)}, "merges": []},
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "added_tokens": []}
json.dump(tok, open("tokenizer.json", "w"))
tok["added_tokens"] = [{"content": "<x>", "id": "7"}]
json.dump(tok, open("bad_tokenizer.json", "w"))
EOF
  head -c 3000 "$CORPUS" > texts.txt
  "$BIN/spectral" --checkpoint m --level sequence --texts texts.txt --format json --out plain.json || fail "spectral plain"
  "$BIN/spectral-surgery" --checkpoint m --text texts.txt --format json --out sp_plain.json || fail "surgery plain"
  cp tokenizer.json m/tokenizer.json
  "$BIN/spectral" --checkpoint m --level sequence --texts texts.txt --format json --out tok.json || fail "spectral tok"
  grep -q '"tokenizer": "tokenizer.json"' tok.json || fail "spectral did not use the folder's tokenizer.json"
  expect2 "--tokenizer byte: the checkpoint folder 'm' has its own tokenizer.json" \
    "$BIN/spectral" --checkpoint m --level sequence --texts texts.txt --tokenizer byte
  "$BIN/spectral-surgery" --checkpoint m --text texts.txt --format json --out sp_tok.json || fail "surgery tok"
  $PY -c "import json; a, b = (json.load(open(f))['baseline']['ppl'] for f in ('sp_plain.json', 'sp_tok.json')); \
assert a != b, 'spectral-surgery ignored tokenizer.json'; print('ppl', a, b)" || fail "spectral-surgery tokenizer"
  cp bad_tokenizer.json m/tokenizer.json
  expect2 "tokenizer 'm/tokenizer.json': /added_tokens/0/id must be an integer in \[0, 16777215\] \(got \"7\"\)" \
    "$BIN/jacobian" --checkpoint m --text "$CORPUS" --n 8
  echo "ok: tokenizer.json used, dangling link and mistyped field refused"
  ;;
series)
  model r 2 --keep-every 1
  cp r/last.h5 'run[1].h5'; cp r/last.h5 'a,b.h5'
  "$BIN/influence" --checkpoint 'run[1].h5' --text "$CORPUS" --n 8 --windows 2 --format json --out i.json ||
    fail "influence on 'run[1].h5'"
  "$BIN/spectral" --checkpoint 'a,b.h5' --level weight --format json --out s.json || fail "spectral on 'a,b.h5'"
  "$BIN/influence" --checkpoint 'a,b.h5' --text "$CORPUS" --n 8 --windows 2 >/dev/null || fail "influence on 'a,b.h5'"
  expect2 "--checkpoint names the file 'r/step_000001.h5' twice \('r/step_000001.h5' and './r/step_000001.h5'\)" \
    "$BIN/influence" --checkpoint r/step_000001.h5,./r/step_000001.h5,r/step_000002.h5 --text "$CORPUS" --n 8 --windows 2
  expect2 "names the file .* twice" \
    "$BIN/spectral" --checkpoint "r/step_*.h5,r/step_000002.h5" --level weight
  echo "ok: literal paths, duplicates refused"
  ;;
overflow)
  # the damaged checkpoints are written with h5py (a fixture writer): without it, skipped (77), in
  # CI a failure naming the missing package
  if ! $PY -c "import h5py, numpy" 2>/dev/null; then
    [ "${CI:-}" = "true" ] && fail "h5py / numpy missing under $PY (needed to write the fixtures)"
    echo "skipped: h5py / numpy missing under $PY"; exit 77
  fi
  model r 1
  $PY - <<'EOF' || fail "h5py fixture"
import shutil, h5py, numpy as np
for name, value in (("big.h5", 3e38), ("tiny.h5", 1e-40)):
    shutil.copy("r/last.h5", name)
    with h5py.File(name, "r+") as f:
        if value > 1:  # both residual branches of block 0 add 3e38: finite weights, an overflowing sum
            for k in ("h.0.attn.c_proj.bias", "h.0.mlp.c_proj.bias"):
                f["params"][k][...] = np.float32(value)
        else:          # every weight subnormal: a degenerate model
            for k in f["params"]:
                f["params"][k][...] = np.float32(value)
EOF
  expect2 "forward pass: the residual stream after layer 0 holds a non-finite value" \
    "$BIN/jacobian" --checkpoint big.h5 --text "$CORPUS" --n 8
  expect2 "residual stream after layer 0 holds a non-finite value" \
    "$BIN/capture" --checkpoint big.h5 --text "$CORPUS" --seq-len 8 --n-seq 2 --out cap.h5
  [ -e cap.h5 ] && fail "cap.h5 written"
  expect2 "residual stream after layer 0" "$BIN/influence" --checkpoint big.h5 --text "$CORPUS" --n 8 --windows 2
  # probe: an infinite cross-entropy before
  for i in $(seq 1 200); do echo "Some filler text line $i for the passkey fixture."; done > corpus.txt
  "$BIN/prepare-data" --task passkey --corpus corpus.txt --lengths 48 --depths 0 --reps 1 --rows-train 4 --out pk >/dev/null ||
    fail "prepare-data passkey"
  "$BIN/train" --data pk --n-layer 1 --d-model 16 --n-head 2 --block-size 64 --batch 2 --threads 1 --quiet --steps 1 \
    --out-dir pm >/dev/null || fail "train pk"
  $PY -c "import shutil, h5py, numpy as np; shutil.copy('pm/last.h5', 'pbig.h5'); f = h5py.File('pbig.h5', 'r+'); \
[f['params'][k].__setitem__(Ellipsis, np.float32(3e38)) for k in ('h.0.attn.c_proj.bias', 'h.0.mlp.c_proj.bias')]; f.close()"
  expect2 "^probe: error: forward pass: the residual stream after layer 0 holds a non-finite value" \
    "$BIN/probe" passkey --data pk --checkpoint pbig.h5 --quiet
  # a degenerate model (every weight 1e-40): influence exited 1 with "sums to 0.000000"
  expect2 "^influence: error: the model is degenerate: the prediction's gradient .* is exactly 0" \
    "$BIN/influence" --checkpoint tiny.h5 --text "$CORPUS" --n 8 --windows 2
  no_temps overflow
  echo "ok: overflow named by layer"
  ;;
*) fail "unknown mode $mode" ;;
esac
