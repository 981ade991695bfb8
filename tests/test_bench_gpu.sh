#!/usr/bin/env bash
# test_bench_gpu.sh DSOLVE MPIEXEC NP: `dsolve bench` on NP ranks with one GPU each: every case at small
# sizes with the GPU checked against the CPU on the same inputs (stated tolerances, #wrong 0), the
# references (cuBLAS alone, the device copy) and the broadcast measured, f32 and odd lengths (the add
# kernel's tail), non-square and weak-scaled matmul, the GPU checked on sampled rows where the CPU is
# not timed, --include-transfer, and a corrupted GPU result caught (exit 4); the ann (test outputs,
# W, failed fits), sort (keys bitwise, both verified; verification alone without CPU timing) and logreg
# (objective history, weights; f64 and f32, where Fashion-MNIST is) cases against the CPU. Exits 77
# (skipped) when a rank has no GPU of its own. Needs python3.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
np=${3:-1}
cli_py_needs="json"
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_timeout=600
cli_mpi_args=(--bind-to none -x NCCL_NVLS_ENABLE)

run "$np" info --json
"$py" -c "import json,sys; j=json.load(open('out.txt')); sys.exit(0 if all(r['device'] >= 0 for r in j['rank_info']) else 77)"
case $? in
    0) ;;
    77) echo "test_bench_gpu: not every one of $np ranks has a GPU of its own: skipped"; exit 77 ;;
    *) echo "test_bench_gpu: dsolve info failed: $(cat out.txt err.txt)"; exit 1 ;;
esac

# check NAME PYTHON: asserts over j (the JSON) and rows (case name -> its rows).
check() {
    local name=$1 code=$2
    NP=$np "$py" - "$code" <<'PY' && ok || bad "$name: $(head -c 3000 out.txt) $(cat err.txt)"
import json, math, os, sys
np_ = int(os.environ["NP"])
j = json.loads(open("out.txt").read())
rows = {c["case"]: c["rows"] for c in j["cases"]}
def gpu_checked(r):
    assert r["gpu_seconds"] and r["gpu_seconds"] > 0, r
    assert r["check"].startswith("cuda vs cpu"), r
    assert r["ok"] and r["wrong"] == 0 and r["max_err"] <= r["tol"], r
exec(sys.argv[1])
PY
}

run "$np" bench all --backend cuda --sizes 'matmul=16,100,700;add=1e3:1e7:x10;solve=3000,20000;ann=3000;sort=1e4,1e6;logreg=600' --cols 64 --batch 16 --repeat 3 --json
[ "$rc" -eq 0 ] && ok || bad "bench all: exit $rc: $(cat err.txt)"
check "bench all" '
assert j["ok"] and j["gpus"] == np_ and j["device_name"], j
for case, rs in rows.items():
    for r in rs:
        gpu_checked(r)
        assert r["cpu_seconds"] > 0 and r["speedup"] > 0, r
        assert r["gpu_mem_peak_bytes"] is None or r["gpu_mem_peak_bytes"] > 0, r
        if case in ("matmul", "add"):
            assert r["ref_seconds"] > 0 and r["of_ref"] > 0, r
        if case == "matmul" and np_ > 1:
            assert r["bcast_seconds"] > 0, r
assert rows["matmul"][-1]["check"] == "cuda vs cpu, all elements", rows["matmul"][-1]
'

run "$np" bench add --backend cuda --dtype f32 --sizes 1001,1000003,7 --repeat 2 --json
[ "$rc" -eq 0 ] && ok || bad "add f32 odd lengths: exit $rc: $(cat err.txt)"
check "add f32 odd lengths" 'for r in rows["add"]: gpu_checked(r)'

run "$np" bench matmul --backend cuda --dtype f32 --m 300 --n 2000 --k 100 --repeat 2 --json
check "matmul f32 non-square" '
r = rows["matmul"][0]; gpu_checked(r); assert r["shape"] == "300x2000x100", r'

run "$np" bench matmul --backend cuda --scaling weak --sizes 200 --repeat 2 --json
check "matmul weak" '
r = rows["matmul"][0]; gpu_checked(r); assert r["shape"] == f"{200 * np_}x200x200", r'

run "$np" bench matmul --backend cuda --sizes 64,1200 --cpu-budget 0 --repeat 2 --json
check "matmul without CPU timing: sampled rows" '
for r in rows["matmul"]:
    gpu_checked(r); assert r["cpu_seconds"] is None and "sampled rows" in r["check"], r'

run "$np" bench add --backend cuda --include-transfer --sizes 1e6 --repeat 2 --json
check "add with transfers" 'gpu_checked(rows["add"][0]); assert j["include_transfer"] == 1'

run "$np" bench matmul --backend cuda --include-transfer --sizes 300 --repeat 2 --json
check "matmul with transfers" 'gpu_checked(rows["matmul"][0])'

run "$np" bench ann --backend cuda --sizes 2000,20000 --repeat 2 --json
[ "$rc" -eq 0 ] && ok || bad "bench ann: exit $rc: $(cat err.txt)"
check "bench ann" '
for r in rows["ann"]:
    gpu_checked(r); assert r["cpu_seconds"] > 0 and r["tol"] == 1e-7 and "W to 1e-9" in r["check"], r
assert rows["ann"][1]["shape"] == "20000x10 K=1000", rows["ann"][1]
'

run "$np" bench sort --backend cuda --sizes "$((np * 1000)),1000003,20000000" --repeat 3 --json
[ "$rc" -eq 0 ] && ok || bad "bench sort: exit $rc: $(cat err.txt)"
check "bench sort" '
assert [c["dtype"] for c in j["cases"]] == ["int32"], j["cases"]
for r in rows["sort"]:
    gpu_checked(r); assert r["check"] == "cuda vs cpu, all keys bitwise; both verified" and r["max_err"] == 0, r
    assert r["work"] == r["size"] and r["gpu_rate"] > 0, r
'

run "$np" bench sort --backend cuda --sizes 5000000 --cpu-budget 0 --repeat 2 --json
check "bench sort without CPU timing: verified" '
r = rows["sort"][0]
assert r["cpu_seconds"] is None and r["gpu_seconds"] > 0 and r["ok"] and r["wrong"] == 0, r
assert r["check"].startswith("cuda verified"), r
'

fashion=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
new_cases="ann=2000;sort=100000"
if ls "$fashion"/train-images-idx3-ubyte* "$fashion"/train-labels-idx1-ubyte* >/dev/null 2>&1; then
    new_cases="$new_cases;logreg=600"
    for dt in f64 f32; do
        run "$np" bench logreg --backend cuda --dtype "$dt" --sizes 60,6000,60000 --repeat 2 --json
        [ "$rc" -eq 0 ] && ok || bad "bench logreg $dt: exit $rc: $(cat err.txt)"
        DT=$dt check "bench logreg $dt" '
tol = 1e-4 if os.environ["DT"] == "f32" else 1e-9
for r in rows["logreg"]:
    gpu_checked(r); assert r["tol"] == tol and r["check"].startswith("cuda vs cpu, objective history"), r
assert rows["logreg"][2]["shape"] == "60000x785, 10 it", rows["logreg"][2]
'
    done
else
    echo "test_bench_gpu: no Fashion-MNIST in $fashion: logreg not run"
fi

# Each new case's corrupted GPU result: FAILED, exit 4.
for c in ann sort logreg; do
    case $new_cases in *"$c="*) ;; *) continue ;; esac
    DSOLVE_BENCH_CORRUPT=1 run "$np" bench "$c" --backend cuda --sizes "$new_cases" --repeat 1
    [ "$rc" -eq 4 ] && grep -q "^# $c: check.*FAILED" out.txt && ok || bad "corrupted GPU $c: exit $rc: $(cat out.txt err.txt)"
done

DSOLVE_BENCH_CORRUPT=1 run "$np" bench all --backend cuda --sizes "matmul=100;add=1e5;solve=3000;$new_cases" --cols 32 --batch 8 --repeat 1
n_failed=$(grep -c '^# [a-z]*: check.*FAILED' out.txt)
n_want=$(($(tr -cd '=' <<<"matmul=100;add=1e5;solve=3000;$new_cases" | wc -c)))
[ "$rc" -eq 4 ] && [ "$n_failed" -eq "$n_want" ] && ok || bad "corrupted GPU results: exit $rc, $n_failed FAILED footers: $(cat out.txt err.txt)"

finish "test_bench_gpu (np $np)"
