#!/usr/bin/env bash
# test_stream_logreg.sh DSOLVE MPIEXEC [cpu|gpu]: `dsolve logreg` on an HDF5 labelled set larger than the
# memory cap (docs/logreg.md, "Sets larger than memory"). A training set of 128 000 x 784 f32 (400 MB)
# and a test set of 10 000 rows are trained on in memory and streamed (cpu: --host-memory 64M on 1 and 3
# ranks; gpu: --device-memory 64M with --host-memory 192M, from the file, and without the host cap, from
# pinned host memory, f32 and f64, one GPU, exit 77 without): the weights are the same bits
# (weights_digest), JSON says streamed with chunk_rows and bytes_moved equal to the passes' bytes; a
# checkpoint written by a streamed run resumes in memory to the same bits; a cap below the working
# minimum is exit 2 naming it, and so is an IDX set larger than the host cap on the CPU; a NaN met in a
# chunk, and the file truncated while it streams, are exit 3 naming file and dataset, with no plot left.
# Needs python3 with numpy and h5py.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
mode=${3:-cpu}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_cmd=(logreg)
if [ "$mode" = gpu ]; then
    cli_backend=cuda
    cli_gpus_or_skip "test_stream_logreg gpu" 1
    caps=("--device-memory 64M --host-memory 192M" "--device-memory 64M")
    nps="1"
    precisions="f32 f64"
else
    cli_backend=cpu
    caps=("--host-memory 64M")
    nps="1 3"
    precisions="f32"
fi

"$py" - <<'PY' || { echo "could not write the sets"; exit 1; }
import numpy as np, h5py
rng = np.random.default_rng(5)
W = np.random.default_rng(1).standard_normal((784, 10)).astype(np.float32)
def make(path, n, nan_row=None):
    with h5py.File(path, "w") as f:
        X = f.create_dataset("X", (n, 784), dtype="f4")
        L = f.create_dataset("labels", (n,), dtype="i4")
        for a in range(0, n, 16384):
            x = rng.random((min(16384, n - a), 784), dtype=np.float32)
            if nan_row is not None and a <= nan_row < a + len(x):
                x[nan_row - a, 3] = np.nan
            X[a:a + len(x)] = x
            L[a:a + len(x)] = np.argmax((x - 0.5) @ W, axis=1)
make("big.h5", 128000)
make("test.h5", 10000)
make("nan.h5", 20000, nan_row=15000)
PY
train=(--input big.h5 --test test.h5 --optimizer gd --iters 2 --json)

# same NAME: str.json has mem.json's weights, streamed, with bytes_moved the passes' bytes.
same() {
    "$py" - "$@" <<'PY' && ok || bad "$1"
import json, sys
name, prec = sys.argv[1], sys.argv[2]
m = json.load(open("mem.json")); s = json.load(open("str.json"))
row = 785 * (4 if prec == "f32" else 8) + 8
assert s["weights_digest"] == m["weights_digest"], (s["weights_digest"], m["weights_digest"])
assert m["streamed"] is False and s["streamed"] is True, (m["streamed"], s["streamed"])
rb = 1024
assert s["chunk_rows"] % rb == 0 and rb <= s["chunk_rows"] < 128000, s["chunk_rows"]
# gd: the column maxima, iters + 1 evaluations, the final one; the test set: its maxima and one pass.
# Only the rows not kept resident in backend memory are read again by each pass.
want = (s["stream_passes"] * (128000 - s["resident_rows"]) +
        (2 * (10000 - s["test_resident_rows"]) if s["test_streamed"] else 0)) * row
assert s["stream_passes"] == s["iterations"] + 3, s["stream_passes"]
assert s["bytes_moved"] == want, (s["bytes_moved"], want)
assert s["stream_rate_gbps"] > 0 and m["stream_rate_gbps"] is None
print(f"{name}: weights {s['weights_digest']} as in memory, chunk {s['chunk_rows']} rows, {s['stream_passes']} passes, "
      f"{s['stream_source']}, {s['stream_rate_gbps']:.2f} GB/s; training {m['seconds']:.3f} s in memory, {s['seconds']:.3f} s streamed")
PY
}

for prec in $precisions; do
    run 1 "${train[@]}" --precision "$prec"
    cp out.txt mem.json
    [ "$rc" -eq 0 ] || bad "$prec in memory: exit $rc: $(cat err.txt)"
    for np in $nps; do
        for cap in "${caps[@]}"; do
            read -ra c <<<"$cap"
            run "$np" "${train[@]}" --precision "$prec" "${c[@]}"
            cp out.txt str.json
            [ "$rc" -eq 0 ] || bad "$prec np $np $cap: exit $rc: $(cat err.txt)"
            same "$mode $prec np $np $cap" "$prec"
        done
    done
done
if [ "$mode" = gpu ]; then
    "$py" -c "import json; j=json.load(open('str.json')); assert j['stream_source'] == 'host memory', j['stream_source']" &&
        ok || bad "gpu without a host cap: stream_source $(cat str.json)"
fi

# A checkpoint of a streamed run (the state only: weights and optimiser) resumes in memory to the
# in-memory bits; the streamed run's summary says it streamed, and --quiet silences stderr.
read -ra c <<<"${caps[0]}"
train=(--input big.h5 --test test.h5 --optimizer gd --iters 2 --precision "$prec")  # mem.json's
run 1 "${train[@]}" "${c[@]}" --checkpoint ck.h5 --checkpoint-every 0 --quiet
grep -q "^  streamed:.*chunks of" out.txt && [ ! -s err.txt ] && ok || bad "summary: $(cat out.txt err.txt)"
run 1 "${train[@]}" --restart ck.h5 --json
"$py" -c "import json; assert json.load(open('out.txt'))['weights_digest'] == json.load(open('mem.json'))['weights_digest']" &&
    ok || bad "restart from a streamed run's checkpoint: $(cat err.txt)"

expect 2 "working minimum" 1 --input big.h5 --iters 1 "${c[0]}" 1M
expect 3 "nan.h5: dataset /X.*row 15000" 1 --input nan.h5 --iters 1 "${c[0]}" 48M --plot out.h5
if [ "$mode" = cpu ] && [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    expect 2 "convert it to HDF5" 1 --iters 1 --host-memory 100M
fi

# Truncated while it streams: exit 3 naming the file and the dataset, no plot written.
rm -f out.svg
DSOLVE_PROGRESS_SECONDS=0 timeout 300 "$mpiexec" -np 1 "$dsolve" logreg --backend "$cli_backend" --input big.h5 \
    --optimizer gd --iters 1000 "${c[@]}" --plot out.svg >out.txt 2>err.txt &
job=$!
cli_wait_streaming err.txt
"$py" -c "import os; os.truncate('big.h5', 200 << 20)"
wait "$job"
rc=$?
[ "$rc" -eq 3 ] && grep -q "^dsolve: big.h5: .*dataset /\?X" err.txt && [ ! -e out.svg ] &&
    ok || bad "truncated while streaming: exit $rc: $(cat err.txt)"

finish "test_stream_logreg $mode"
