#!/bin/sh
# Long fuzzing mode (docs/hf.md): RUNS executions (default 10^6) of fuzz_safetensors on a scratch
# copy of the seed corpus. Usage: fuzz/run_long.sh BUILD_DIR [RUNS] [JOBS]
set -eu
build=${1:?usage: run_long.sh BUILD_DIR [RUNS]}
runs=${2:-1000000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here/corpus/safetensors" "$work/corpus"
"$build/fuzz/fuzz_safetensors" -runs="$runs" -seed=1 -max_len=4096 -dict="$here/safetensors.dict" \
  -print_final_stats=1 "$work/corpus"
