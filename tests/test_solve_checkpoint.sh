#!/usr/bin/env bash
# test_solve_checkpoint.sh: solve's checkpoints and restarts, on a file streamed under --host-memory (the
# Gram pass by chunks) and in memory.
#   stopped inside the pass (DSOLVE_CKPT_STOP: the K-th safe point, as a signal would)
#       restart on the same ranks            the uninterrupted run's coefficients, bitwise (coef_digest)
#       restart on other rank counts          to 1e-12 relative (the partial sums meet in another order)
#       restart with X in memory              to 1e-12 (X'X formed anew)
#   stopped between sweeps (gram, block solve) or after X'X (cholesky)
#       restart on 1 to 3 ranks                bitwise (the sweeps run replicated on the summed system;
#                                              cholesky's refinement sums a pass: 1e-12 across ranks)
#   columns divided by their own powers of two (values near double's limits): restarts bitwise
#   SIGUSR1 to mpirun, SIGTERM to the ranks, SIGKILL, at random moments
#       exit 5 and no temporary file (USR1, TERM), the last checkpoint whole (KILL); restarts bitwise
#   a checkpoint of another solve, a method without checkpoints, --repeat   exit 3, 2, 2
# Usage: test_solve_checkpoint.sh DSOLVE MPIEXEC [BACKEND [RANKS]] (default cpu, 2 ranks).
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
backend=${3:-cpu}
np=${4:-2}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
[ "$backend" = cpu ] || cli_gpus_or_skip "test_solve_checkpoint $backend" "$np"
cli_cmd=(solve --input p.h5 --quiet)
cli_backend=$backend
cli_timeout=120
others=(1 "$np" 3)
[ "$backend" = cpu ] || others=("$np")  # one GPU a rank: the GPU machine may have one

"$dsolve" gen --rows 120000 --cols 100 --noise 0.01 --seed 7 --output p.h5 --quiet >/dev/null ||
    { echo "test_solve_checkpoint: gen failed"; exit 1; }
# 120 000 × 100 f64 is 97 MB; under 16M a rank the pass takes 6 chunks or more.
cap=(--host-memory 16M)
[ "$backend" = cpu ] || cap=(--device-memory 16M)

# same FILE REF: the coefficients (a.h5 against REF's) bitwise, by digest.
field() { "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
near() {  # near A.h5 B.h5 TOL: max |a − b| / max |b| ≤ TOL
    "$py" -c "
import h5py, numpy as np, sys
a = h5py.File(sys.argv[1])['a'][:]; b = h5py.File(sys.argv[2])['a'][:]
d = np.max(np.abs(a - b)) / np.max(np.abs(b))
print('%.2e' % d); sys.exit(int(d > float(sys.argv[3])))" "$1" "$2" "$3"
}

# reference NAME NP OPT...: the uninterrupted run (ref-NAME.json, ref-NAME.h5).
reference() {
    local name=$1 n=$2
    shift 2
    run "$n" "$@" --json --output "ref-$name.h5"
    cp out.txt "ref-$name.json"
    [ "$rc" -eq 0 ] && ok || bad "$name: the uninterrupted run: exit $rc: $(grep dsolve err.txt | head -2)"
}

# stopped NAME K OPT...: a run on np ranks stopped at its K-th safe point: exit 5, a checkpoint, no .part.
stopped() {
    local name=$1 k=$2
    shift 2
    rm -f ck.h5 ck.h5.part*
    DSOLVE_CKPT_STOP=$k run "$np" "$@" --checkpoint ck.h5 --checkpoint-every 1e6
    if [ "$rc" -ne 5 ] || [ ! -e ck.h5 ] || ! grep -q "^dsolve: solve: stopped on a signal after a checkpoint" err.txt; then
        bad "$name: stop at safe point $k: exit $rc, want 5 and ck.h5: $(grep dsolve err.txt | head -2)"
    elif compgen -G "ck.h5.part*" >/dev/null; then bad "$name: left $(ls ck.h5.part*)"
    else ok; fi
}

# resumed NAME N HOW OPT...: --restart ck.h5 on N ranks ends 0 with ref-NAME's coefficients: HOW is
# "bitwise" or a relative tolerance.
resumed() {
    local name=$1 n=$2 how=$3
    shift 3
    run "$n" "$@" --restart ck.h5 --json --output a.h5
    if [ "$rc" -ne 0 ]; then bad "$name: restart on $n ranks: exit $rc: $(grep dsolve err.txt | head -2)"; return; fi
    if [ "$how" = bitwise ]; then
        [ "$(field out.txt coef_digest)" = "$(field "ref-$name.json" coef_digest)" ] && ok ||
            bad "$name: restart on $n ranks: coefficients differ from the uninterrupted run's ($(near a.h5 "ref-$name.h5" 0))"
    else
        local d
        d=$(near a.h5 "ref-$name.h5" "$how") && ok || bad "$name: restart on $n ranks: coefficients differ by $d (> $how)"
    fi
}

# The streamed Gram route: stops in the pass (safe point 3) and between sweeps (safe points after the
# pass's chunks, one a chunk of the rank with the most rows).
o=(--iters 30 "${cap[@]}")
reference gram "$np" "${o[@]}"
chunk=$(field ref-gram.json chunk_rows)
chunks=$(((120000 + np - 1) / np / chunk + ((120000 + np - 1) / np % chunk > 0)))
[ "$chunks" -gt 3 ] && ok || bad "the pass takes $chunks chunks of $chunk rows: too few to stop inside it"
stopped gram 3 "${o[@]}"
for n in "${others[@]}"; do
    if [ "$n" -eq "$np" ]; then resumed gram "$n" bitwise "${o[@]}"; else resumed gram "$n" 1e-12 "${o[@]}"; fi
done
resumed gram 1 1e-12 --iters 30  # X in memory now
stopped gram $((chunks + 10)) "${o[@]}"
for n in "${others[@]}"; do resumed gram "$n" bitwise "${o[@]}"; done

# cholesky: stopped in the pass, and right after X'X.
o=(--method cholesky "${cap[@]}")
reference chol "$np" "${o[@]}"
stopped chol 2 "${o[@]}"
resumed chol "$np" bitwise "${o[@]}"
resumed chol "${others[-1]}" 1e-12 "${o[@]}"
stopped chol $((chunks + 1)) "${o[@]}"
resumed chol "$np" bitwise "${o[@]}"

# In memory, the block solve: every checkpoint is between sweeps.
o=(--iters 40 --block-solve)
reference bs "$np" "${o[@]}"
stopped bs 7 "${o[@]}"
for n in "${others[@]}"; do resumed bs "$n" bitwise "${o[@]}"; done

# Columns near double's limits and 1e600 apart (ps.h5: X times 1e300, column 4 times 1e-300 instead): each
# column is divided by its own power of two as read, and a restart divides the rows it reads by the
# checkpoint's (streamed: inside the pass and between sweeps, where only the certificate reads X) or finds
# the load's the same (in memory).
"$py" -c "
import h5py, shutil, sys
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], 'r+') as f:
    X = f['X'][:] * 1e300
    X[:, 4] *= 1e-300
    X[:, 4] *= 1e-300
    f['X'][...] = X" p.h5 ps.h5 || bad "ps.h5 not written"
cli_cmd=(solve --input ps.h5 --quiet)
o=(--iters 30 "${cap[@]}")
reference scaled "$np" "${o[@]}"
[ "$(field ref-scaled.json x_scaled_columns)" = 100 ] && [ "$(field ref-scaled.json x_scale_exp_min)" -lt -990 ] &&
    [ "$(field ref-scaled.json x_scale_exp_max)" -gt 990 ] && ok ||
    bad "scaled: the columns' powers of two: $(grep -o '"x_sca[^,]*' ref-scaled.json | tr '\n' ' ')"
stopped scaled 3 "${o[@]}"
resumed scaled "$np" bitwise "${o[@]}"
stopped scaled $((chunks + 10)) "${o[@]}"
resumed scaled "$np" bitwise "${o[@]}"
resumed scaled 1 bitwise --iters 30  # X in memory
cli_cmd=(solve --input p.h5 --quiet)

# Signals at random moments (a checkpoint at every safe point; 1 500 sweeps take a few seconds).
o=(--iters 1500 "${cap[@]}")
reference sig "$np" "${o[@]}"
for sig in USR1 TERM KILL; do
    cli_interrupted "sig $sig" "$sig" "${o[@]}"
    if [ "$sig" != KILL ]; then
        [ "$rc" -eq 5 ] && ok || bad "sig $sig: exit $rc, want 5: $(grep dsolve err.txt | head -2)"
    else
        [ "$rc" -ne 0 ] && ok || bad "sig KILL: exit 0: finished before the signal"
    fi
    resumed sig "$np" bitwise "${o[@]}"
done

# A checkpoint of another solve; what does not checkpoint.
expect 3 "/fingerprint: a checkpoint of another run" "$np" --iters 31 --restart ck.h5
expect 3 "nope.h5" "$np" --restart nope.h5
expect 2 "take the Gram route" 1 --method qr --checkpoint ck2.h5
expect 2 "take the Gram route" 1 --method auto --restart ck.h5
expect 2 "take one solve" 1 --repeat 2 --checkpoint ck2.h5
finish test_solve_checkpoint
