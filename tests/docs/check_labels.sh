#!/usr/bin/env bash
# Papers are cited by their short names (docs/papers.md), never by an internal label, and the
# repository never points at files outside itself or at a developer's absolute paths.
# Usage: check_labels.sh ROOT. Exit 1 listing every offending line.
set -u
root="$1"
cd "$root" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files)
else
  mapfile -t files < <(find . -path ./build -prune -o -path ./third_party -prune -o -type f -print)
fi
# The patterns are assembled so that this file does not match itself.
s='se''ed'
bad=$(grep -n -I -E "\b[Ss]${s:1}s? ?00[0-4]\b|\.\./sha""red|/wo""rk/(main|wt|tmp)|/tmp/cf_dev""ice/" "${files[@]}" 2>/dev/null)
if [ -n "$bad" ]; then
  echo "internal paper labels or paths outside the repository:"
  echo "$bad" | head -50
  exit 1
fi
echo "no internal paper labels or outside paths in ${#files[@]} files"
