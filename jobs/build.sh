#!/usr/bin/env bash
# build.sh [BUILD_DIR] [extra cmake args]: configures and builds dsolve (Release). The CUDA backend
# is built when nvcc is found (on PATH or in /usr/local/cuda), for sm_90 unless
# CMAKE_CUDA_ARCHITECTURES is given.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
fi
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >"$build/configure.log" 2>&1 \
    || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)"
