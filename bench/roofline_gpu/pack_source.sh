#!/usr/bin/env bash
# Pack the llama.cpp tree that tests/real_engine/build_llama_server.sh caches (vendored in the
# llama-cpp-python sdist on PyPI) into one small tarball the device machine can build from: it
# has no internet, and a `run` call carries at most 64 MiB. Drops what a CUDA llama-bench build
# never reads (models, docs, the web UI, other GPU backends).
#
#   bench/roofline_gpu/pack_source.sh   -> prints .cache/roofline_gpu/llama.cpp-src.tar.xz
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
BIN=$("$REPO/tests/real_engine/build_llama_server.sh" "$VERSION")  # fetches + unpacks the sdist once
SRC="$(dirname "$BIN")/src/vendor/llama.cpp"
OUT_DIR="$REPO/.cache/roofline_gpu"
TAR="$OUT_DIR/llama.cpp-src.tar.xz"
mkdir -p "$OUT_DIR"
if [[ ! -s "$TAR" ]]; then
    tar -C "$SRC/.." -cJf "$TAR.tmp" \
        --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/media \
        --exclude=llama.cpp/tools/ui --exclude=llama.cpp/benches --exclude=llama.cpp/.git \
        --exclude='llama.cpp/ggml/src/ggml-'{vulkan,sycl,opencl,hexagon,et,metal,webgpu,openvino,cann,virtgpu} \
        llama.cpp
    mv "$TAR.tmp" "$TAR"
    echo "llama-cpp-python $VERSION" >"$OUT_DIR/SOURCE"
fi
echo "$TAR"
