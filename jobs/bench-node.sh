#!/usr/bin/env bash
# bench-node.sh OUT_DIR [PEER_SCRIPT] [bench options]: the whole `dsolve bench` on one node: `dsolve info`,
# then every case (bench all, each case's default sizes) on one rank and on one rank per GPU (strong
# and weak scaling), each as JSON with its SVG plots, into OUT_DIR. CPU only where the node has no GPU.
# Uses $DSOLVE, else build-gpu/dsolve, else build/dsolve at the repository root.
# Example: jobs/bench-node.sh /tmp/bench ../shared/peers/seed_peers.py --repeat 3
set -uo pipefail
out=${1:?usage: bench-node.sh OUT_DIR [PEER_SCRIPT] [bench options]}
peer=${2:-}
shift $(($# > 1 ? 2 : 1))
root=$(cd "$(dirname "$0")/.." && pwd)
dsolve=${DSOLVE:-}
for d in "$root/build-gpu/dsolve" "$root/build/dsolve"; do [ -z "$dsolve" ] && [ -x "$d" ] && dsolve=$d; done
[ -n "$dsolve" ] || { echo "bench-node: no dsolve built (jobs/build.sh)"; exit 1; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
export DSOLVE_HOST_MEMORY=${DSOLVE_HOST_MEMORY:-}  # GB; set it where RAM grows as it is used
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
peer_args=()
[ -n "$peer" ] && peer_args=(--peer "$peer")
status=0

run() {
    local name=$1 np=$2
    shift 2
    echo "== $name (np $np)"
    mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE -x DSOLVE_HOST_MEMORY "$dsolve" "$@" >"$out/$name.json" 2>"$out/$name.err" ||
        { echo "FAILED: $name: $(grep '^dsolve:' "$out/$name.err" | head -2)"; status=1; }
}

run info "$((ngpu > 0 ? ngpu : 1))" info --json
run bench_np1 1 bench all --json --plot "$out/bench_np1.svg" "${peer_args[@]}" "$@"
if [ "$ngpu" -gt 1 ]; then
    run bench_np${ngpu}_strong "$ngpu" bench all --json --plot "$out/bench_np${ngpu}_strong.svg" "$@"
    run bench_np${ngpu}_weak "$ngpu" bench all --scaling weak --json --plot "$out/bench_np${ngpu}_weak.svg" "$@"
fi
ls -l "$out"
exit $status
