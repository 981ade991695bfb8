#!/usr/bin/env bash
# test_cli.sh: dsolve as a user meets it: exit codes, one-line messages naming file and dataset, no
# output file after a failure, gen's contents independent of the rank count, the output file and the
# --json contract. Usage: test_cli.sh DSOLVE MPIEXEC. Needs python3 with numpy and h5py (77 without).
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"

"$py" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(1)
X = rng.random((50, 4)) - 0.5; y = X @ np.arange(1.0, 5.0)
def write(name, **d):
    with h5py.File(name, "w") as f:
        for k, v in d.items(): f[k] = v
write("good.h5", X=X, y=y)
write("int.h5", X=(X * 100).astype(np.int32), y=y)
write("x1d.h5", X=X[:, 0], y=y)
write("y2d.h5", X=X, y=X)
write("rows.h5", X=X, y=y[:-1])
write("empty.h5", X=np.zeros((0, 4)), y=np.zeros(0))
write("small.h5", X=X[:3], y=y[:3])
Xn = X.copy(); Xn[37, 2] = np.nan; write("nan.h5", X=Xn, y=y)
yi = y.copy(); yi[11] = np.inf; write("inf.h5", X=X, y=yi)
write("noy.h5", X=X)
write("named.h5", features=X, target=y)
open("text.h5", "w").write("not hdf5\n")
PY
head -c 1000 good.h5 > trunc.h5

expect 3 "missing.h5: no such file" 1 solve --input missing.h5 --output out.h5
expect 3 "text.h5: not an HDF5 file" 1 solve --input text.h5 --output out.h5
expect 3 "trunc.h5" 2 solve --input trunc.h5 --output out.h5
expect 3 "/y" 2 solve --input noy.h5 --output out.h5
expect 3 "/X.*integer" 2 solve --input int.h5 --output out.h5
expect 3 "/X.*1-D" 1 solve --input x1d.h5 --output out.h5
expect 3 "/y.*2-D" 1 solve --input y2d.h5 --output out.h5
expect 3 "rows" 2 solve --input rows.h5 --output out.h5
expect 3 "empty" 1 solve --input empty.h5 --output out.h5
expect 3 "/X.*row 37" 2 solve --input nan.h5 --output out.h5
expect 3 "/X.*row 37" 3 solve --input nan.h5 --output out.h5
expect 3 "/y.*row 11" 2 solve --input inf.h5 --output out.h5
expect 3 "fewer than the 4 ranks" 4 solve --input small.h5 --output out.h5
expect 3 "/X" 1 solve --input named.h5 --output out.h5
# Filters: gzip, shuffle and fletcher32 read as the plain file does (the same coefficients, bit for bit);
# another filter (lzf) is refused naming h5repack; a stored chunk that inflates to fewer or more bytes than
# a chunk holds (HDF5 1.10 would read heap memory past it into X), one whose filter mask skips deflate, and
# a fletcher32 checksum that does not match, are each exit 3 naming the dataset.
"$py" - <<'PY'
import h5py, numpy as np, zlib
rng = np.random.default_rng(3); X = rng.random((500, 7)) - 0.5; y = X @ np.arange(1.0, 8.0)
def w(name, **kw):
    with h5py.File(name, "w") as f:
        f.create_dataset("X", data=X, chunks=(64, 7), **kw); f.create_dataset("y", data=y, chunks=(64,), **kw)
for name, kw in [("fplain", {}), ("fgzip", dict(compression="gzip")), ("fshuf", dict(compression="gzip", shuffle=True)),
                 ("fall", dict(compression="gzip", shuffle=True, fletcher32=True)), ("ffl", dict(fletcher32=True)),
                 ("flzf", dict(compression="lzf")), ("fshort", dict(compression="gzip")),
                 ("flong", dict(compression="gzip")), ("fmask", dict(compression="gzip")), ("fbadsum", dict(fletcher32=True))]:
    w(name + ".h5", **kw)
def chunk(name, at, raw, mask=0):
    with h5py.File(name, "a") as f: f["X"].id.write_direct_chunk(at, raw, filter_mask=mask)
chunk("fshort.h5", (0, 0), zlib.compress(b"\1" * 48))
chunk("flong.h5", (64, 0), zlib.compress(b"\0" * (64 * 7 * 8 + 80)))
chunk("fmask.h5", (128, 0), b"\0" * 100, mask=1)
chunk("fbadsum.h5", (0, 0), X[:64].tobytes() + b"\0\0\0\0")
PY
"$dsolve" solve --input fplain.h5 --method cholesky --json >fplain.json 2>stderr.txt || bad "solve fplain.h5: $(cat stderr.txt)"
for f in fgzip fshuf fall ffl; do
    "$dsolve" solve --input $f.h5 --method cholesky --json >$f.json 2>stderr.txt || bad "solve $f.h5: $(cat stderr.txt)"
    "$py" -c "import json,sys; a, b = (json.load(open(n))['coef_digest'] for n in ('fplain.json', '$f.json')); sys.exit(a != b)" &&
        ok || bad "$f.h5 solved otherwise than the plain file"
done
expect 3 "flzf.h5: dataset /X: stored with HDF5 filter 32000 (lzf), which dsolve does not read.*h5repack" 1 solve \
    --input flzf.h5 --output out.h5
expect 3 "fshort.h5: dataset /X: .*the chunk at row 0 decodes to 48 bytes where a chunk holds 3584: damaged" 1 solve \
    --input fshort.h5 --output out.h5
expect 3 "flong.h5: dataset /X: .*the chunk at row 64 decodes to more than 3584 bytes" 2 solve --input flong.h5 \
    --output out.h5
expect 3 "fmask.h5: dataset /X: .*the chunk at row 128 decodes to 100 bytes" 1 solve --input fmask.h5 --output out.h5
expect 3 "fbadsum.h5: dataset /X: cannot read" 1 solve --input fbadsum.h5 --output out.h5

# Files that fuzzing made (tests/fuzz/corpus/h5_lsq/regress-*): a 1-D y whose chunks have rank 0 (HDF5 1.10
# took 23 GB and 100 s to read it), and an X whose chunk index lists 3 chunks where its shape holds 1 (HDF5
# read heap memory past a short inflated chunk into X; `predict`, which reads no y, printed predictions).
corpus=$(dirname "$(realpath "$0")")/fuzz/corpus/h5_lsq
expect 3 "/y: chunks of rank 0 for a dataset of rank 1" 1 solve --input "$corpus/regress-chunk_rank" --output out.h5
expect 3 "/X: its chunk index lists 3 chunks where its shape holds 1" 1 solve --input "$corpus/regress-chunk_count" \
    --output out.h5
expect 2 "unknown option" 2 solve --bogus
expect 2 "--batch" 1 solve --batch 0
expect 2 "--iters.*not an integer" 1 solve --iters ten
expect 2 "--precision" 1 solve --precision f16
expect 2 "unknown command" 1 frobnicate
expect 2 "--output" 1 solve --rows 100 --cols 5 --output /nonexistent-dir/out.h5
expect 2 "not with --input" 1 solve --input good.h5 --rows 10
expect 2 "gen needs" 1 gen --rows 10
expect 4 "diverged" 2 solve --rows 2000 --cols 64 --corr 0.5 --batch 32 --iters 60 --no-line-search --method residual --output out.h5

# A failure on one rank in any phase of a solve ends every rank with its message, never a hang.
for phase in setup sweep check; do
    for method in residual gram; do
        DSOLVE_INJECT_FAILURE=1:$phase expect 1 "injected failure in $phase on rank 1" 3 \
            solve --rows 3000 --cols 50 --batch 10 --method "$method" --tol 1e-14 --output out.h5
    done
done
DSOLVE_INJECT_FAILURE=2:sweep expect 1 "injected failure in sweep" 3 solve --rows 3000 --cols 50 --batch 10 --method residual --output out.h5

# A good solve writes /a with its attributes; the --json object carries the documented keys.
rm -f out.h5
"$mpiexec" -np 2 "$dsolve" solve --input named.h5 --x-dataset features --y-dataset target --iters 200 --output out.h5 --json --plot conv.svg >solve.json 2>stderr.txt
[ $? -eq 0 ] && ok || bad "solve on named.h5 failed: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "output file or JSON contract"
import h5py, json, numpy as np
j = json.loads(open("solve.json").read())
keys = "rows cols ranks backend devices batch sweeps stop_reason solve_seconds total_seconds rel_residual normal_residual gbps".split()
missing = [k for k in keys if k not in j]
assert not missing, missing
assert j["rows"] == 50 and j["cols"] == 4 and j["ranks"] == 2, j
assert j["rel_residual"] < 1e-10, j["rel_residual"]
with h5py.File("out.h5") as f:
    a = f["a"][...]
    assert np.allclose(a, [1, 2, 3, 4], rtol=0, atol=1e-9), a
    for k in ("sweeps", "residuals", "rel_residual", "normal_residual", "stop_reason", "options"):
        assert k in f["a"].attrs, k
import xml.etree.ElementTree as ET
svg = ET.parse("conv.svg").getroot()
lines = [e for e in svg.iter() if e.tag.endswith("polyline")]
drawn = [h for h in j["residual_history"] if h is not None and h > 0]  # a log axis skips the others
assert len(lines) == 1 and len(lines[0].get("points").split()) == len(drawn) >= 2, "plot"
PY

# gen writes the same file for any rank count, and solve recovers a_true from it.
"$mpiexec" -np 1 "$dsolve" gen --rows 1001 --cols 7 --seed 5 --corr 0.3 --output g1.h5 >/dev/null 2>&1 || bad "gen np 1"
"$mpiexec" -np 3 "$dsolve" gen --rows 1001 --cols 7 --seed 5 --corr 0.3 --output g3.h5 >/dev/null 2>&1 || bad "gen np 3"
"$mpiexec" -np 2 "$dsolve" gen --rows 300 --cols 6 --dtype f32 --output g32.h5 >/dev/null 2>&1 || bad "gen f32"
"$py" - <<'PY' && ok || bad "gen contents differ between rank counts, or are off"
import h5py, numpy as np
with h5py.File("g1.h5") as a, h5py.File("g3.h5") as b:
    for k in ("X", "y", "a_true"):
        assert np.array_equal(a[k][...], b[k][...]), k
    X, y, t = a["X"][...], a["y"][...], a["a_true"][...]
    assert X.shape == (1001, 7) and y.shape == (1001,) and t.shape == (7,)
    assert np.allclose(X @ t, y)
    c = np.corrcoef(X.T); off = c[~np.eye(7, dtype=bool)]
    assert abs(off.mean() - 0.3) < 0.08, off.mean()
with h5py.File("g32.h5") as f:
    assert f["X"].dtype == np.float32 and f["y"].dtype == np.float32
PY
"$mpiexec" -np 2 "$dsolve" solve --input g1.h5 --iters 100 --tol 1e-12 --json >g.json 2>/dev/null || bad "solve g1.h5"
"$py" -c "import json,sys; j=json.load(open('g.json')); sys.exit(0 if j['coef_error'] < 1e-8 and j['stop_reason'] in ('converged','stalled') else 1)" && ok || bad "solve of gen's file: $(cat g.json)"
"$mpiexec" -np 2 "$dsolve" solve --input g32.h5 --precision f32 --iters 300 --json >g32.json 2>/dev/null || bad "solve g32.h5"
"$py" -c "import json,sys; j=json.load(open('g32.json')); sys.exit(0 if j['rel_residual'] < 1e-6 else 1)" && ok || bad "f32 solve: $(cat g32.json)"

# --method cholesky: one direct step and its refinement, reported; a rank-deficient X (a duplicated
# column) is exit 4 with one line naming the column (0-based, as the input checks name rows and columns)
# and no output file; a zero column is no error (its coefficient is 0).
"$mpiexec" -np 2 "$dsolve" solve --method cholesky --rows 20000 --cols 200 --gram-precision low --json >chol.json 2>stderr.txt
[ $? -eq 0 ] && ok || bad "solve --method cholesky failed: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "cholesky --json: $(cat chol.json)"
import json
j = json.loads(open("chol.json").read())
assert j["method"] == "cholesky" and j["sweeps"] == 1 and j["stop_reason"] == "solved", j
assert j["rel_residual"] < 1e-12 and j["normal_residual"] < 1e-12 and j["coef_error"] < 1e-10, j
assert isinstance(j["refined"], bool) and 0 <= j["refine_seconds"] <= j["solve_seconds"], j
h = j["residual_history"]
assert len(h) == 2 and h[0] == 1 and h[1] == j["rel_residual"], h
# low: the CPU backend sums X'X in single precision and refines; a GPU sums it in FP16 and refines
want = "single" if j["backend"] == "cpu" else "fp16"
assert j["gram_precision"] == want and "gram_fallback" not in j, j
assert j["passes"] >= 2 + j["refine_steps"] and 1 <= j["refine_steps"] <= 8, j
PY
"$mpiexec" -np 2 "$dsolve" solve --method cholesky --rows 20000 --cols 200 --gram-precision double --json >chold.json 2>stderr.txt
[ $? -eq 0 ] && ok || bad "solve --method cholesky --gram-precision double failed: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "cholesky --gram-precision double: $(cat chold.json)"
import json
s, d = json.load(open("chol.json")), json.load(open("chold.json"))
assert d["gram_precision"] == "double" and d["refine_steps"] <= 1 and d["passes"] == 3, d
assert d["rel_residual"] < 1e-12 and abs(d["coef_error"] - s["coef_error"]) < 1e-13, (s, d)
PY
"$dsolve" solve --backend cpu --method cholesky --rows 5000 --cols 50 | grep -q "X'X in single precision, [1-8] refinement steps\? in double" && ok ||
    bad "cholesky's summary does not say how X'X was formed"
"$py" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(2)
def write(name, X, a):
    with h5py.File(name, "w") as f:
        f["X"] = X; f["y"] = X @ a
X = rng.random((2000, 30)) - 0.5; X[:, 21] = X[:, 7]; write("dup.h5", X, rng.random(30))
X = rng.random((50, 4)) - 0.5; X[:, 3] = X[:, 1]; write("dup4.h5", X, np.arange(1.0, 5.0))
X = rng.random((50, 4)) - 0.5; X[:, 2] = X[:, 0]; write("dup0.h5", X, np.arange(1.0, 5.0))
X = rng.random((500, 6)) - 0.5; X[:, 4] = 0; write("zero.h5", X, np.arange(1.0, 7.0))
PY
expect 4 "column 21[^0-9]" 2 solve --input dup.h5 --method cholesky --output out.h5
expect 4 "column 3[^0-9]" 1 solve --input dup4.h5 --method cholesky --output out.h5
expect 4 "column 2[^0-9]" 3 solve --input dup0.h5 --method cholesky --output out.h5
"$mpiexec" -np 2 "$dsolve" solve --input zero.h5 --method cholesky --gram-precision low --output out.h5 --json >zero.json 2>stderr.txt
[ $? -eq 0 ] && ok || bad "cholesky with a zero column failed: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "cholesky with a zero column: $(cat zero.json)"
import h5py, json, numpy as np
j = json.loads(open("zero.json").read())
assert j["zero_columns"] == 1 and j["rel_residual"] < 1e-12, j
# a zero column is one single precision cannot tell from an underflowed one: X'X again in double
assert j["gram_precision"] == "double" and j["gram_fallback"].startswith("column 4 of X"), j
with h5py.File("out.h5") as f:
    a = f["a"][...]
assert a[4] == 0 and np.allclose(a, [1, 2, 3, 4, 0, 6], rtol=0, atol=1e-10), a
PY

# --help comes from the option table; --version names the libraries.
"$dsolve" solve --help | grep -q -- "--no-line-search" && ok || bad "solve --help"
"$dsolve" --version | grep -q "HDF5" && ok || bad "--version"

finish test_cli
