#!/usr/bin/env bash
# test_ann_cli.sh: `dsolve ann`, `dsolve predict` and `dsolve gen --kind ann` as a user meets them:
# every bad input the network issue lists (constant or non-finite y, labels out of range, neurons
# beyond the rows, a bad subset, a model file missing fields or of the wrong width) gets one line, a
# non-zero exit and no output file; a saved model reproduces the training metrics and, recomputed by
# NumPy from /W and /V, the predictions; classes from HDF5 and from IDX files; the JSON contract; the
# model the same bits on 1, 2 and 3 ranks (the output Gram's exact sums over fixed row blocks), where
# the blocks leave ranks without rows too (400 rows are one block).
# Usage: test_ann_cli.sh DSOLVE MPIEXEC. Needs python3 with numpy and h5py (77 without).
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"

"$py" - <<'PY'
import gzip, h5py, numpy as np, os
rng = np.random.default_rng(3)
def problem(m, n):
    X = rng.random((m, n)) - 0.5
    return X, np.sin(X.sum(1)) / 2
def write(name, **d):
    with h5py.File(name, "w") as f:
        for k, v in d.items(): f[k] = v
X, y = problem(400, 3); Xt, yt = problem(300, 3)
write("train.h5", X=X, y=y); write("test.h5", X=Xt, y=yt)
write("offset.h5", X=X, y=1e9 + y); write("offset_test.h5", X=Xt, y=1e9 + yt)
write("const.h5", X=X, y=np.full(400, 0.25))
yn = y.copy(); yn[17] = np.nan; write("nany.h5", X=X, y=yn)
write("wide.h5", X=np.hstack([Xt, Xt[:, :1]]), y=yt)
lab = np.clip(((y + 0.5) * 3).astype(np.int64), 0, 2); labt = np.clip(((yt + 0.5) * 3).astype(np.int64), 0, 2)
write("cls.h5", X=X, labels=lab.astype(np.int32)); write("cls_test.h5", X=Xt, labels=labt.astype(np.int32))
bl = lab.copy(); bl[5] = 5; write("badlab.h5", X=X, labels=bl)
# A tiny MNIST-layout directory: 4 × 4 images whose label is the brightest quadrant (of 3).
os.makedirs("idx", exist_ok=True)
for split, m in (("train", 600), ("t10k", 200)):
    img = rng.integers(0, 60, (m, 4, 4)).astype(np.uint8); l = rng.integers(0, 3, m).astype(np.uint8)
    for i, c in enumerate(l):
        img[i, (c // 2) * 2:(c // 2) * 2 + 2, (c % 2) * 2:(c % 2) * 2 + 2] += 150
    with gzip.open(f"idx/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + np.array([m, 4, 4], ">u4").tobytes() + img.tobytes())
    with gzip.open(f"idx/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + np.array([m], ">u4").tobytes() + l.tobytes())
PY

# Bad inputs.
expect 3 "y is constant" 2 ann --input const.h5 --neurons 20 --output out.h5
expect 3 "nany.h5.*/y.*row 17" 2 ann --input nany.h5 --neurons 20 --output out.h5
expect 3 "label 5 of row 5" 2 ann --input badlab.h5 --classes 3 --neurons 20 --output out.h5
expect 3 "label 2 of row" 1 ann --input cls.h5 --classes 2 --neurons 20 --output out.h5
expect 2 "--neurons 401 is more than the 400 rows" 2 ann --input train.h5 --neurons 401 --output out.h5
expect 2 "--subset 500 must be between 1 and the 400 rows" 1 ann --input train.h5 --neurons 4 --subset 500 --output out.h5
expect 2 "--subset" 1 ann --input train.h5 --subset -1 --output out.h5
expect 2 "--neurons" 1 ann --input train.h5 --neurons 0 --output out.h5
expect 2 "--classes needs a labelled set" 1 ann --classes 3
expect 2 "--idx reads a labelled set" 1 ann --idx idx
expect 2 "it needs a regression" 1 ann --input cls.h5 --classes 3 --plot p.svg
expect 2 "--neurons 2 is fewer than the 3 classes" 2 ann --input cls.h5 --classes 3 --neurons 2 --output out.h5
expect 3 "missing.h5: no such file" 2 ann --input missing.h5 --output out.h5
expect 3 "/labels" 1 ann --input train.h5 --classes 3 --output out.h5
expect 3 "none: no such directory" 1 ann --idx "$work/none" --classes 3 --output out.h5

# A good training: the model file, the JSON contract, and predict reproducing the metrics.
"$mpiexec" -np 3 "$dsolve" ann --input train.h5 --test test.h5 --neurons 40 --output model.h5 --json --plot fit.svg \
    >train.json 2>stderr.txt && ok || bad "ann on train.h5: $(cat stderr.txt)"
"$mpiexec" -np 2 "$dsolve" predict --model model.h5 --input train.h5 --json >ptrain.json 2>stderr.txt && ok || bad "predict train: $(cat stderr.txt)"
"$mpiexec" -np 4 "$dsolve" predict --model model.h5 --input test.h5 --output pred.h5 --plot scatter.svg --json \
    >ptest.json 2>stderr.txt && ok || bad "predict test: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "model file, predictions or JSON"
import h5py, json, numpy as np
j = json.load(open("train.json"))
keys = ("rows cols neurons subset ranks backend train_r test_r train_rmse test_rmse train_r2 test_r2 seconds fit_seconds "
        "hidden_seconds solve_seconds total_seconds output_route ridge failed_neurons train_accuracy test_accuracy").split()
missing = [k for k in keys if k not in j]
assert not missing, missing
assert j["rows"] == 400 and j["neurons"] == 40 and j["subset"] == 10 and j["ranks"] == 3, j
assert j["test_r"] > 0.999 and j["output_route"] in ("cholesky", "eigen"), j
with h5py.File("model.h5") as f:
    W, V = f["W"][...], f["V"][...]
    for k in ("y_scale", "y_shift", "classes", "ridge", "options", "output_route"):
        assert k in f["V"].attrs, k
assert W.shape == (40, 4) and V.shape == (41, 1), (W.shape, V.shape)
with h5py.File("test.h5") as f:
    Xt, yt = f["X"][...], f["y"][...]
with h5py.File("pred.h5") as f:
    yhat = f["yhat"][...]
ref = np.tanh(Xt @ W[:, :3].T + W[:, 3]) @ V[:40, 0] + V[40, 0]
assert yhat.shape == (300,) and np.allclose(yhat, ref, rtol=0, atol=1e-10), np.abs(yhat - ref).max()
pt, pe = json.load(open("ptrain.json")), json.load(open("ptest.json"))
assert abs(pt["r"] - j["train_r"]) < 1e-9 and abs(pt["rmse"] - j["train_rmse"]) < 1e-12, (pt, j)
assert abs(pe["r"] - j["test_r"]) < 1e-9 and abs(pe["r"] - np.corrcoef(yhat, yt)[0, 1]) < 1e-9, (pe, j)
import xml.etree.ElementTree as ET
for name in ("fit.svg", "scatter.svg"):
    dots = [e for e in ET.parse(name).getroot().iter() if e.tag.endswith("circle")]
    assert len(dots) == 300, (name, len(dots))
PY
expect 3 "columns" 2 predict --model model.h5 --input wide.h5 --output out.h5
# an X whose chunk index lists 3 chunks where its shape holds 1: HDF5 read heap memory past a short inflated
# chunk into X, and predict printed predictions from it (found by fuzzing; test_cli.sh has the solve side)
expect 3 "/X: its chunk index lists 3 chunks where its shape holds 1" 1 predict --model model.h5 \
    --input "$(dirname "$(realpath "$0")")/fuzz/corpus/h5_lsq/regress-chunk_count" --output out.h5
"$py" -c "
import h5py
with h5py.File('model.h5') as a, h5py.File('nov.h5', 'w') as b: b['W'] = a['W'][...]
with h5py.File('model.h5') as a, h5py.File('noattr.h5', 'w') as b: b['W'] = a['W'][...]; b['V'] = a['V'][...]
with h5py.File('model.h5') as a, h5py.File('short.h5', 'w') as b:
    b['W'] = a['W'][...]; b['V'] = a['V'][:-1]
    for k, v in a['V'].attrs.items(): b['V'].attrs[k] = v
"
expect 3 "nov.h5: dataset /V: not found" 2 predict --model nov.h5 --input test.h5 --output out.h5
expect 3 "noattr.h5: dataset /V: attribute classes: not found" 1 predict --model noattr.h5 --input test.h5 --output out.h5
expect 3 "short.h5: dataset /V has 40 rows" 1 predict --model short.h5 --input test.h5 --output out.h5
expect 2 "predict needs --model and --input" 1 predict --model model.h5
"$py" -c "
import h5py
with h5py.File('model.h5') as a, h5py.File('lying.h5', 'w') as b:
    b['W'] = a['W'][...]; b['V'] = a['V'][...]
    for k, v in a['V'].attrs.items(): b['V'].attrs[k] = v
    b['V'].attrs['neurons'] = 41
"
expect 3 "lying.h5: attribute neurons = 41, but /W and /V hold 40" 1 predict --model lying.h5 --input test.h5 --output out.h5

# A y far from 0 (an offset of 1e9 over a spread of 1): the targets are centred, so the fit keeps its digits.
"$mpiexec" -np 2 "$dsolve" ann --input offset.h5 --test offset_test.h5 --neurons 40 --json >offset.json 2>stderr.txt \
    && "$py" -c "import json,sys; j=json.load(open('offset.json')); sys.exit(0 if j['test_r'] > 0.999 and j['failed_neurons'] == 0 else 1)" \
    && ok || bad "offset y: $(cat offset.json stderr.txt)"

# Classes, from HDF5 and from IDX files.
"$mpiexec" -np 2 "$dsolve" ann --input cls.h5 --test cls_test.h5 --classes 3 --neurons 60 --output cmodel.h5 --json \
    >cls.json 2>stderr.txt && ok || bad "ann --classes: $(cat stderr.txt)"
"$mpiexec" -np 2 "$dsolve" predict --model cmodel.h5 --input cls_test.h5 --output cpred.h5 --json \
    >cpred.json 2>stderr.txt && ok || bad "predict classes: $(cat stderr.txt)"
"$mpiexec" -np 3 "$dsolve" ann --idx idx --classes 3 --neurons 30 --json >idx.json 2>stderr.txt && ok || bad "ann --idx: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "classes"
import h5py, json, numpy as np
j, p, k = json.load(open("cls.json")), json.load(open("cpred.json")), json.load(open("idx.json"))
assert j["classes"] == 3 and j["train_accuracy"] > 0.85 and j["test_accuracy"] > 0.8, j
assert abs(p["accuracy"] - j["test_accuracy"]) < 1e-8, (p, j)
with h5py.File("cpred.h5") as f, h5py.File("cls_test.h5") as t:
    c, yh = f["class"][...], f["yhat"][...]
    assert yh.shape == (300, 3) and c.dtype == np.int64 and np.array_equal(c, yh.argmax(1)), "class"
    assert abs((c == t["labels"][...]).mean() - p["accuracy"]) < 1e-8
assert k["test_rows"] == 200 and k["test_accuracy"] > 0.9, k
PY

# gen --kind ann: the same file for any rank count, y = sin(sum x)/2; the built-in default prints test r.
"$mpiexec" -np 1 "$dsolve" gen --kind ann --rows 501 --cols 4 --seed 2 --output a1.h5 >/dev/null 2>&1 || bad "gen ann np 1"
"$mpiexec" -np 3 "$dsolve" gen --kind ann --rows 501 --cols 4 --seed 2 --output a3.h5 >/dev/null 2>&1 || bad "gen ann np 3"
"$py" - <<'PY' && ok || bad "gen --kind ann"
import h5py, numpy as np
with h5py.File("a1.h5") as a, h5py.File("a3.h5") as b:
    assert np.array_equal(a["X"][...], b["X"][...]) and np.array_equal(a["y"][...], b["y"][...])
    X, y = a["X"][...], a["y"][...]
    assert "a_true" not in a and np.allclose(y, np.sin(X.sum(1)) / 2, rtol=0, atol=1e-15)
    assert X.min() >= -0.5 and X.max() < 0.5
PY
"$mpiexec" -np 2 "$dsolve" ann --rows 4000 --neurons 80 >builtin.txt 2>&1 && grep -q "test .*r 0.99" builtin.txt && ok \
    || bad "built-in ann: $(cat builtin.txt)"
# 20 000 rows are 5 blocks of 4096 (the last short): 1, 2 and 3 ranks give one model.
for n in 1 2 3; do
    "$mpiexec" -np "$n" "$dsolve" ann --rows 20000 --neurons 60 --json >"ranks$n.json" 2>stderr.txt ||
        bad "ann on $n ranks: $(cat stderr.txt)"
done
"$py" -c "
import json; d = [json.load(open(f'ranks{n}.json')) for n in (1, 2, 3)]
assert len({j['weights_digest'] for j in d}) == 1 and len({j['train_rmse'] for j in d}) == 1, [(j['weights_digest'], j['train_rmse']) for j in d]" &&
    ok || bad "ann on 1, 2 and 3 ranks: the models differ"
"$dsolve" ann --help | grep -q -- "--subset" && ok || bad "ann --help"
"$dsolve" predict --help | grep -q -- "--model" && ok || bad "predict --help"

finish test_ann_cli
