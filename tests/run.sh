#!/usr/bin/env bash
# run.sh: the test command: installs what is missing, builds (with the CUDA backend when nvcc is
# there) and runs every test with ctest. Tests labelled gpu are skipped where no GPU is present.
# ctest runs tests side by side on the machine's cores (DSOLVE_TEST_JOBS, default nproc): each test
# counts its ranks as PROCESSORS, so a multi-rank test takes as many cores, the gpu tests share one
# lock (one at a time), and the fault and checkpoint tests run alone (RUN_SERIAL). On the 2-core CI machine: 890 s against 1 078 s one after the other (2026-11-27).
# Extra arguments go to ctest, e.g. tests/run.sh -L gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/jobs/install-deps.sh"
"$root/jobs/build.sh" "$root/build"
export NCCL_NVLS_ENABLE=0
cd "$root/build"
ctest --output-on-failure --timeout 900 -j "${DSOLVE_TEST_JOBS:-$(nproc)}" "$@"
