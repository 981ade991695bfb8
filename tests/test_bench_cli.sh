#!/usr/bin/env bash
# test_bench_cli.sh: `dsolve bench` and `dsolve info` as a user meets them, on the CPU side (CI): every
# case at small sizes on 1 and 2 ranks, the table's footer, --json / --csv / --plot parsed (python3's
# json, csv and xml.etree), the check failing on a corrupted result (DSOLVE_BENCH_CORRUPT=1: FAILED and
# exit 4), the peer's ratio from a stand-in peer script (solve, ann, sort), logreg without its data
# (exit 3 when named, skipped by all), and bad input (exit 2 for usage, 3 for sizes that do not fit).
# Usage: test_bench_cli.sh DSOLVE MPIEXEC. Needs python3 (77 without). logreg runs where Fashion-MNIST is
# (DSOLVE_FASHION_DIR, else /usr/share/datasets/fashion-mnist); elsewhere `all` skips it.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
cli_py_needs="json, csv, xml.etree.ElementTree"
source "$(dirname "$(realpath "$0")")/cli_lib.sh"

# bench runs the CPU side only (--backend cpu), so that the same checks hold on a GPU machine;
# tests/test_bench_gpu.sh covers the GPU side.
cli_backend=cpu

small='matmul=16,40:120:x3;add=1e3:1e5:x10;solve=1500,3000;ann=300,2000;sort=1000,100000;logreg=60,600'
fashion=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
if ls "$fashion"/train-images-idx3-ubyte* "$fashion"/train-labels-idx1-ubyte* >/dev/null 2>&1; then
    have_fashion=1 new_cases='ann sort logreg' n_cases=6 n_sizes=14
else
    have_fashion=0 new_cases='ann sort' n_cases=5 n_sizes=12
    echo "test_bench_cli: no Fashion-MNIST in $fashion: logreg is checked only for its missing-data paths"
fi
export HAVE_FASHION=$have_fashion

# The table: every case, both rank counts, OK footers and exit 0.
for np in 1 2; do
    run "$np" bench all --sizes "$small" --cols 30 --batch 8 --repeat 3
    if [ "$rc" -ne 0 ]; then bad "bench all np $np: exit $rc: $(cat err.txt)"; continue; fi
    n_ok=$(grep -c '^# [a-z]*: check (.*): OK' out.txt)
    [ "$n_ok" -eq "$n_cases" ] && ok || bad "bench all np $np: want $n_cases OK footers, got $n_ok: $(cat out.txt)"
    grep -q 'FAILED' out.txt && bad "bench all np $np: FAILED in a good run" || ok
    grep -q '^#  *N  *shape  *cpu_time' out.txt && grep -q '(ms)' out.txt && ok || bad "bench all np $np: table header"
    grep -q '^# dsolve bench sort: int32, ' out.txt && grep -q '^#  *keys  *shape ' out.txt && grep -q '^# .*(ms) *Gkeys/s' out.txt &&
        grep -q '^# dsolve bench ann: f64, ' out.txt && ok || bad "bench all np $np: the sort and ann headers"
done

# The new cases alone (2 ranks; f32 where the case has it): their own check texts, OK.
for c in $new_cases; do
    run 2 bench "$c" --sizes "$small" --dtype f32 --repeat 2
    if [ "$rc" -eq 0 ] && grep -q "^# $c: check (cpu .*): OK, 2 sizes, 0 wrong" out.txt; then ok; else
        bad "bench $c np 2: exit $rc: $(cat out.txt err.txt)"; fi
done

# --json: one object with the documented keys; rows as asked; the checks' numbers within tolerance.
run 2 bench all --sizes "$small" --cols 30 --batch 8 --repeat 2 --json --plot plot.svg
[ "$rc" -eq 0 ] && ok || bad "bench all --json: exit $rc: $(cat err.txt)"
"$py" - <<'PY' && ok || bad "bench --json contract"
import json, os
j = json.loads(open("out.txt").read())
for k in ("command", "ranks", "dtype", "scaling", "repeat", "warmup", "gpus", "gpu_note", "ok", "cases", "threads_per_rank"):
    assert k in j, k
assert j["ranks"] == 2 and j["ok"] is True and j["repeat"] == 2, j
cases = {c["case"]: c for c in j["cases"]}
names = ["matmul", "add", "solve", "ann", "sort"] + (["logreg"] if os.environ["HAVE_FASHION"] == "1" else [])
assert list(cases) == names, list(cases)
want = {"matmul": [16, 40, 120], "add": [1000, 10000, 100000], "solve": [1500, 3000], "ann": [300, 2000],
        "sort": [1000, 100000], "logreg": [60, 600]}
for name, c in cases.items():
    assert [r["size"] for r in c["rows"]] == want[name], (name, c["rows"])
    assert c["failed"] == 0 and c["unit"] in ("GFLOP/s", "GB/s", "Gkeys/s"), c
    for r in c["rows"]:
        for k in ("cpu_seconds", "cpu_rate", "max_err", "tol", "wrong", "rss_peak_bytes", "cpu_use_pct", "wall_seconds", "check", "ok", "work", "shape"):
            assert k in r, (name, k)
        assert r["cpu_seconds"] > 0 and r["cpu_rate"] > 0 and r["ok"] is True, r
        assert r["max_err"] <= r["tol"] and r["wrong"] == 0, r
        assert r["rss_peak_bytes"] > 1e6 and r["wall_seconds"] > 0, r
        if j["gpus"] == 0:
            assert r["gpu_seconds"] is None and r["speedup"] is None, r
mm = cases["matmul"]["rows"][1]
assert mm["shape"] == "40x40x40" and mm["work"] == 2 * 40**3, mm
assert cases["add"]["rows"][0]["work"] == 3 * 1000 * 8
a = cases["ann"]["rows"][1]
assert a["shape"] == "2000x10 K=200" and a["work"] == 2000 * 201**2 and a["tol"] == 1e-7, a
assert a["check"].startswith("cpu outputs vs plain loop"), a
s = cases["sort"]
assert s["unit"] == "Gkeys/s" and s["dtype"] == "int32" and cases["ann"]["dtype"] == "f64", s
assert [r["work"] for r in s["rows"]] == [1000, 100000] and s["rows"][1]["shape"] == "100000 int32", s
assert all(r["tol"] == 0 and r["max_err"] == 0 and r["check"].startswith("cpu verified") for r in s["rows"]), s
if "logreg" in cases:
    l = cases["logreg"]["rows"][1]
    assert l["shape"] == "600x785, 10 it" and l["work"] == 4 * 600 * 785 * 10 * 10 and l["tol"] == 1e-9, l
    assert l["check"] == "cpu final objective vs plain loop", l
PY
"$py" - <<'PY' && ok || bad "bench --plot: the SVGs"
import os, xml.etree.ElementTree as ET
plots = [("matmul", 3), ("add", 3), ("solve", 2), ("ann", 2), ("sort", 2)]
for case, points in plots + ([("logreg", 2)] if os.environ["HAVE_FASHION"] == "1" else []):
    svg = ET.parse(f"plot-{case}.svg").getroot()
    lines = [e for e in svg.iter() if e.tag.endswith("polyline")]
    assert len(lines) >= 1, (case, len(lines))
    assert len(lines[0].get("points").split()) == points, (case, lines[0].get("points"))
    assert any(case in (t.text or "") for t in svg.iter() if t.tag.endswith("text")), case
PY

# --csv: a header and one line per size; weak scaling multiplies the sizes by the ranks; sizes syntax.
run 2 bench add --sizes 1000,5:20:+5 --scaling weak --dtype f32 --csv --repeat 1
[ "$rc" -eq 0 ] && ok || bad "bench add --csv: exit $rc: $(cat err.txt)"
"$py" - <<'PY' && ok || bad "bench --csv"
import csv
rows = list(csv.DictReader(open("out.txt")))
assert [int(r["size"]) for r in rows] == [1000, 5, 10, 15, 20], rows
assert [r["shape"] for r in rows] == ["2000", "10", "20", "30", "40"], [r["shape"] for r in rows]
assert all(r["case"] == "add" and r["ok"] == "1" and float(r["work"]) == 3 * 4 * int(r["shape"]) for r in rows), rows
PY

# Non-square matmul, f32, more repeats; the shape column says M x N x K.
run 1 bench matmul --m 30 --n 200 --k 70 --dtype f32 --repeat 3 --warmup 2
[ "$rc" -eq 0 ] && grep -q ' 30x200x70 ' out.txt && ok || bad "bench matmul --m --n --k: $rc $(cat out.txt err.txt)"

# A corrupted result is caught: FAILED in the table, every case's footer FAILED, exit 4, on 1 and 2 ranks
# (one run per rank count: each mpirun start costs seconds here).
for np in 1 2; do
    DSOLVE_BENCH_CORRUPT=1 run "$np" bench all --sizes "$small" --cols 30 --batch 8 --repeat 1
    n_failed=0
    for c in matmul add solve $new_cases; do
        grep -q "^# $c: check.*FAILED" out.txt && n_failed=$((n_failed + 1))
    done
    if [ "$rc" -eq 4 ] && [ "$n_failed" -eq "$n_cases" ] && grep -q "^dsolve: bench: $n_sizes size(s) failed the check" err.txt; then ok; else
        bad "corrupted results np $np: exit $rc, $n_failed of $n_cases FAILED footers; $(grep '^#.*check' out.txt) $(cat err.txt)"; fi
done
DSOLVE_BENCH_CORRUPT=1 run 2 bench matmul --sizes 20 --json
"$py" -c "import json,sys; j=json.load(open('out.txt')); r=j['cases'][0]['rows'][0]; sys.exit(0 if j['ok'] is False and r['ok'] is False and r['wrong'] == 1 else 1)" &&
    ok || bad "corrupted --json: $(cat out.txt)"

# The peer: a stand-in script prints the seed peers' JSON line; its time and the ratio are reported.
# A peer that fails leaves the run OK with no peer figures.
cat >peer.py <<'PY'
import json, sys
assert sys.argv[1] == "solvebak" and "--obs" in sys.argv, sys.argv
print("warming up")
print(json.dumps({"case": "solvebak", "seconds": 0.25, "rows": int(sys.argv[sys.argv.index("--obs") + 1])}))
PY
printf 'import sys\nprint("no numpy here")\nsys.exit(1)\n' >badpeer.py
run 1 bench solve --sizes 2000 --cols 20 --batch 5 --repeat 1 --peer peer.py --json
"$py" -c "import json,sys; r=json.load(open('out.txt'))['cases'][0]['rows'][0]; sys.exit(0 if r['peer_seconds'] == 0.25 and abs(r['peer_ratio'] - 0.25 / r['cpu_seconds']) < 1e-6 * r['peer_ratio'] else 1)" &&
    ok || bad "peer: $(cat out.txt err.txt)"
run 1 bench solve --sizes 2000 --cols 20 --batch 5 --repeat 1 --peer badpeer.py --json
[ "$rc" -eq 0 ] && grep -q "peer gave no time" err.txt &&
    "$py" -c "import json,sys; r=json.load(open('out.txt'))['cases'][0]['rows'][0]; sys.exit(0 if r['peer_seconds'] is None else 1)" &&
    ok || bad "failing peer: $rc $(cat out.txt err.txt)"

# The peer of ann and sort: the seed's arguments for the same problem (CPU: --xp numpy).
cat >peer2.py <<'PY'
import json, sys
a = sys.argv[1:]
want = {"ann": ["ann", "--xp", "numpy", "--obs", "2000", "--vars", "10", "--neurons", "200"],
        "sort": ["sort", "--xp", "numpy", "--n", "5000", "--dtype", "int32"]}[a[0]]
assert a == want, a
print(json.dumps({"case": a[0], "seconds": 0.5 if a[0] == "ann" else 0.125}))
PY
for c in ann sort; do
    run 2 bench "$c" --sizes 'ann=2000;sort=5000' --repeat 1 --peer peer2.py --json
    [ "$rc" -eq 0 ] && "$py" - <<'PY' && ok || bad "$c peer: $(cat out.txt err.txt)"
import json
r = json.load(open("out.txt"))["cases"][0]["rows"][0]
assert r["peer_seconds"] == (0.5 if r["size"] == 2000 else 0.125), r
assert abs(r["peer_ratio"] - r["peer_seconds"] / r["cpu_seconds"]) < 1e-6 * r["peer_ratio"], r
PY
done

# logreg without its data: exit 3 naming the directory when asked for; skipped with a note by all.
DSOLVE_FASHION_DIR=$work/none expect 3 "bench logreg: no Fashion-MNIST: $work/none/train-images-idx3-ubyte" 2 bench logreg
DSOLVE_FASHION_DIR=$work/none run 1 bench all --sizes 'matmul=8;add=100;solve=100;ann=100;sort=100' --cols 4 --batch 2 --repeat 1 --json
[ "$rc" -eq 0 ] && grep -q "bench: logreg skipped (no Fashion-MNIST" err.txt &&
    "$py" -c "import json,sys; j=json.load(open('out.txt')); sys.exit(0 if [c['case'] for c in j['cases']] == ['matmul', 'add', 'solve', 'ann', 'sort'] and j['ok'] else 1)" &&
    ok || bad "all without Fashion-MNIST: $rc $(cat out.txt err.txt)"

# Bad input: usage (2) and sizes that do not fit (3), before any row is printed.
expect 2 "unknown case 'sorting'" 1 bench sorting
expect 2 "needs a CASE" 1 bench --sizes 10
expect 2 "--sizes: '1e3:1e9:y10'" 1 bench add --sizes 1e3:1e9:y10
expect 2 "--sizes: 'ten'" 1 bench add --sizes ten
expect 2 "--sizes: '0'" 1 bench add --sizes 0,10
expect 2 "--sizes: '100:10'" 1 bench add --sizes 100:10
expect 2 "--sizes: '1e3:1e4:x1'" 1 bench add --sizes 1e3:1e4:x1
expect 2 "--sizes: '2.5'" 1 bench add --sizes 2.5
expect 2 "more than 64 sizes" 1 bench add --sizes 1:100:+1
expect 2 "--m, --n and --k go together" 1 bench matmul --m 10 --n 10
expect 2 "not both" 1 bench matmul --m 10 --n 10 --k 10 --sizes 5
expect 2 "--json or --csv" 1 bench add --json --csv
expect 2 "--dtype" 1 bench add --dtype f16
expect 2 "--scaling" 1 bench add --scaling sideways
expect 2 "--repeat" 1 bench add --repeat 0
expect 3 "--peer nope.py" 1 bench solve --peer nope.py
expect 3 "add N=1000000000000000: needs .* GB of host memory" 2 bench add --sizes 1e3,1e15
expect 3 "matmul N=1000000: needs .* GB of host memory" 1 bench matmul --sizes 10,1e6
DSOLVE_HOST_MEMORY=0.001 expect 3 "matmul N=200: needs .* GB of host memory.*DSOLVE_HOST_MEMORY" 1 bench matmul --sizes 200
DSOLVE_HOST_MEMORY=lots expect 2 "DSOLVE_HOST_MEMORY must be gigabytes" 1 bench matmul --sizes 200
DSOLVE_HOST_MEMORY=1 run 1 bench matmul --sizes 200 --repeat 1
[ "$rc" -eq 0 ] && ok || bad "DSOLVE_HOST_MEMORY=1 refused a small run: $(cat err.txt)"
expect 3 "fewer than the 2 ranks" 2 bench matmul --sizes 1
expect 3 "solve: 1 rows are fewer than the 2 ranks" 2 bench solve --sizes 1
expect 3 "bench ann: 1 rows are fewer than the 2 ranks" 2 bench ann --sizes 1
expect 3 "bench sort: 1 keys are fewer than the 2 ranks" 2 bench sort --sizes 1

# --help lists the cases from the table; info reports ranks, hosts and versions (text and JSON).
"$dsolve" bench --help >out.txt && grep -q "matmul" out.txt && grep -q "solve" out.txt && grep -q -- "--include-transfer" out.txt &&
    grep -q "^  ann " out.txt && grep -q "^  sort " out.txt && grep -q "^  logreg " out.txt &&
    ok || bad "bench --help"
run 2 info
[ "$rc" -eq 0 ] && grep -q "2 ranks on 1 host" out.txt && grep -q "OpenBLAS" out.txt && grep -q "cores" out.txt &&
    ok || bad "info: $rc $(cat out.txt err.txt)"
run 2 info --json
"$py" - <<'PY' && ok || bad "info --json: $(cat out.txt)"
import json
j = json.loads(open("out.txt").read())
assert j["command"] == "info" and j["ranks"] == 2 and len(j["rank_info"]) == 2, j
assert len(j["hosts"]) == 1 and j["hosts"][0]["cores"] >= 1 and j["hosts"][0]["ram_total_bytes"] > 0, j["hosts"]
for r in j["rank_info"]:
    assert (r["gpu"] is None) == (r["device"] == -1), r
    if r["gpu"]:
        assert r["gpu"]["memory_total_bytes"] > 0 and "." in r["gpu"]["compute_capability"], r
    else:
        assert r["gpu_note"], r
v = j["versions"]
for k in ("dsolve", "mpi", "hdf5", "openblas", "lapack", "cuda_runtime", "cublas", "cusolver", "nccl", "nvidia_driver"):
    assert k in v, k
assert "Open MPI" in v["mpi"] or "MPICH" in v["mpi"], v["mpi"]
PY

finish test_bench_cli
