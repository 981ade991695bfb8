#!/usr/bin/env bash
# test_stream_ann.sh DSOLVE MPIEXEC [cpu|gpu]: `dsolve ann` and `dsolve predict` from an HDF5 input larger
# than the memory cap (docs/ann.md, "Inputs larger than memory"). A file of 1 200 000 x 40 f64 (394 MB,
# `dsolve gen --kind ann`) is trained on and predicted in memory and streamed (cpu: --host-memory 64M on 1
# and 3 ranks; gpu: --device-memory 64M with --host-memory 192M, from the file, and without the host cap,
# from pinned host memory, one GPU, exit 77 without). The output Gram is summed exactly over fixed row
# blocks (src/ann/ann_gram.h), so the model (weights_digest) is bitwise the same in memory and streamed,
# and on 1 and 3 ranks; /yhat and the metrics within 1e-12 relative (BLAS may order a row's sums by the
# chunk's shape). JSON says streamed, with chunk_rows and bytes_moved a whole number of passes over X and
# y. A cap below the working minimum is exit 2 naming it; a file truncated or touched while it streams is
# exit 3 naming the file and dataset, with no output left. Needs python3 with numpy and h5py.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
mode=${3:-cpu}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
rows=1200000
cols=40
net=(--neurons 10 --subset 1000 --memory-mb 4)
if [ "$mode" = gpu ]; then
    cli_gpus_or_skip test_stream_ann 1
    cli_backend=cuda
    caps=("--device-memory 64M --host-memory 192M" "--device-memory 64M")
    nps="1"
else
    cli_backend=cpu
    caps=("--host-memory 64M")
    nps="1 3"
fi

cli_cmd=(gen)
be=$cli_backend
cli_backend=
run 1 --kind ann --rows $rows --cols $cols --seed 7 --output big.h5
[ "$rc" -eq 0 ] && ok || bad "gen: exit $rc: $(cat err.txt)"
cli_backend=$be

# same WHAT MODE: the in-memory (mem.*) and streamed (str.*) runs agree; MODE ann or predict.
same() {
    "$py" - "$1" "$2" "$mode" "$rows" "$cols" <<'PY' && ok || bad "$1"
import h5py, json, sys, numpy as np
what, kind, mode, rows, cols = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
m = json.load(open("mem.json")); s = json.load(open("str.json"))
def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-300))
if kind == "ann":
    fm, fs = h5py.File("mem.h5"), h5py.File("str.h5")
    err = max(rel(fm["W"][:], fs["W"][:]), rel(fm["V"][:], fs["V"][:]))
    keys = ["train_r", "train_rmse", "train_r2"]
    assert s["weights_digest"] == m["weights_digest"], (m["weights_digest"], s["weights_digest"])
else:
    err = rel(h5py.File("mem.h5")["yhat"][:], h5py.File("str.h5")["yhat"][:])
    keys = ["r", "rmse", "r2"]
# Training: the Gram's exact sums make the model bitwise. Prediction's chunks are the cap's, and BLAS may
# order a row's sums by the chunk's shape.
tol = 0 if kind == "ann" else 1e-12
assert err <= tol, f"{kind}: differs by {err:.3g} relative (tolerance {tol})"
for k in keys:
    assert abs(s[k] - m[k]) <= max(tol, 1e-9) * abs(m[k]), (k, m[k], s[k])
assert m["streamed"] is False and s["streamed"] is True, (m["streamed"], s["streamed"])
assert 8 <= s["chunk_rows"] < rows, s["chunk_rows"]
passes = s["bytes_moved"] / (rows * (cols * 8 + 8))
assert abs(passes - round(passes)) < 1e-9 and passes >= (4 if kind == "ann" else 2), f"{passes} passes"
assert s["stream_rate_gbps"] > 0 and m["stream_rate_gbps"] is None
t = "seconds"
print(f"{what}: relative difference {err:.2e}, chunk {s['chunk_rows']} rows, {passes:.0f} passes at "
      f"{s['stream_rate_gbps']:.2f} GB/s; {m[t]:.3f} s in memory, {s[t]:.3f} s streamed")
PY
}

for np in $nps; do
    for cap in "${caps[@]}"; do
        read -ra c <<<"$cap"
        cli_cmd=(ann)
        rm -f mem.h5 str.h5
        run "$np" --input big.h5 "${net[@]}" --json --output mem.h5
        cp out.txt mem.json
        [ "$rc" -eq 0 ] || bad "ann np $np in memory: exit $rc: $(cat err.txt)"
        run "$np" --input big.h5 "${net[@]}" --json --output str.h5 "${c[@]}"
        cp out.txt str.json
        [ "$rc" -eq 0 ] || bad "ann np $np $cap: exit $rc: $(cat err.txt)"
        same "$mode ann np $np $cap" ann
        "$py" -c "import json; print(json.load(open('mem.json'))['weights_digest'])" >>digests.txt
        cp mem.h5 model.h5
        cli_cmd=(predict)
        rm -f mem.h5 str.h5
        run "$np" --model model.h5 --input big.h5 --json --output mem.h5
        cp out.txt mem.json
        [ "$rc" -eq 0 ] || bad "predict np $np in memory: exit $rc: $(cat err.txt)"
        run "$np" --model model.h5 --input big.h5 --json --output str.h5 "${c[@]}"
        cp out.txt str.json
        [ "$rc" -eq 0 ] || bad "predict np $np $cap: exit $rc: $(cat err.txt)"
        same "$mode predict np $np $cap" predict
    done
done
# The model on every rank count and cap, in memory and streamed: one digest.
[ "$(sort -u digests.txt | wc -l)" -eq 1 ] && ok || bad "ann: the model differs between rank counts: $(sort -u digests.txt | tr '\n' ' ')"

# Classes: labels streamed with X (a 19 MB labelled file under an 8M cap), the same model and classes.
"$py" -c "
import h5py, numpy as np
X = np.random.default_rng(1).uniform(-.5, .5, (300000, 8))
with h5py.File('cls.h5', 'w') as f: f['X'] = X; f['labels'] = np.floor((np.sin(X.sum(1)) + 1) * 1.5).clip(0, 2).astype(np.int32)"
small=(--device-memory 8M --host-memory 8M)
[ "$mode" = gpu ] || small=(--host-memory 8M)
cls=(--input cls.h5 --classes 3 --neurons 30 --memory-mb 2 --json)
cli_cmd=(ann)
run 1 "${cls[@]}" --output cm.h5
cp out.txt mem.json
run 1 "${cls[@]}" "${small[@]}"
"$py" -c "
import json; m = json.load(open('mem.json')); s = json.load(open('out.txt'))
assert s['streamed'] and not m['streamed'], (m['streamed'], s['streamed'])
assert abs(s['train_accuracy'] - m['train_accuracy']) <= 1e-12 and s['weights_digest'] == m['weights_digest'], (m, s)" &&
    ok || bad "classes streamed: $(cat out.txt err.txt)"
cli_cmd=(predict)
run 1 --model cm.h5 --input cls.h5 --output mem.h5
run 1 --model cm.h5 --input cls.h5 --output str.h5 --json "${small[@]}"
"$py" -c "
import h5py, numpy as np; a, b = h5py.File('mem.h5'), h5py.File('str.h5')
assert (a['class'][:] == b['class'][:]).all() and np.abs(a['yhat'][:] - b['yhat'][:]).max() <= 1e-12" &&
    grep -q '"streamed":true' out.txt && ok || bad "classes predict streamed: $(cat out.txt err.txt)"

read -ra c <<<"${caps[0]}"
if [ "$mode" = gpu ]; then
    grep -q '"stream_source":"host memory"' str.json && ok || bad "without a host cap: not from host memory: $(cat str.json)"
fi

# The summary says so, and the caps' usage errors.
cli_cmd=(predict)
run 1 --model model.h5 --input big.h5 --quiet "${c[@]}"
grep -q "^  streamed:.*chunks of" out.txt && [ ! -s err.txt ] && ok || bad "predict summary: $(cat out.txt err.txt)"
cli_cmd=(ann)
expect 2 "working minimum of" 1 --input big.h5 "${net[@]}" --output out.h5 "${c[0]}" 1M
expect 2 "checkpoint.*not stream yet" 1 --input big.h5 "${net[@]}" --checkpoint ck.h5 "${c[@]}"
cli_cmd=(predict)
expect 2 "working minimum of" 1 --model model.h5 --input big.h5 --output out.h5 "${c[0]}" 1K

# A file truncated while it streams: exit 3 naming the file and dataset (the read that fails, or the check
# that the file is the one opened), no output left.
for cmd in ann predict; do
    cp big.h5 cut.h5
    rm -f out.h5 out.h5.part*
    if [ $cmd = ann ]; then args=(ann --input cut.h5 "${net[@]}"); else args=(predict --model model.h5 --input cut.h5); fi
    DSOLVE_PROGRESS_SECONDS=0 "$mpiexec" -np 1 "$dsolve" "${args[@]}" --backend "$cli_backend" --output out.h5 "${c[@]}" \
        >out.txt 2>err.txt &
    job=$!
    cli_wait_streaming err.txt
    truncate -s 150M cut.h5
    wait $job
    rc=$?
    msg=$(grep '^dsolve:' err.txt | head -1)
    if [ "$rc" -eq 3 ] && grep -q "cut.h5" <<<"$msg" && grep -q "/X\|/y\|dataset X: the file changed" <<<"$msg" && [ ! -e out.h5 ] &&
        ! compgen -G "out.h5.part*" >/dev/null; then ok
    else bad "$cmd on a truncated file: exit $rc, '$msg', $(ls out.h5* 2>/dev/null)"; fi
done

# A file touched while it streams (the same bytes, a new modification time): exit 3, the file changed.
cp big.h5 moving.h5
(while :; do sleep 0.2; touch moving.h5; done) &
toucher=$!
cli_cmd=(ann)
expect 3 "moving.h5: dataset X: the file changed while" 1 --input moving.h5 "${net[@]}" --output out.h5 "${c[@]}"
kill "$toucher" && wait "$toucher" 2>/dev/null
rm -f moving.h5

finish "test_stream_ann $mode"
