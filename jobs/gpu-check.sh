#!/usr/bin/env bash
# gpu-check.sh OUT_DIR [PEER_SCRIPT]: one job on a GPU machine (1 to 4 GPUs): builds dsolve, runs every
# test (the gpu-labelled ones included), then the SolveBak benchmarks beside the seed's CuPy code (the
# peer, run in the same job), and writes logs, one JSON per run and summary.txt to OUT_DIR.
# Example (repository root): jobs/gpu-check.sh /tmp/out ../shared/peers/seed_peers.py
set -uo pipefail
out=${1:?usage: gpu-check.sh OUT_DIR [PEER_SCRIPT]}
peer=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
ngpu=$(nvidia-smi -L | grep -c '^GPU')
nvidia-smi -L >"$out/gpus.txt"
cd "$root"

echo "== build"
SECONDS=0
jobs/build.sh "$root/build-gpu" -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "built in ${SECONDS}s"

echo "== ctest"
(cd build-gpu && ctest -j 4 --output-on-failure --timeout 600 ${CTEST_ARGS:-}) >"$out/ctest.log" 2>&1
grep -E "tests passed|tests failed|\*\*\*|Passed|Failed|Skipped" "$out/ctest.log" | tail -20

# solve NAME NP ARGS...: one dsolve solve run, its JSON in OUT_DIR/NAME.json.
solve() {
    local name=$1 np=$2
    shift 2
    [ "$np" -le "$ngpu" ] || return 0
    local pass=(-x NCCL_NVLS_ENABLE)
    for v in DSOLVE_GRAM_TILE DSOLVE_GRAM_KSPLIT DSOLVE_GRAM_STREAMS; do [ -z "${!v:-}" ] || pass+=(-x "$v"); done
    mpirun -np "$np" --bind-to none "${pass[@]}" "$root/build-gpu/dsolve" solve --json --quiet "$@" \
        >"$out/$name.json" 2>"$out/$name.err" || echo "FAILED: $name: $(tail -2 "$out/$name.err")"
}

echo "== benchmarks"
# The Gram product: the tiled product (the default) against cuBLAS DSYRK on row chunks.
DSOLVE_GRAM_KSPLIT=0 solve gramplan_syrk 1 --method gram --repeat 10
DSOLVE_GRAM_KSPLIT=0 solve gramplan4m_syrk 1 --rows 4000000 --cols 1000 --method gram --repeat 5
solve seed_b100_gram 1 --method gram --repeat 20
solve seed_b100_residual 1 --method residual --repeat 20
solve seed_b1_gram 1 --batch 1 --method gram --repeat 10
solve seed_b1_residual 1 --batch 1 --method residual --repeat 3
solve seed_b100_auto 1 --repeat 20
solve seed_b100_f32 1 --precision f32 --repeat 20
solve corr_b32 1 --corr 0.5 --batch 32 --iters 500 --tol 1e-10 --method residual
for np in 1 2 4; do
    solve strong4m_np$np $np --rows 4000000 --cols 1000 --repeat 10
    solve strong4m_residual_np$np $np --rows 4000000 --cols 1000 --method residual --repeat 5
done
solve weak10m_np1 1 --rows 10000000 --cols 1000 --repeat 5
solve weak40m_np4 4 --rows 40000000 --cols 1000 --repeat 5

# From an HDF5 file, as a user runs it: gen writes 1 M x 1 000 (8 GB) with 4 ranks, solve reads it back.
if [ "$ngpu" -ge 4 ]; then
    h5=$(mktemp -d)/problem.h5
    mpirun -np 4 --bind-to none "$root/build-gpu/dsolve" gen --rows 1000000 --cols 1000 --seed 7 --output "$h5" --json \
        >"$out/file_gen.json" 2>"$out/file_gen.err" || echo "FAILED: gen: $(tail -2 "$out/file_gen.err")"
    solve file_solve_np4 4 --input "$h5" --output "${h5%.h5}-a.h5"
    ls -l "$(dirname "$h5")" >"$out/file_ls.txt"
    rm -rf "$(dirname "$h5")"
fi

if [ -n "$peer" ]; then
    echo "== peer (seed code, CuPy)"
    PYTHONUNBUFFERED=1 python3 "$peer" solvebak --xp cupy --batch 100 >"$out/peer_b100.json" 2>"$out/peer_b100.err"
    PYTHONUNBUFFERED=1 python3 "$peer" solvebak --xp cupy --batch 1 >"$out/peer_b1.json" 2>"$out/peer_b1.err"
fi

echo "== the Gram product's tile width and row chunks"
for t in 96 128 160 192 256; do
    for ks in 4 8 16; do DSOLVE_GRAM_TILE=$t DSOLVE_GRAM_KSPLIT=$ks solve tune_t${t}_k$ks 1 --method gram --repeat 10; done
done

python3 "$root/jobs/summarize.py" "$out" | tee "$out/summary.txt"
