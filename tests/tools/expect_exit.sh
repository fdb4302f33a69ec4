#!/usr/bin/env bash
# Usage: expect_exit.sh CODE [--stderr REGEX] -- COMMAND...
# Passes when COMMAND exits with exactly CODE (and, if given, stderr matches REGEX).
set -u
want="$1"; shift
pattern=""
if [ "${1:-}" = "--stderr" ]; then pattern="$2"; shift 2; fi
[ "${1:-}" = "--" ] && shift
err="$(mktemp)"
"$@" >/dev/null 2>"$err"
rc=$?
msg="$(cat "$err")"; rm -f "$err"
if [ "$rc" != "$want" ]; then
  echo "expected exit $want, got $rc from: $*"; echo "stderr: $msg"; exit 1
fi
if [ -n "$pattern" ] && ! grep -Eq -- "$pattern" <<<"$msg"; then
  echo "stderr does not match /$pattern/: $msg"; exit 1
fi
echo "ok: exit $rc; $msg" | head -2
