#!/usr/bin/env bash
# Build llama.cpp's llama-server (static, portable, -O1, no web UI, no HTTPS) from the llama.cpp tree
# vendored in the llama-cpp-python sdist on PyPI. Cached: a second call prints the path at once.
#
#   tests/real_engine/build_llama_server.sh [VERSION]   -> prints the path of the binary
#
# Env: LLAMA_CPP_PYTHON_VERSION (default 0.3.36, the newest release with vendor/llama.cpp when
# this was written), LLAMA_CACHE_DIR (default ~/.cache/sglang-fleet/llama.cpp, beside the wheelhouse:
# every clone on the machine shares one build, keyed by the version and this script's sha256, so a
# change of the build options builds again), JOBS (default nproc),
# PIP (default "python3 -m pip"; the repo venv has no pip).
set -euo pipefail

VERSION="${1:-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SCRIPT_KEY=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
CACHE="${LLAMA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sglang-fleet/llama.cpp}/$VERSION-$SCRIPT_KEY"
BIN="$CACHE/llama-server"
JOBS="${JOBS:-$(nproc)}"
PIP="${PIP:-python3 -m pip}"

if [[ -x "$BIN" ]]; then
    echo "$BIN"
    exit 0
fi

mkdir -p "$CACHE"
# One build at a time (pytest-xdist workers, a second shell).
exec 9>"$CACHE/.lock"
flock 9
if [[ -x "$BIN" ]]; then
    echo "$BIN"
    exit 0
fi

log() { echo "[build_llama_server] $*" >&2; }
start=$(date +%s)

SDIST=$(ls "$CACHE"/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)
if [[ -z "$SDIST" ]]; then
    log "downloading llama-cpp-python==$VERSION sdist from PyPI"
    $PIP download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE" >&2
    SDIST="$CACHE/llama_cpp_python-$VERSION.tar.gz"
fi

SRC="$CACHE/src"
if [[ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]]; then
    rm -rf "$SRC" && mkdir -p "$SRC"
    tar xzf "$SDIST" -C "$SRC" --strip-components=1
fi
LLAMA="$SRC/vendor/llama.cpp"
if [[ ! -f "$LLAMA/CMakeLists.txt" ]]; then
    log "llama-cpp-python $VERSION has no vendor/llama.cpp"
    exit 1
fi

# Only pass options this llama.cpp knows (older trees lack LLAMA_BUILD_UI / LLAMA_OPENSSL).
# -O1, not Release's -O3: the tests' model is tiny, and the build is CI's longest step before the
# tests (side by side, -O1 takes 0.73 of -O3's CPU time, bench/README.md; bench figures dated
# before 2026-12-03 were measured with an -O3 build).
OPTS=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
      -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON)
for opt in LLAMA_BUILD_UI LLAMA_USE_PREBUILT_UI LLAMA_OPENSSL LLAMA_CURL LLAMA_BUILD_APP; do
    if grep -q "option($opt\b" "$LLAMA/CMakeLists.txt"; then
        OPTS+=("-D$opt=OFF")
    fi
done
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

log "configuring llama.cpp from llama-cpp-python $VERSION: ${OPTS[*]}"
cmake -S "$LLAMA" -B "$CACHE/build" "${GEN[@]}" "${OPTS[@]}" >"$CACHE/configure.log" 2>&1 \
    || { tail -30 "$CACHE/configure.log" >&2; exit 1; }
log "building llama-server with $JOBS jobs (log: $CACHE/build.log)"
cmake --build "$CACHE/build" --target llama-server -j "$JOBS" >"$CACHE/build.log" 2>&1 \
    || { tail -30 "$CACHE/build.log" >&2; exit 1; }

cp "$CACHE/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "$(( $(date +%s) - start ))" >"$CACHE/build_seconds"
log "built $BIN in $(cat "$CACHE/build_seconds") s"
echo "$BIN"
