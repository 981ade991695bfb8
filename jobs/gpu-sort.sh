#!/usr/bin/env bash
# gpu-sort.sh OUT_DIR [PEER]: the `dsolve sort` benchmarks on a GPU machine (assumes a built
# build-gpu/dsolve at the repository root, as jobs/gpu-check.sh leaves it). One JSON per run in OUT_DIR
# (NAME.json, stderr in NAME.err), FAILED lines on errors. Runs needing more GPUs than present are skipped.
#   1 GPU:  10^9 int32 uniform and reverse (the seed's worst case), float32; each with the CUB-alone
#           reference on the same keys (--cub-only) for the ratio.
#   4 GPUs: 4·10^9 int32 uniform, int64 and float64 (4·10^9 and 2·10^9), float32 (4·10^9, the native path
#           after the float special-key check), imbalance of equal, few-unique, zipf.
#   Peers:  python3 PEER sort --xp cupy --n 10^9 --dtype int32 (if PEER given); CPU backend vs NumPy at 10^8.
# Example: jobs/gpu-sort.sh /tmp/sort-out ../shared/peers/seed_peers.py
set -uo pipefail
out=${1:?usage: gpu-sort.sh OUT_DIR [PEER]}
peer=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
ngpu=$(nvidia-smi -L | grep -c '^GPU')
cores=$(nproc)

# run NAME NP ARGS...: one dsolve sort run, its JSON in OUT_DIR/NAME.json.
run() {
    local name=$1 np=$2
    shift 2
    [ "$np" -le "$ngpu" ] || return 0
    timeout 300 mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE "$root/build-gpu/dsolve" sort --json --quiet "$@" \
        >"$out/$name.json" 2>"$out/$name.err" || echo "FAILED: $name: $(tail -2 "$out/$name.err")"
    cat "$out/$name.json"
}

G=1000000000
run sort1_i32_uniform 1 --gen $G --dtype int32 --dist uniform --repeat 5 --verify
run cub1_i32_uniform 1 --gen $G --dtype int32 --dist uniform --repeat 5 --cub-only
run sort1_i32_reverse 1 --gen $G --dtype int32 --dist reverse --repeat 5 --verify
run cub1_i32_reverse 1 --gen $G --dtype int32 --dist reverse --repeat 5 --cub-only
run sort1_f32_uniform 1 --gen $G --dtype float32 --dist uniform --repeat 5 --verify
run cub1_f32_uniform 1 --gen $G --dtype float32 --dist uniform --repeat 5 --cub-only

run sort4_i32_uniform 4 --gen $((4 * G)) --dtype int32 --dist uniform --repeat 5 --verify
run sort4_i64_uniform 4 --gen $((4 * G)) --dtype int64 --dist uniform --repeat 3 --verify
run sort4_f64_uniform 4 --gen $((2 * G)) --dtype float64 --dist uniform --repeat 3 --verify
run sort4_f32_uniform 4 --gen $((4 * G)) --dtype float32 --dist uniform --repeat 3 --verify
for d in equal few-unique zipf; do
    run sort4_i32_$d 4 --gen $((4 * G)) --dtype int32 --dist $d --repeat 3 --verify
done
run sort4_default 4 --repeat 3

# CPU backend against NumPy's np.sort on the same cores (one rank, all cores).
timeout 300 mpirun -np 1 --bind-to none "$root/build-gpu/dsolve" sort --backend cpu --gen 100000000 --dtype int32 \
    --repeat 3 --verify --json --quiet >"$out/sort_cpu_i32.json" 2>"$out/sort_cpu_i32.err" \
    || echo "FAILED: sort_cpu_i32: $(tail -2 "$out/sort_cpu_i32.err")"
cat "$out/sort_cpu_i32.json"
if [ -n "$peer" ]; then
    timeout 300 python3 "$peer" sort --n 100000000 --dtype int32 >"$out/peer_numpy_sort.txt" 2>&1 \
        || echo "FAILED: peer numpy sort"
    timeout 300 python3 "$peer" sort --xp cupy --n $G --dtype int32 >"$out/peer_cupy_sort.txt" 2>&1 \
        || echo "FAILED: peer cupy sort"
    tail -3 "$out/peer_numpy_sort.txt" "$out/peer_cupy_sort.txt"
fi
echo "cores: $cores, gpus: $ngpu"
