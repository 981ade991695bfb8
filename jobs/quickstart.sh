#!/usr/bin/env bash
# quickstart.sh: from a fresh Debian or Ubuntu machine to a solve: installs what is missing, builds,
# and runs `dsolve solve` on the built-in problem (the seed's 100 000 × 1 000 SolveBak, batch 100,
# 10 sweeps) on every local GPU, one rank each, or on the CPU when there is none.
# Extra arguments go to dsolve solve, e.g. jobs/quickstart.sh --batch 1
set -euo pipefail
# shellcheck source=jobs/lib.sh
. "$(dirname "$0")/lib.sh"
"$DS_ROOT/jobs/install-deps.sh"
[ -x "$DS_DSOLVE" ] || ds_build >/dev/null
ds_mpirun_cmd $((DS_GPUS > 0 ? DS_GPUS : 1))
exec "${DS_MPIRUN[@]}" "$DS_DSOLVE" solve "$@"
