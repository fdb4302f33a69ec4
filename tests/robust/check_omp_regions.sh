#!/bin/sh
# Audit of OpenMP regions (docs/testing.md): an exception that leaves an OpenMP region calls
# std::terminate, so every `#pragma omp parallel` in lib/, apps/, bench/ and notebooks_cpp/ must
# be preceded (within 3 lines) by one of
#   cf::OmpExceptions NAME;      the body runs through NAME.run(...), NAME.rethrow() after it
#   // omp-nothrow: REASON       the body cannot throw (no allocation, no throwing call)
#   // omp-exceptions: HOW       the body catches everything itself (say how)
# Usage: check_omp_regions.sh SOURCE_DIR. Prints every unmarked region; exit 1 if there is one.
src=${1:?usage: check_omp_regions.sh SOURCE_DIR}
cd "$src" || exit 2
bad=0
total=0
for f in $(find lib apps bench notebooks_cpp \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' \) 2>/dev/null | sort); do
  out=$(awk -v file="$f" '
    { line[NR] = $0 }
    /^[[:space:]]*#[[:space:]]*pragma[[:space:]]+omp[[:space:]]+parallel/ {
      ok = 0
      for (k = NR - 3; k < NR; ++k)
        if (k >= 1 && (line[k] ~ /OmpExceptions/ || line[k] ~ /omp-nothrow:/ || line[k] ~ /omp-exceptions:/)) ok = 1
      printf "%s %s:%d\n", (ok ? "ok" : "UNMARKED"), file, NR
    }' "$f")
  [ -n "$out" ] || continue
  total=$((total + $(printf '%s\n' "$out" | wc -l)))
  if printf '%s\n' "$out" | grep -q '^UNMARKED'; then
    printf '%s\n' "$out" | grep '^UNMARKED'
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "FAIL: the OpenMP regions above neither capture exceptions (cf/core/omp_exception.hpp) nor say why they cannot throw"
  exit 1
fi
echo "ok: $total OpenMP regions, each captures exceptions or is marked omp-nothrow / omp-exceptions"
