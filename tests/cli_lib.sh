# cli_lib.sh: what the command-line test scripts share (sourced, not run): a python3 with the modules
# the script needs (cli_py_needs, default "numpy, h5py"; exit 77 without one), a scratch directory,
# pass/fail counting (ok, bad), one way to run dsolve (run), one check of a failing run (expect) and the
# verdict (finish). Needs: dsolve and mpiexec set by the caller. Each script may set, for its runs:
#   cli_cmd=(WORDS...)      put before the arguments of every run, e.g. (sort --backend cpu)
#   cli_backend=NAME        --backend NAME appended to every run but `info`
#   cli_mpi_args=(ARGS...)  more mpiexec arguments, e.g. (--bind-to none)
#   cli_timeout=SECONDS     after which a run is killed and counts as hung (default 300; times
#                           DSOLVE_TEST_TIME_SCALE, a whole number, where the runs are slowed on purpose:
#                           10 under compute-sanitizer, jobs/gpu_ctest.py --memcheck)
py=
for p in python3 /usr/bin/python3; do
    if "$p" -c "import ${cli_py_needs:-numpy, h5py}" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "$(basename "$0"): no python3 with ${cli_py_needs:-numpy, h5py}"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# cli_limit: a run's limit in seconds (cli_timeout times DSOLVE_TEST_TIME_SCALE).
cli_limit() { echo $((${cli_timeout:-300} * ${DSOLVE_TEST_TIME_SCALE:-1})); }

# run NP ARGS...: dsolve on NP ranks (with cli_cmd, cli_backend and cli_mpi_args), stdout in out.txt,
# stderr in err.txt, the exit status in $rc (124: killed after cli_timeout seconds).
run() {
    local np=$1
    shift
    local be=()
    if [ -n "${cli_backend:-}" ] && [ "${1:-}" != info ]; then be=(--backend "$cli_backend"); fi
    timeout "$(cli_limit)" "$mpiexec" -np "$np" ${cli_mpi_args[@]+"${cli_mpi_args[@]}"} "$dsolve" \
        ${cli_cmd[@]+"${cli_cmd[@]}"} "$@" ${be[@]+"${be[@]}"} >out.txt 2>err.txt
    rc=$?
}

# expect CODE PATTERN NP ARGS...: `run NP ARGS...` ends with exit status CODE, within cli_timeout, with
# exactly one "dsolve:" line on stderr and that line matching PATTERN (grep), no check footer of a bench
# table on stdout (nothing measured before the failure), and no out.h5 or out.h5.part.* left behind.
expect() {
    local code=$1 pattern=$2 np=$3
    shift 3
    local what="dsolve ${cli_cmd[*]+${cli_cmd[*]} }$* (np $np)"
    rm -f out.h5 out.h5.part*
    run "$np" "$@"
    if [ "$rc" -eq 124 ]; then bad "$what: hung (killed after $(cli_limit) s)"; return; fi
    local msg
    msg=$(grep '^dsolve:' err.txt | head -1)
    if [ "$rc" -ne "$code" ]; then bad "$what: exit $rc, want $code; stderr: $(head -3 err.txt)"; return; fi
    if ! grep -q -- "$pattern" <<<"$msg"; then bad "$what: message '$msg' lacks '$pattern'"; return; fi
    if [ "$(grep -c '^dsolve:' err.txt)" -ne 1 ]; then bad "$what: want one error line, got: $(cat err.txt)"; return; fi
    if grep -q '^#.*check' out.txt; then bad "$what: printed results before failing: $(head -3 out.txt)"; return; fi
    if [ -e out.h5 ] || compgen -G "out.h5.part*" >/dev/null; then bad "$what: left an output file"; return; fi
    ok
}

# cli_gpus_or_skip NAME NP: exit 77 (ctest's "skipped") unless each of NP ranks has a GPU of its own.
cli_gpus_or_skip() {
    "$mpiexec" -np "$2" "$dsolve" info --json >info.txt 2>/dev/null
    "$py" -c "import json,sys; j=json.load(open('info.txt')); sys.exit(0 if all(r['device'] >= 0 for r in j['rank_info']) else 77)" 2>/dev/null ||
        { echo "$1: no GPU for each of $2 ranks: skipped"; exit 77; }
}

# cli_interrupted NAME SIGNAL OPT...: `cli_cmd OPT...` on $np ranks with a checkpoint (ck.h5) at every safe
# point, SIGNAL sent at a random moment once the first checkpoint exists: SIGUSR1 to mpiexec on the CPU
# backend (Open MPI passes it on; on the GPU machine a run once ended before it arrived), else to the ranks,
# as Slurm sends it: the processes whose command line starts with a path ending in /dsolve, so that the
# signal reaches dsolve itself also when $dsolve is a wrapper starting it under compute-sanitizer
# (jobs/gpu_ctest.py --memcheck); $rc its exit status. No temporary checkpoint may be left, but after
# SIGKILL (which may strike inside a write: the last whole checkpoint stays).
cli_interrupted() {
    local name=$1 sig=$2
    shift 2
    rm -f ck.h5 ck.h5.part*
    "$mpiexec" -np "$np" "$dsolve" "${cli_cmd[@]}" --backend "$cli_backend" "$@" --checkpoint ck.h5 \
        --checkpoint-every 0 --json >out.txt 2>err.txt &
    local job=$!
    for _ in $(seq 1200); do [ -e ck.h5 ] && break; sleep 0.05; done
    if [ "$cli_backend" = cpu ]; then sleep "0.$((RANDOM % 5))"; else sleep "0.0$((RANDOM % 10))"; fi
    if [ "$sig" = USR1 ] && [ "$cli_backend" = cpu ]; then kill -USR1 "$job"
    else pkill -"$sig" -f "^[^ ]*/dsolve ${cli_cmd[*]} --backend $cli_backend"; fi
    wait "$job"
    rc=$?
    if [ "$sig" != KILL ] && compgen -G "ck.h5.part*" >/dev/null; then bad "$name: left $(ls ck.h5.part*)"; fi
    rm -f ck.h5.part*
}

# cli_wait_streaming FILE: waits (60 s at most) until a run started with DSOLVE_PROGRESS_SECONDS=0 has
# written a streamed pass's first progress line to FILE: a change to its input after that comes while
# it streams, whatever the backend's start-up time.
cli_wait_streaming() {
    for _ in $(seq 600); do grep -q "(pass [0-9]*):" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

# finish NAME: the verdict line; the exit status is 0 when nothing failed and something passed.
finish() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
}
