#!/usr/bin/env bash
# test_sort_cli.sh: `dsolve sort` as a user meets it: bad inputs (not 1-D, unsupported type, empty,
# values of another length, missing file or dataset, external link) exit 3 with one line naming file
# and dataset and leave no output; a sorted file from an HDF5 input (with values and argsort) matches
# numpy's stable sort; --json carries its documented keys. Usage: test_sort_cli.sh DSOLVE MPIEXEC.
# Needs python3 with numpy and h5py (77 without).
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"

cli_cmd=(sort --backend cpu)
cli_timeout=120

"$py" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(3)
k = rng.integers(-50, 50, 1001).astype(np.int64)
f = rng.standard_normal(777).astype(np.float32); f[::7] = np.nan; f[1::11] = -0.0; f[2::13] = 0.0; f[3::17] = np.inf
with h5py.File("good.h5", "w") as h:
    h["keys"] = k; h["vals"] = rng.random(1001); h["short"] = np.arange(10.0); h["fkeys"] = f
    h["m2d"] = np.zeros((4, 4), np.int32); h["empty"] = np.zeros(0, np.int32); h["i16"] = np.zeros(5, np.int16)
    h["str"] = np.array([b"a", b"b"]); h["grp/keys"] = k[:5]
    h["ext"] = h5py.ExternalLink("other.h5", "keys")
open("text.h5", "w").write("not hdf5\n")
PY

expect 3 "good.h5: dataset /m2d: 2-D, expected a 1-D dataset" 2 --input good.h5 --dataset m2d --output out.h5
expect 3 "good.h5: dataset /empty: empty" 2 --input good.h5 --dataset empty --output out.h5
expect 3 "good.h5: dataset /i16: unsupported type (2-byte integer)" 1 --input good.h5 --dataset i16 --output out.h5
expect 3 "good.h5: dataset /str: unsupported type" 1 --input good.h5 --dataset str
expect 3 "good.h5: dataset short has 10 elements but the keys keys have 1001" 3 --input good.h5 --values short --output out.h5
expect 3 "good.h5: dataset /nope: not found" 2 --input good.h5 --dataset nope --output out.h5
expect 3 "missing.h5: no such file" 2 --input missing.h5 --output out.h5
expect 3 "text.h5: not an HDF5 file" 1 --input text.h5
expect 3 "/ext is an external link, refused" 2 --input good.h5 --dataset ext --output out.h5
expect 2 "takes --input or --gen, not both" 1 --input good.h5 --gen 10
expect 2 "names a dataset of --input" 1 --gen 10 --values v
expect 2 "needs the cuda backend" 1 --gen 10 --cub-only

# A sorted file with values and the permutation, against numpy's stable argsort (np 3).
check_file() {
    "$py" - "$@" <<'PY'
import sys, h5py, numpy as np
name, desc = sys.argv[1], sys.argv[2] == "1"
with h5py.File("good.h5") as h: k = h[name][...]; v = h["vals"][...] if name == "keys" else None
with h5py.File("out.h5") as h:
    s = h[name][...]; p = h["argsort"][...]; sv = h["vals"][...] if v is not None else None
def total(x):  # our order of floats: -0.0 before +0.0, NaN last
    if x.dtype.kind != "f": return x
    b = x.view(np.int32 if x.itemsize == 4 else np.int64).astype(np.int64)
    b = np.where(np.isnan(x), np.iinfo(np.int64).max, np.where(b < 0, -(b & 0x7fffffffffffffff) - 1, b))
    return b
t = total(k)
want = np.argsort(-t - 1 if desc else t, kind="stable")
assert p.dtype == np.int64 and (p == want).all(), "permutation"
assert (s.view(np.uint8) == k[want].view(np.uint8)).all() or np.array_equal(s, k[want], equal_nan=True), "keys"
if v is not None: assert (sv == v[want]).all(), "values"
PY
}
for np_ in 1 3; do
    rm -f out.h5
    if "$mpiexec" -np $np_ "$dsolve" sort --backend cpu --input good.h5 --values vals --argsort --output out.h5 --verify \
        >stdout.txt 2>&1 && check_file keys 0; then ok; else bad "sort --values --argsort (np $np_): $(tail -3 stdout.txt)"; fi
    rm -f out.h5
    if "$mpiexec" -np $np_ "$dsolve" sort --backend cpu --input good.h5 --dataset fkeys --argsort --descending \
        --output out.h5 --verify >stdout.txt 2>&1 && check_file fkeys 1; then ok; else bad "float keys descending (np $np_): $(tail -3 stdout.txt)"; fi
done

# --json: one object with the documented keys; generated keys do not depend on the rank count.
"$mpiexec" -np 2 "$dsolve" sort --backend cpu --gen 100000 --dist zipf --dtype float64 --verify --json --repeat 3 >j2.json 2>err.txt
"$mpiexec" -np 1 "$dsolve" sort --backend cpu --gen 100000 --dist zipf --dtype float64 --output a.h5 --quiet >/dev/null 2>&1
"$mpiexec" -np 3 "$dsolve" sort --backend cpu --gen 100000 --dist zipf --dtype float64 --output b.h5 --quiet >/dev/null 2>&1
if "$py" - <<'PY'
import json, h5py, numpy as np
j = json.loads(open("j2.json").read())
for k in ["keys", "dtype", "ranks", "seconds", "total_seconds", "gkeys_per_s", "imbalance", "verified",
          "local_sort_seconds", "splitter_seconds", "exchange_seconds", "merge_seconds", "repeat", "seconds_all"]:
    assert k in j, k
assert j["keys"] == 100000 and j["dtype"] == "float64" and j["ranks"] == 2 and j["verified"] is True
assert 1.0 <= j["imbalance"] <= 1.1 and len(j["seconds_all"]) == 3
a = h5py.File("a.h5")["keys"][...]; b = h5py.File("b.h5")["keys"][...]
assert np.array_equal(a, b) and (np.diff(a) >= 0).all()
PY
then ok; else bad "--json keys or generated keys across rank counts: $(cat j2.json err.txt)"; fi

finish test_sort_cli
