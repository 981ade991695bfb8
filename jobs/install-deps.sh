#!/usr/bin/env bash
# install-deps.sh: installs dsolve's build and test dependencies on Debian or Ubuntu with apt, when
# any is missing: compilers, CMake, Open MPI, serial HDF5, OpenBLAS with LAPACKE, and python3 with
# numpy and h5py (for the tests and the peer scripts), zlib (the IDX reader) and Fashion-MNIST
# (dataset-fashion-mnist: the logistic-regression test). The CUDA toolkit (with NCCL) is not installed
# here; when /usr/local/cuda is present the CUDA backend is built too.
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
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)

if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
echo "install-deps: installing ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
