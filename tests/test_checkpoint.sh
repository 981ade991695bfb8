#!/usr/bin/env bash
# test_checkpoint.sh: logreg's checkpoints and restarts (L-BFGS and gd on 3 000 Fashion-MNIST items, f64).
#   SIGUSR1 to mpirun, or SIGTERM to the ranks   a checkpoint, exit 5, no temporary file left
#   SIGKILL at a random point (checkpoints at every iteration)   the last checkpoint stays whole
#   --restart on the same or other rank counts   the uninterrupted run's weights, bitwise (weights_digest):
#                                    logreg's sums do not depend on the rank count (logreg.h)
#   a checkpoint of another run, or --checkpoint with several sizes   exit 3, exit 2
# Usage: test_checkpoint.sh DSOLVE MPIEXEC [BACKEND [RANKS]] (default cpu, 2 ranks). Needs Fashion-MNIST
# (DSOLVE_FASHION_DIR or /usr/share/datasets/fashion-mnist; 77 without) and python3 with numpy, h5py.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
backend=${3:-cpu}
np=${4:-2}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
data=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
compgen -G "$data/train-images-idx3-ubyte*" >/dev/null || { echo "test_checkpoint: no Fashion-MNIST in $data"; exit 77; }
[ "$backend" = cpu ] || cli_gpus_or_skip "test_checkpoint $backend" "$np"  # one GPU a rank, or skipped
cli_cmd=(logreg --data "$data" --samples 3000 --precision f64)
cli_backend=$backend
cli_timeout=120

# field FILE KEY: one value of a --json output.
field() { "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# resumed NAME NP REF OPT...: --restart ck.h5 on NP ranks must end 0 with REF's weights, bitwise.
resumed() {
    local name=$1 n=$2 ref=$3
    shift 3
    run "$n" "$@" --restart ck.h5 --json
    if [ "$rc" -ne 0 ]; then bad "$name: restart on $n ranks: exit $rc: $(grep dsolve err.txt | head -2)"; return; fi
    [ "$(field out.txt weights_digest)" = "$(field "$ref" weights_digest)" ] && ok ||
        bad "$name: restart on $n ranks: weights differ from the uninterrupted run's on $np (loss $(field out.txt loss), want $(field "$ref" loss))"
}

runs=("--optimizer lbfgs --iters 120" "--optimizer gd --iters 300")
# On a GPU an iteration takes a fraction of a millisecond: longer runs, for the signals to find them running;
# not where the runs are slowed on purpose (DSOLVE_TEST_TIME_SCALE > 1: under compute-sanitizer an iteration
# takes tens of milliseconds, and 3 000 of them four minutes a run).
[ "$backend" = cpu ] || [ "${DSOLVE_TEST_TIME_SCALE:-1}" -gt 1 ] ||
    runs=("--optimizer lbfgs --iters 400" "--optimizer gd --iters 3000")
for opt in "${runs[@]}"; do
    read -ra o <<<"$opt"
    name=${o[1]}
    run "$np" "${o[@]}" --json
    cp out.txt ref.json
    [ "$rc" -eq 0 ] || bad "$name: the uninterrupted run: exit $rc"
    cli_interrupted "$name usr1" USR1 "${o[@]}"
    if [ "$rc" -ne 5 ] || ! grep -q "stopped on a signal after [0-9]* iterations; resume with --restart" err.txt; then
        bad "$name usr1: exit $rc, want 5; $(grep dsolve err.txt | head -2)"
    else ok; fi
    others=("$np")
    [ "$backend" != cpu ] || others=(1 "$np" 3)  # one GPU a rank: the GPU machine may have one
    for n in "${others[@]}"; do resumed "$name usr1" "$n" ref.json "${o[@]}"; done
    cli_interrupted "$name term" TERM "${o[@]}"
    [ "$rc" -eq 5 ] && ok || bad "$name term: exit $rc, want 5"
    resumed "$name term" "$np" ref.json "${o[@]}"
    cli_interrupted "$name kill" KILL "${o[@]}"
    [ "$rc" -ne 0 ] && ok || bad "$name kill: exit 0: finished before the signal"
    resumed "$name kill" "$np" ref.json "${o[@]}"
done

# A checkpoint of another run (other settings, other data), and usage errors.
expect 3 "/fingerprint: a checkpoint of another run" "$np" --optimizer gd --iters 300 --l2 1e-3 --restart ck.h5
expect 3 "/fingerprint: a checkpoint of another run" "$np" --optimizer gd --iters 300 --samples 2000 --restart ck.h5
expect 3 "nope.h5" "$np" --restart nope.h5
expect 2 "one --samples size" 1 --samples 600,3000 --checkpoint ck2.h5
expect 2 "one --samples size" 1 --repeat 2 --restart ck.h5
finish test_checkpoint
