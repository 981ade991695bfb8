#!/usr/bin/env bash
# gpu-bench.sh OUT_DIR [PEER_SCRIPT]: the benchmarks of `dsolve bench` on one GPU machine (1 to 4 GPUs),
# about 2-3 minutes on 4 x H200. Assumes a built build-gpu/dsolve at the repository root (gpu-check.sh
# builds it). Writes one JSON (and SVG) per run into OUT_DIR, FAILED lines on errors, and summary.txt
# with the targets: matmul f64 N=8192 against cuBLAS alone, 4 GPUs against 1 at N=32768 (strong), add
# N=1e9 f64 against the device copy measured in the same run, solve, ann (100 000 rows, 1 000 neurons) and
# sort (1e8 and 1e9 int32 keys) against the seed's code (PEER), and logreg (the seed's ovr/gd run on
# 60 .. 60 000 Fashion-MNIST samples; DSOLVE_FASHION_DIR, skipped without the data), all on 1 GPU.
# Example (repository root): jobs/gpu-bench.sh /tmp/bench ../shared/peers/seed_peers.py
set -uo pipefail
out=${1:?usage: gpu-bench.sh OUT_DIR [PEER_SCRIPT]}
peer=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
dsolve=$root/build-gpu/dsolve
[ -x "$dsolve" ] || { echo "FAILED: gpu-bench: $dsolve is not built (jobs/build.sh build-gpu)"; exit 1; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# These machines' RAM grows as it is used (MemAvailable starts near 31 GiB): give bench the real limit
# for its memory check (GB: 128 GiB with 1 GPU, 256 with 2, 512 with 4), unless the caller set one.
if [ -z "${DSOLVE_HOST_MEMORY:-}" ]; then
    case $ngpu in 1) DSOLVE_HOST_MEMORY=120 ;; 2) DSOLVE_HOST_MEMORY=250 ;; 4) DSOLVE_HOST_MEMORY=500 ;; esac
fi
export DSOLVE_HOST_MEMORY=${DSOLVE_HOST_MEMORY:-}
export DSOLVE_FASHION_DIR=${DSOLVE_FASHION_DIR:-}

# bench NAME NP ARGS...: one dsolve run on NP ranks, its JSON in OUT_DIR/NAME.json (skipped if NP > GPUs).
bench() {
    local name=$1 np=$2
    shift 2
    [ "$np" -le "$ngpu" ] || { echo "skipped: $name needs $np GPUs ($ngpu here)"; return 0; }
    SECONDS=0
    mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE -x DSOLVE_HOST_MEMORY -x DSOLVE_FASHION_DIR "$dsolve" "$@" >"$out/$name.json" 2>"$out/$name.err" ||
        echo "FAILED: $name: $(grep '^dsolve:' "$out/$name.err" | head -2)"
    echo "$name: ${SECONDS}s"
}

bench info "$ngpu" info --json
bench matmul_sweep 1 bench matmul --sizes 10,100,1000,2000,4096,8192,10000 --repeat 5 --json --plot "$out/matmul_sweep.svg"
bench matmul_f32 1 bench matmul --dtype f32 --sizes 1000,8192 --repeat 5 --json
bench matmul_blog 1 bench matmul --m 2000 --n 40000 --k 2000 --repeat 5 --json
bench matmul_32k_np1 1 bench matmul --sizes 32768 --repeat 3 --json
bench matmul_32k_np4 4 bench matmul --sizes 32768 --repeat 3 --json
bench matmul_weak8k_np4 4 bench matmul --sizes 8192 --scaling weak --repeat 5 --json
bench add_sweep 1 bench add --sizes 1e3:1e9:x10 --repeat 5 --json --plot "$out/add_sweep.svg"
bench add_transfer 1 bench add --sizes 1e3:1e8:x10 --include-transfer --repeat 3 --json
bench add_1e9_np4 4 bench add --sizes 1e9 --repeat 5 --json
peer_args=()
[ -n "$peer" ] && peer_args=(--peer "$peer")
bench solve_peer 1 bench solve --sizes 100000 --cols 1000 --iters 10 --batch 100 --repeat 3 "${peer_args[@]}" --json --plot "$out/solve.svg"
bench ann_peer 1 bench ann --sizes 100000 --repeat 3 "${peer_args[@]}" --json
# The CPU sorts 1e9 keys only when the 1e8 row predicts at most 3 s a call; else the GPU's result is verified.
bench sort_peer 1 bench sort --sizes 1e8,1e9 --repeat 3 --cpu-budget 3 "${peer_args[@]}" --json --plot "$out/sort.svg"
fashion=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
if ls "$fashion"/train-images-idx3-ubyte* >/dev/null 2>&1; then
    DSOLVE_FASHION_DIR=$fashion bench logreg_sweep 1 bench logreg --sizes 60,600,6000,60000 --repeat 5 --json --plot "$out/logreg.svg"
    DSOLVE_FASHION_DIR=$fashion bench logreg_sweep_f32 1 bench logreg --dtype f32 --sizes 60,600,6000,60000 --repeat 5 --json
else
    echo "skipped: logreg: no Fashion-MNIST in $fashion (DSOLVE_FASHION_DIR)"
fi

python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
def rows(name):
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return None, []
    return j, [r for c in j["cases"] for r in c["rows"]]
def fmt(v, f="{:.4g}"):
    return "-" if v is None else f.format(v)
for name in sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json") and not f.startswith("info")):
    j, rs = rows(name)
    if not j:
        print(f"{name}: no result"); continue
    print(f"{name}: {j['gpus']} x {j['device_name'] or 'CPU'} ok={j['ok']}")
    for r in rs:
        print(f"  {r['shape']:>20} cpu {fmt(r['cpu_seconds'])} s gpu {fmt(r['gpu_seconds'])} s rate {fmt(r['gpu_rate'])}"
              f" ref {fmt(r['ref_rate'])} of_ref {fmt(r['of_ref'])} speedup {fmt(r['speedup'])}"
              f" peer {fmt(r['peer_seconds'])} s vs_peer {fmt(r['peer_ratio'])} err {r['max_err']:.2g} ({r['check']})")
print("targets:")
_, s = rows("matmul_sweep")
r = [x for x in s if x["size"] == 8192]
if r: print(f"  matmul f64 N=8192: {fmt(r[0]['of_ref'], '{:.3f}')} of cuBLAS alone (target >= 0.95)")
_, one = rows("matmul_32k_np1"); _, four = rows("matmul_32k_np4")
if one and four: print(f"  matmul f64 N=32768, 4 GPUs vs 1: {one[0]['gpu_seconds'] / four[0]['gpu_seconds']:.2f}x (target >= 3.6);"
                       f" B broadcast {fmt(four[0]['bcast_seconds'])} s not in the time")
_, a = rows("add_sweep")
r = [x for x in a if x["size"] == 10**9]
if r: print(f"  add f64 N=1e9: {fmt(r[0]['gpu_rate'])} GB/s = {fmt(r[0]['of_ref'], '{:.3f}')} of the device copy"
            f" ({fmt(r[0]['ref_rate'])} GB/s in this run; 4270 measured before) (target >= 0.90)")
for name, what in (("solve_peer", "solve 100000 x 1000"), ("ann_peer", "ann 100000 x 10, 1000 neurons")):
    _, r = rows(name)
    if r: print(f"  {what}: GPU {fmt(r[0]['gpu_seconds'])} s, CPU {fmt(r[0]['cpu_seconds'])} s, seed's CuPy {fmt(r[0]['peer_seconds'])} s"
                f" = {fmt(r[0]['peer_ratio'], '{:.2f}')}x ours")
_, r = rows("sort_peer")
for x in r:
    print(f"  sort {x['size']:.0e} int32: {fmt(x['gpu_rate'])} Gkeys/s, CPU {fmt(x['cpu_rate'])} Gkeys/s,"
          f" cupy.sort {fmt(x['peer_seconds'])} s = {fmt(x['peer_ratio'], '{:.2f}')}x ours ({x['check']})")
for name in ("logreg_sweep", "logreg_sweep_f32"):
    j, r = rows(name)
    for x in r:
        print(f"  logreg {name[-3:] if name.endswith('f32') else 'f64'} {x['shape']}: GPU {fmt(x['gpu_seconds'])} s,"
              f" CPU {fmt(x['cpu_seconds'])} s, speedup {fmt(x['speedup'])} (seed's Numba at 60000: 0.205 s)")
PY
