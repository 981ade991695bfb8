#!/usr/bin/env bash
# test_stream_cli.sh DSOLVE MPIEXEC [cpu|gpu]: `dsolve solve` from an HDF5 input larger than the memory
# cap (docs/solve.md, "Inputs larger than memory"). A file of 500 000 x 100 f64 (400 MB) is solved in
# memory and streamed (cpu: --host-memory 64M; gpu: --device-memory 64M with --host-memory 192M, one GPU
# per rank, exit 77 without; and on a GPU, X kept in pinned host memory, from the file and built in, and
# with pinned memory short on purpose, DSOLVE_PINNED_LIMIT: X in pageable memory, packed into pinned
# staging buffers or, without them, copied straight; a file source with no room for its staging buffers
# is exit 1 naming the size) with --method gram, cholesky, qr and residual on 1 and 3 ranks: the coefficients agree to 1e-12 relative,
# JSON says streamed (chunk_rows, bytes_moved: every pass reads X and y; the residual route's, a pass a
# block, whole rows from the file, the two blocks' columns from host memory), auto and the default method
# stream by the Gram route; the caps' usage errors exit 2 naming what is wrong; a file changed or cut
# short while it streams is exit 3, also inside the residual route's sweeps, where a failing pass ends every
# rank together without MPI_Abort. Needs python3 with numpy and h5py.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
mode=${3:-cpu}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_cmd=(solve)
if [ "$mode" = gpu ]; then
    cli_backend=cuda
    # The host cap below the file's 400 MB streams from the file; without it, from host memory.
    cap=(--device-memory 64M --host-memory 192M)
    nps="1"
    "$mpiexec" -np 1 "$dsolve" info --json >info.txt 2>/dev/null
    "$py" -c "import json,sys; j=json.load(open('info.txt')); sys.exit(0 if all(r['device'] >= 0 for r in j['rank_info']) else 77)" ||
        { echo "test_stream_cli gpu: no GPU: skipped"; exit 77; }
else
    cli_backend=cpu
    cap=(--host-memory 64M)
    nps="1 3"
fi

cli_cmd=(gen)
be=$cli_backend
cli_backend=
run 1 --rows 500000 --cols 100 --seed 7 --noise 0.01 --output big.h5
[ "$rc" -eq 0 ] && ok || bad "gen: exit $rc: $(cat err.txt)"
run 1 --rows 2 --cols 70000 --seed 7 --output wide.h5  # X'X 39 GB: the Gram route cannot stream it
[ "$rc" -eq 0 ] && ok || bad "gen wide: exit $rc: $(cat err.txt)"
cli_cmd=(solve)
cli_backend=$be

# same NAME [PASSES]: /a of mem.h5 and str.h5 within 1e-12 relative; JSON of the streamed run in str.json;
# bytes_moved is a whole number of passes over X and y, or with PASSES (a Python expression) exactly that many.
same() {
    "$py" - "$@" <<'PY' && ok || bad "$1: $(cat err.txt | head -3)"
import h5py, json, sys, numpy as np
a = h5py.File("mem.h5")["a"][:]; b = h5py.File("str.h5")["a"][:]
m = json.load(open("mem.json")); s = json.load(open("str.json"))
err = np.max(np.abs(a - b)) / np.max(np.abs(a))
xy = 500000 * (100 * 8 + 8)
assert err <= 1e-12, f"coefficients differ by {err:.3g}"
assert m["streamed"] is False and s["streamed"] is True, (m["streamed"], s["streamed"])
assert 8 <= s["chunk_rows"] < 500000, s["chunk_rows"]
passes = s["bytes_moved"] / xy
want = eval(sys.argv[2]) if len(sys.argv) > 2 else round(passes)
assert passes >= 2 and abs(passes - want) < 1e-9, f"bytes_moved {s['bytes_moved']}: {passes} passes, not {want}"
assert s["stream_rate_gbps"] > 0 and m["stream_rate_gbps"] is None
assert abs(s["rel_residual"] - m["rel_residual"]) <= 1e-9 * m["rel_residual"], (s["rel_residual"], m["rel_residual"])
print(f"{sys.argv[1]}: relative difference {err:.2e}, chunk {s['chunk_rows']} rows, {passes:.0f} passes, "
      f"{s['stream_rate_gbps']:.2f} GB/s; solve {m['solve_seconds']:.3f} s in memory, {s['solve_seconds']:.3f} s streamed")
PY
}

# pair NP NAME CAPS ARGS...: ARGS on NP ranks in memory (mem.h5, mem.json) and under CAPS (options, one
# word each; str.h5, str.json), each exit 0.
pair() {
    local np=$1 name=$2 caps
    read -ra caps <<<"$3"
    shift 3
    rm -f mem.h5 str.h5
    run "$np" "$@" --json --output mem.h5
    cp out.txt mem.json
    [ "$rc" -eq 0 ] || bad "$name in memory: exit $rc: $(cat err.txt)"
    run "$np" "$@" --json --output str.h5 "${caps[@]}"
    cp out.txt str.json
    [ "$rc" -eq 0 ] || bad "$name streamed: exit $rc: $(cat err.txt)"
}

for np in $nps; do
    for method in gram cholesky qr; do
        pair "$np" "$method np $np" "${cap[*]}" --input big.h5 --method "$method"
        same "$mode $method np $np"
    done
    # The residual route, asked for: 4 blocks (30, 30, 30, 10 columns; block 0's pass reads blocks 3 and 0),
    # 5 sweeps. Its sums meet the chunks' boundaries, which the in-memory run does not have, so they agree
    # to rounding (1e-12 relative, as the Gram route's), not bit for bit. From the file, each block's pass
    # reads whole rows: the setup, 4 a sweep, the test after the last sweep (block 0's pass), the certificate.
    res=(--input big.h5 --method residual --batch 30 --iters 5)
    pair "$np" "residual np $np" "${cap[*]}" "${res[@]}"
    same "$mode residual np $np" 1+4*5+1+1
    grep -q '"stream_note":"the residual route reads X 4 times a sweep' str.json && ok || bad "residual note: $(cat str.json)"
done

# auto streams by cholesky (X is well conditioned) and says so; the default method by the Gram route,
# with a summary line.
run 1 --input big.h5 --method auto --json "${cap[@]}"
"$py" -c "import json; j=json.load(open('out.txt')); assert j['method'] == 'cholesky' and j['streamed'] and 'streamed' in j['method_reason'], j" &&
    ok || bad "auto streamed: $(cat out.txt err.txt)"
# An ill-conditioned X (two columns equal to 1e-7): auto's Cholesky attempt fails and it streams by qr.
"$py" -c "
import h5py, numpy as np
r = np.random.default_rng(3); X = r.random((50000, 40)) - 0.5; X[:, 1] = X[:, 0] + 1e-7 * (r.random(50000) - 0.5)
h5py.File('ill.h5', 'w').update({'X': X, 'y': X @ (r.random(40) - 0.5)})"
run "${nps##* }" --input ill.h5 --method auto --json "${cap[0]}" 4M
"$py" -c "
import json; j = json.load(open('out.txt'))
assert j['method'] == 'qr' and j['streamed'] and j['method_reason'].startswith('X streamed:'), j
assert j['rel_residual'] < 1e-12 and j['bytes_moved'] == 3 * 50000 * 41 * 8, j" && ok || bad "auto to qr streamed: $(cat out.txt err.txt)"
run 1 --input big.h5 --quiet "${cap[@]}"
grep -q "method gram" out.txt && grep -q "^  streamed:.*chunks of" out.txt && [ ! -s err.txt ] &&
    ok || bad "default method streamed: $(cat out.txt err.txt)"

# On a device: X kept in pinned host memory when it fits the host cap but not the device's, the file's
# and the built-in problem's; the chunks cross the bus, the file is read once.
if [ "$mode" = gpu ]; then
    for input in "--input big.h5" "--rows 500000 --cols 100 --seed 7 --noise 0.01"; do
        read -ra in <<<"$input"
        pair 1 "${in[0]} from host memory" "--device-memory 64M" "${in[@]}" --method gram
        same "gpu gram from host memory, ${in[0]}"
        "$py" -c "import json; j=json.load(open('str.json')); assert j['stream_source'] == 'host memory', j['stream_source']" &&
            ok || bad "${in[0]} from host memory: stream_source $(cat str.json)"
    done
    # The residual route from host memory moves just the two blocks' columns (and y) of each pass, in
    # 8-byte values a row: the setup and certificate 101; sweep 0's passes 31, 61, 61 and 41; later
    # sweeps' block 0 (columns 90..99 and 0..29) 41; the last test 41.
    pair 1 "residual from host memory" "--device-memory 64M" "${res[@]}"
    same "gpu residual from host memory" "(2*101 + 31+61+61+41 + 4*(41+61+61+41) + 41) / 101"
    grep -q '"stream_note":"the residual route moves X about twice a sweep' str.json && ok ||
        bad "residual from host memory: note: $(cat str.json)"

    # Pinned memory short (DSOLVE_PINNED_LIMIT: a pinned allocation above it fails as a short cudaHostAlloc
    # does). Under 64M, X (400 MB) is kept in pageable memory and each chunk, whole rows or the residual
    # route's two blocks' columns, is packed into pinned staging buffers of a chunk each (below 64M) before
    # it crosses the bus: the same coefficients and bytes moved, a line saying X is pageable. Under 4K not
    # even those (8 rows are 6464 bytes): halved down to 8 rows, then copied straight from pageable memory,
    # with a line saying so.
    pageable() {
        grep -q "(DSOLVE_PINNED_LIMIT); X kept in pageable host memory instead" err.txt &&
            "$py" -c "import json; j=json.load(open('str.json')); assert j['stream_source'] == 'host memory', j" &&
            ok || bad "$1: $(cat err.txt str.json | head -20)"
    }
    DSOLVE_PINNED_LIMIT=64M pair 1 "gram, pageable X" "--device-memory 64M" --input big.h5 --method gram
    same "gpu gram from pageable host memory"
    pageable "gram from pageable host memory"
    ! grep -q "copied straight from pageable" err.txt && ok || bad "gram, pageable X: no staging: $(cat err.txt)"
    DSOLVE_PINNED_LIMIT=64M pair 1 "residual, pageable X" "--device-memory 64M" "${res[@]}"
    same "gpu residual from pageable host memory" "(2*101 + 31+61+61+41 + 4*(41+61+61+41) + 41) / 101"
    pageable "residual from pageable host memory"
    ! grep -q "copied straight from pageable" err.txt && ok || bad "residual, pageable X: no staging: $(cat err.txt)"
    DSOLVE_PINNED_LIMIT=4K pair 1 "gram, pageable X, no staging" "--device-memory 64M" --input big.h5 --method gram
    same "gpu gram from pageable host memory without staging"
    pageable "gram from pageable host memory without staging"
    grep -q "allocating 6464 bytes.*DSOLVE_PINNED_LIMIT.*copied straight from pageable memory" err.txt && ok ||
        bad "gram, pageable X, no staging: $(cat err.txt)"

    # Streamed from the file with not even two chunks of 8 rows pinned: the chunks halved down to 8 rows
    # (a line each), then exit 1 naming the size, no output; a limit that is not a size is exit 2.
    DSOLVE_PINNED_LIMIT=4K expect 1 "out of pinned host memory allocating 6464 bytes on rank 0 (DSOLVE_PINNED_LIMIT)" \
        1 --input big.h5 --method gram --output out.h5 "${cap[@]}"
    grep -q "trying chunks of 8 rows" err.txt && ok || bad "pinned limit 4K: no halving down to 8 rows: $(cat err.txt)"
    DSOLVE_PINNED_LIMIT=lots expect 2 "DSOLVE_PINNED_LIMIT must be a size" 1 --input big.h5 --output out.h5 "${cap[@]}"
fi

# The caps' usage errors.
expect 2 "working minimum" 1 --input big.h5 --method gram --output out.h5 "${cap[0]}" 1K
expect 2 "not a size" 1 --input big.h5 "${cap[0]}" 64X
expect 2 "not a size" 1 --input big.h5 --host-memory=-5G
expect 2 "residual streams without the coarse correction only" 1 --input big.h5 --method residual --batch 30 \
    --block-solve "${cap[@]}"
expect 2 "only --input files stream" 1 --rows 250000 --cols 100 "${cap[@]}"
expect 2 "with the solve's work (.* GB) exceeds .* GB, and X'X (39.2 GB) is too large for the Gram route" 1 \
    --input wide.h5 --method gram "${cap[@]}"

# A file that changes while it streams: touched every 0.2 s (the same bytes, a new modification time), or
# cut short half a second in (before the run reads it, the probe finds it damaged): exit 3 naming the
# file, no output left, never an answer from rows of two different files.
cp big.h5 moving.h5
(while :; do sleep 0.2; touch moving.h5; done) &
toucher=$!
expect 3 "moving.h5: dataset X: the file changed while" "${nps##* }" --input moving.h5 --method cholesky --output out.h5 "${cap[@]}"
# Inside the residual route's sweeps (the setup's pass is 1 of 24): every rank ends, exit 3.
expect 3 "moving.h5: dataset X: the file changed while" "${nps##* }" --input moving.h5 --method residual --batch 30 \
    --iters 5 --output out.h5 "${cap[@]}"
kill "$toucher" && wait "$toucher" 2>/dev/null
# A pass that fails on one rank in the middle of the streamed residual route's sweeps (injected in sweep 1's
# last block, on the last rank): the ranks agree after each streamed pass, so they end together with the
# one line, not by MPI_Abort.
last=$((${nps##* } - 1))
DSOLVE_INJECT_FAILURE=$last:sweep expect 1 "injected failure in sweep on rank $last" "${nps##* }" --input big.h5 \
    --method residual --batch 30 --iters 5 --output out.h5 "${cap[@]}"
grep -qi "mpi_abort" err.txt && bad "streamed residual route, failure in a sweep: MPI_Abort: $(cat err.txt)" || ok
cp big.h5 moving.h5
(sleep 0.5; truncate -s 200M moving.h5) &
expect 3 "moving.h5.*\(changed\|damaged\|truncated\)" 1 --input moving.h5 --method gram --output out.h5 "${cap[@]}"
wait
rm -f moving.h5

finish "test_stream_cli $mode"
