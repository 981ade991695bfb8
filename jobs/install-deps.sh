#!/usr/bin/env bash
# install-deps.sh: installs dsolve's build and test dependencies on Debian or Ubuntu with apt, when
# any is missing: compilers, CMake, Open MPI, serial HDF5, OpenBLAS with LAPACKE, and python3 with
# numpy and h5py (for the tests and the peer scripts), zlib (the IDX reader) and Fashion-MNIST
# (dataset-fashion-mnist: the logistic-regression test), and clang with its libFuzzer runtime
# (tests/fuzz/run.sh). The CUDA toolkit (with NCCL) is not installed here; when /usr/local/cuda is
# present the CUDA backend is built too.
set -euo pipefail

need=()
command -v cc >/dev/null || need+=(build-essential)
command -v cmake >/dev/null || need+=(cmake)
command -v mpicc >/dev/null || need+=(libopenmpi-dev openmpi-bin)
[ -e /usr/include/hdf5/serial/hdf5.h ] || [ -e /usr/include/hdf5.h ] || need+=(libhdf5-dev)
ls /usr/lib/x86_64-linux-gnu/libopenblas.so* /usr/lib/*/libopenblas.so* >/dev/null 2>&1 || need+=(libopenblas-dev)
[ -e /usr/include/lapacke.h ] || need+=(liblapacke-dev)
/usr/bin/python3 -c "import numpy, h5py" 2>/dev/null || need+=(python3-numpy python3-h5py)
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -e /usr/include/zlib.h ] || need+=(zlib1g-dev)
fuzz_ok() {
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
        clang -x c -fsanitize=fuzzer - -o /dev/null >/dev/null 2>&1
}
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)

fuzz_ok || fuzz=1
if [ ${#need[@]} -eq 0 ] && [ -z "${fuzz:-}" ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps: installing ${need[*]}"
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# clang with its libFuzzer runtime, for tests/fuzz/run.sh only: the runtime is a package of its own on
# Debian 12 (libclang-rt-dev); where that name is unknown, clang alone. Never fatal: the build and the
# tests do not need it.
if [ -n "${fuzz:-}" ]; then
    echo "install-deps: installing clang and its libFuzzer runtime (tests/fuzz)"
    $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null 2>&1 ||
        $sudo apt-get install -y -qq --no-install-recommends clang >/dev/null 2>&1 || true
    fuzz_ok || echo "install-deps: clang cannot link libFuzzer here; tests/fuzz/run.sh will not run" >&2
fi
