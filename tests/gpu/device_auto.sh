#!/usr/bin/env bash
# Usage: device_auto.sh TOOL -- COMMAND...
# `COMMAND --device auto` on a machine without a usable CUDA device (CI): the run succeeds on the
# CPU (exit 0) and says so in exactly one stderr line "TOOL: --device auto: <reason>; running on
# the CPU" (cf::gpu::resolve_device, docs/gpu.md).
set -u
tool="$1"; shift
[ "${1:-}" = "--" ] && shift
err="$(mktemp)"
"$@" --device auto >/dev/null 2>"$err"
rc=$?
lines="$(grep -c -- "^$tool: --device auto: .*; running on the CPU\$" "$err")"
msg="$(cat "$err")"; rm -f "$err"
if [ "$rc" != 0 ]; then echo "expected exit 0, got $rc from: $*"; echo "stderr: $msg"; exit 1; fi
if [ "$lines" != 1 ]; then echo "expected one '$tool: --device auto: ...; running on the CPU' line, got $lines: $msg"; exit 1; fi
echo "ok: $(grep -- '--device auto' <<<"$msg")"
