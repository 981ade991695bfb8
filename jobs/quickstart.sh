#!/usr/bin/env bash
# quickstart.sh: from a fresh Debian or Ubuntu machine to a solve: installs what is missing, builds,
# and runs `dsolve solve` on the built-in problem (the seed's 100 000 × 1 000 SolveBak, batch 100,
# 10 sweeps) on every local GPU, one rank each, or on the CPU when there is none.
# Extra arguments go to dsolve solve, e.g. jobs/quickstart.sh --batch 1
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/jobs/install-deps.sh"
[ -x "$root/build/dsolve" ] || "$root/jobs/build.sh" "$root/build" >/dev/null
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
np=$(( gpus > 0 ? gpus : 1 ))
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE "$root/build/dsolve" solve "$@"
