#!/usr/bin/env bash
# test_stream_sort_cli.sh DSOLVE MPIEXEC [cpu|gpu]: `dsolve sort` of keys beyond the memory caps
# (docs/sort.md, "Keys beyond memory"). cpu: a 400 MB file of 10^8 int32 keys sorted in memory and
# streamed under --host-memory 64M on 1 and 3 ranks: the same output file, verified, the JSON says
# streamed (chunk_keys, bytes_moved: four crossings); small files of several types and orders (floats
# with NaN, -0.0, inf; few unique; descending) under a tiny cap on 3 ranks, and ranks with different
# numbers of runs, against the in-memory run; a cap below the working minimum and --argsort exit 2; an
# input truncated while it streams exits 3 naming file and dataset and leaves no output. gpu (one GPU, exit 77 without):
# --device-memory 64M with keys from --gen and from the file against the in-memory GPU run (and on two
# ranks where there are two GPUs).
# Needs python3 with numpy and h5py.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
mode=${3:-cpu}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_cmd=(sort)
cli_timeout=200
if [ "$mode" = gpu ]; then
    cli_gpus_or_skip "test_stream_sort_cli gpu" 1
    cli_backend=cuda
    cap=(--device-memory 64M)
    nps="1"
    # Two ranks too where there are two GPUs (the pieces then travel between ranks by MPI).
    "$mpiexec" -np 2 "$dsolve" info --json >info.txt 2>/dev/null &&
        "$py" -c "import json,sys; j=json.load(open('info.txt')); sys.exit(0 if all(r['device'] >= 0 for r in j['rank_info']) and len({r['device'] for r in j['rank_info']}) == 2 else 1)" 2>/dev/null &&
        nps="1 2"
else
    cli_backend=cpu
    cap=(--host-memory 64M)
    nps="1 3"
fi

"$py" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(5)
with h5py.File("big.h5", "w") as h:
    h["keys"] = rng.integers(-2**31, 2**31, 100_000_000, dtype=np.int32)
f = rng.standard_normal(300_000)
f[::7] = np.nan; f[1::11] = -0.0; f[2::13] = 0.0; f[3::17] = np.inf; f[4::19] = -np.inf
with h5py.File("small.h5", "w") as h:
    h["f64"] = f; h["f32"] = f.astype(np.float32)
    h["few"] = rng.integers(0, 16, 300_000).astype(np.uint64) << np.uint64(60)
    h["desc"] = np.arange(300_000, 0, -1, dtype=np.int64)
PY

# digest FILE DATASET: the dataset's type and a SHA-1 of its bytes.
digest() {
    "$py" -c "import sys, h5py, hashlib; a = h5py.File(sys.argv[1])[sys.argv[2]][...]; print(a.dtype, hashlib.sha1(a.tobytes()).hexdigest())" "$1" "$2"
}

# streamed_json FILE N W: the JSON of a streamed run over N keys of W bytes.
streamed_json() {
    "$py" - "$@" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); n, w = int(sys.argv[2]), int(sys.argv[3])
assert j["streamed"] is True and j["path"] == "streamed" and j["verified"] is True, j
assert 0 < j["chunk_keys"] < n and j["runs"] >= n // j["chunk_keys"], j
assert j["bytes_moved"] == 4 * n * w and j["stream_rate_gbps"] > 0, j
print(f"streamed {n} keys on {j['ranks']} ranks: {j['runs']} runs of {j['chunk_keys']}, sort {j['seconds']:.2f} s, "
      f"{j['stream_rate_gbps']:.2f} GB/s, with I/O {j['total_seconds']:.2f} s")
PY
}

# The 400 MB file (CPU) or 10^8 generated keys and the file (GPU), in memory and streamed.
inputs=("--input big.h5")
[ "$mode" = gpu ] && inputs+=("--gen 100000000 --dist staggered")
for input in "${inputs[@]}"; do
    read -ra in <<<"$input"
    run 1 "${in[@]}" --output mem.h5 --json
    [ "$rc" -eq 0 ] && "$py" -c "import json; assert json.load(open('out.txt'))['streamed'] is False" &&
        ok || bad "${in[*]} in memory: exit $rc: $(cat err.txt out.txt)"
    want=$(digest mem.h5 keys)
    for np in $nps; do
        run "$np" "${in[@]}" --output str.h5 --json --verify "${cap[@]}"
        cp out.txt str.json
        [ "$rc" -eq 0 ] || bad "${in[*]} streamed np $np: exit $rc: $(cat err.txt)"
        streamed_json str.json 100000000 4 && ok || bad "${in[*]} streamed np $np: $(cat str.json)"
        [ "$(digest str.h5 keys)" = "$want" ] && ok || bad "${in[*]} streamed np $np: the output differs from the in-memory run's"
    done
done

# Types and orders at a small size under a tiny cap (CPU: on 3 ranks; one rank is the big file's case).
small_cap=(--host-memory 5M)
small_nps=$nps
[ "$mode" = cpu ] && small_nps=3
[ "$mode" = gpu ] && small_cap=(--device-memory 5M)
for case in "f64" "f32 --descending" "few" "desc"; do
    read -ra c <<<"$case"
    run 1 --input small.h5 --dataset "${c[@]}" --output mem.h5
    [ "$rc" -eq 0 ] || bad "$case in memory: exit $rc: $(cat err.txt)"
    want=$(digest mem.h5 "${c[0]}")
    for np in $small_nps; do
        run "$np" --input small.h5 --dataset "${c[@]}" --output str.h5 --verify --json "${small_cap[@]}"
        [ "$rc" -eq 0 ] && "$py" -c "import json; j=json.load(open('out.txt')); assert j['streamed'] and j['verified'] is True" &&
            [ "$(digest str.h5 "${c[0]}")" = "$want" ] && ok || bad "$case np $np: exit $rc: $(cat err.txt out.txt)"
    done
done
# Ranks with different numbers of runs (3·74898 + 1 keys in chunks of 74898: rank 0 has two, the others
# one), so that some ranks have no segment in the last round.
if [ "$mode" = cpu ]; then
    run 1 --gen 224695 --output mem.h5
    want=$(digest mem.h5 keys)
    run 3 --gen 224695 --output str.h5 --verify --json "${small_cap[@]}"
    [ "$rc" -eq 0 ] && "$py" -c "import json; j=json.load(open('out.txt')); assert j['runs'] == 4 and j['verified'] is True, j" &&
        [ "$(digest str.h5 keys)" = "$want" ] && ok || bad "uneven runs: exit $rc: $(cat err.txt out.txt)"
fi
run 1 --gen 300000 --dtype uint32 --dist zipf --verify --quiet "${small_cap[@]}"
[ "$rc" -eq 0 ] && grep -q "^  streamed: .* runs of" out.txt && grep -q "verify: PASSED" out.txt && [ ! -s err.txt ] &&
    ok || bad "--gen streamed with a summary: $(cat out.txt err.txt)"

# Usage errors.
expect 2 "below the working minimum of" 1 --input small.h5 --dataset f64 --output out.h5 "${cap[0]}" 1M
expect 2 "argsort and --values do not stream yet" 1 --input small.h5 --dataset f64 --argsort "${small_cap[@]}"

# The input truncated while it streams (a pause before each chunk keeps the run loading), on 3 ranks: the
# ranks agree on the failure. (mpiexec takes 2 s more over a failed run: one rank count only.)
if [ "$mode" = cpu ]; then
    for np in 3; do
        "$py" -c "import h5py, numpy as np; h5py.File('cut.h5', 'w')['keys'] = np.arange(4_000_000, dtype=np.int32)[::-1]"
        rm -f out.h5 out.h5.part*
        DSOLVE_TEST_SORT_DELAY=0.05 timeout 60 "$mpiexec" -np "$np" "$dsolve" sort --backend cpu --input cut.h5 \
            --output out.h5 --host-memory 5M >out.txt 2>err.txt &
        job=$!
        for _ in $(seq 500); do grep -q "chunks loaded" err.txt && break; sleep 0.01; done
        truncate -s 1000000 cut.h5
        wait "$job"
        rc=$?
        msg=$(grep '^dsolve:' err.txt | head -1)
        if [ "$rc" -ne 3 ]; then bad "truncated np $np: exit $rc, want 3: $(cat err.txt)"
        elif ! grep -q "cut.h5.*dataset keys" <<<"$msg"; then bad "truncated np $np: message '$msg'"
        elif [ -e out.h5 ] || compgen -G "out.h5.part*" >/dev/null || compgen -G ".dsolve-sort-runs*" >/dev/null; then
            bad "truncated np $np: left $(ls -a)"
        else ok; fi
    done
fi

finish "test_stream_sort_cli $mode"
