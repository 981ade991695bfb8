#!/usr/bin/env bash
# gpu-scaling.sh OUT_DIR: strong and weak scaling of solve, ann and sort over 1, 2, 4 and 8 GPUs (those
# the machine has), after a built build-gpu/dsolve at the repository root (jobs/build.sh). One JSON per
# run in OUT_DIR (NAME.json, stderr in NAME.err), FAILED lines on errors, then the table of
# jobs/scaling.py (speedup over one GPU for strong runs, per-GPU efficiency for weak ones) in
# OUT_DIR/scaling.txt and scaling.json.
#   solve: strong 4 M × 1 000 (Gram route); weak 10 M × 1 000 rows a GPU (80 GB each)
#   ann:   strong 40 M × 10, 2 000 neurons; weak 10 M × 10 rows a GPU, 2 000 neurons
#   sort:  strong 4·10⁹ int32; weak 10⁹ int32 a GPU (uniform keys, verified)
# Example: jobs/gpu-scaling.sh /tmp/scaling
set -uo pipefail
out=${1:?usage: gpu-scaling.sh OUT_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
ngpu=$(nvidia-smi -L | grep -c '^GPU')

# run NAME NP COMMAND ARGS...: one dsolve run, its JSON in OUT_DIR/NAME.json.
run() {
    local name=$1 np=$2
    shift 2
    [ "$np" -le "$ngpu" ] || return 0
    SECONDS=0
    timeout 300 mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE "$root/build-gpu/dsolve" "$@" --json --quiet \
        >"$out/$name.json" 2>"$out/$name.err" || echo "FAILED: $name: $(tail -2 "$out/$name.err")"
    echo "$name: ${SECONDS}s"
}

G=1000000000
for np in 1 2 4 8; do
    run solve_strong_np$np $np solve --rows 4000000 --cols 1000 --repeat 10
    run solve_weak_np$np $np solve --rows $((np * 10000000)) --cols 1000 --repeat 5
    run ann_strong_np$np $np ann --rows 40000000 --test-rows 1000000 --neurons 2000 --repeat 3
    run ann_weak_np$np $np ann --rows $((np * 10000000)) --test-rows 1000000 --neurons 2000 --repeat 3
    run sort_strong_np$np $np sort --gen $((4 * G)) --dtype int32 --dist uniform --repeat 5 --verify
    run sort_weak_np$np $np sort --gen $((np * G)) --dtype int32 --dist uniform --repeat 5 --verify
done
python3 "$root/jobs/scaling.py" "$out" | tee "$out/scaling.txt"
