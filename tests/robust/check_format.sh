#!/bin/sh
# The tree is clang-format clean (.clang-format at the root): runs
#   clang-format --dry-run -Werror
# over every tracked *.cpp / *.hpp (git ls-files; every *.cpp / *.hpp under lib apps tests bench
# notebooks_cpp fuzz when the source is not a git checkout) and lists the files that differ.
# Exit 77 (CTest: skipped) with the reason when clang-format is missing. CLANG_FORMAT=path
# selects the binary (default: clang-format, Debian package clang-format, version 14 here).
# Usage: check_format.sh SOURCE_DIR
src=${1:?usage: check_format.sh SOURCE_DIR}
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "skipped: $cf not found (apt-get install clang-format; scripts/deps/apt.txt lists it)"
  exit 77
fi
cd "$src" || exit 2
if [ ! -f .clang-format ]; then
  echo "FAIL: no .clang-format in $src"
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files '*.cpp' '*.hpp' | grep -v '^third_party/')
else
  files=$(find lib apps tests bench notebooks_cpp fuzz \( -name '*.cpp' -o -name '*.hpp' \) 2>/dev/null | sort)
fi
n=0
bad=""
for f in $files; do
  [ -f "$f" ] || continue
  n=$((n + 1))
  if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
    bad="$bad $f"
  fi
done
if [ -n "$bad" ]; then
  count=$(echo $bad | wc -w)
  echo "FAIL: $count of $n files differ from .clang-format ($("$cf" --version | head -1)):"
  for f in $bad; do echo "  $f"; done
  echo "fix: $cf -i$bad"
  exit 1
fi
echo "ok: $n files are clang-format clean ($("$cf" --version | head -1))"
