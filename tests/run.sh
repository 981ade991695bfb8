#!/usr/bin/env bash
# run.sh: the test command: installs what is missing, builds (with the CUDA backend when nvcc is
# there) and runs every test with ctest. Tests labelled gpu are skipped where no GPU is present.
# Extra arguments go to ctest, e.g. tests/run.sh -L gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/jobs/install-deps.sh"
"$root/jobs/build.sh" "$root/build"
export NCCL_NVLS_ENABLE=0
cd "$root/build"
ctest --output-on-failure --timeout 900 "$@"
