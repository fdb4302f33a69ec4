#!/usr/bin/env bash
# Usage: cpu_run_loads_no_cuda_math.sh COMMAND...
# A CPU run of a CUDA build (COMMAND includes --device cpu) maps the CUDA runtime but none of the
# CUDA math libraries (cuBLAS, cuBLASLt, cuSOLVER, cuSPARSE, nvJitLink): lib/gpu binds them on
# first use (src/cuda_libraries.cpp). The dynamic loader's own trace (LD_DEBUG=libs) is the witness.
set -u
trace="$(mktemp -d)"
trap 'rm -rf "$trace"' EXIT
LD_DEBUG=libs LD_DEBUG_OUTPUT="$trace/ld" "$@" >/dev/null 2>"$trace/stderr"
rc=$?
if [ "$rc" != 0 ]; then echo "expected exit 0, got $rc from: $*"; cat "$trace/stderr"; exit 1; fi
loaded="$(cat "$trace"/ld.* | sed -n 's/.*calling init: \(.*\)$/\1/p' | sort -u)"
if ! grep -q 'libcudart' <<<"$loaded"; then echo "no libcudart in the loader trace (not a CUDA build?):"; echo "$loaded"; exit 1; fi
math="$(grep -E 'lib(cublas|cublasLt|cusolver|cusparse|nvJitLink)\.' <<<"$loaded")"
if [ -n "$math" ]; then echo "a CPU run loaded the CUDA math libraries:"; echo "$math"; exit 1; fi
echo "ok: $(basename "$1") loads $(wc -l <<<"$loaded") libraries, the CUDA runtime and no CUDA math library"
