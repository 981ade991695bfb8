#!/usr/bin/env bash
# gpu-ann.sh OUT_DIR [PEER] [FASHION_DIR]: the `dsolve ann` benchmarks on a GPU machine (assumes a built
# build-gpu/dsolve at the repository root, as jobs/gpu-check.sh leaves it). One JSON per run in OUT_DIR
# (NAME.json, stderr in NAME.err, with DSOLVE_TRACE's per-rank lines), FAILED lines on errors; runs
# needing more GPUs than present are skipped.
#   seed problem (100 000 x 10, 1 000 neurons): 1 GPU, and the CPU backend on all cores; the seed's
#   NumPy and CuPy code (PEER) on the same machine;  40 M x 10 with 2 000 neurons on 1, 2 and 4 GPUs;
#   Fashion-MNIST (FASHION_DIR, IDX files) with 1 000 to 4 000 neurons on 1 and 4 GPUs.
# Example: jobs/gpu-ann.sh /tmp/ann-out ../shared/peers/seed_peers.py /usr/share/datasets/fashion-mnist
set -uo pipefail
out=${1:?usage: gpu-ann.sh OUT_DIR [PEER] [FASHION_DIR]}
peer=${2:-}
fashion=${3:-/usr/share/datasets/fashion-mnist}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
export DSOLVE_TRACE=${DSOLVE_TRACE:-1}  # each rank's hidden-layer phases, on stderr (NAME.err)
ngpu=$(nvidia-smi -L | grep -c '^GPU')

# run NAME NP ARGS...: one dsolve ann run, its JSON in OUT_DIR/NAME.json.
run() {
    local name=$1 np=$2
    shift 2
    [ "$np" -le "$ngpu" ] || return 0
    timeout 300 mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE -x DSOLVE_TRACE "$root/build-gpu/dsolve" ann --json --quiet "$@" \
        >"$out/$name.json" 2>"$out/$name.err" || echo "FAILED: $name: $(tail -2 "$out/$name.err")"
    cat "$out/$name.json"
}

run ann_seed_gpu 1 --repeat 10
run ann_seed_cpu 1 --backend cpu --repeat 3
if [ -n "$peer" ]; then
    timeout 300 python3 "$peer" ann --xp cupy --vars 10 >"$out/peer_ann_cupy.json" 2>"$out/peer_ann_cupy.err" || echo "FAILED: peer ann cupy"
    timeout 300 python3 "$peer" ann --xp numpy --vars 10 >"$out/peer_ann_numpy.json" 2>"$out/peer_ann_numpy.err" || echo "FAILED: peer ann numpy"
    cat "$out/peer_ann_cupy.json" "$out/peer_ann_numpy.json"
fi
for np in 1 2 4; do
    run ann_40m_np$np $np --rows 40000000 --test-rows 1000000 --neurons 2000 --repeat 3
    grep '^trace:' "$out/ann_40m_np$np.err" | tail -n "$np"  # the last timed training's lines
done
if [ -d "$fashion" ]; then
    for k in 1000 2000 4000; do
        run ann_fashion_k$k 1 --idx "$fashion" --classes 10 --neurons $k --repeat 3
    done
    run ann_fashion_k4000_np4 4 --idx "$fashion" --classes 10 --neurons 4000 --repeat 3
fi
