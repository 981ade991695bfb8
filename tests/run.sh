#!/usr/bin/env bash
# run.sh: the test command: installs what is missing, builds (with the CUDA backend when nvcc is
# there) and runs every test with ctest. Tests labelled gpu are skipped where no GPU is present.
# Where no GPU is visible, ctest runs the tests side by side on the machine's cores (DSOLVE_TEST_JOBS,
# default nproc there): each test counts its ranks as PROCESSORS, so a multi-rank test takes as many
# cores, and the fault and checkpoint tests run alone (RUN_SERIAL). On the 2-core CI machine: 890 s
# against 1 078 s one after the other (2026-11-27). Where a GPU is visible the default is one at a
# time, as before: some tests without the gpu label (cli, ann_cli) run dsolve's default backend, which
# is then the GPU, beside the gpu tests' lock.
# Extra arguments go to ctest, e.g. tests/run.sh -L gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/jobs/install-deps.sh"
"$root/jobs/build.sh" "$root/build"
export NCCL_NVLS_ENABLE=0
jobs=${DSOLVE_TEST_JOBS:-}
if [ -z "$jobs" ]; then
    jobs=$(nproc)
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then jobs=1; fi
fi
cd "$root/build"
ctest --output-on-failure --timeout 900 -j "$jobs" "$@"
