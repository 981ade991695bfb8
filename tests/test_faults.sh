#!/usr/bin/env bash
# test_faults.sh: the fault table, on the CPU backend and 3 ranks. Each row is a fault done to a running
# job, the exit status it must end with, the seconds by which every process of the job must be gone,
# and the line that must name what happened; no row may leave an output file.
#   SIGSTOP of rank 1 during a solve   the watchdog (--timeout 4) ends the job: non-zero, "rank 1 ... stopped"
#   SIGKILL of rank 2 during a solve   the launcher ends the job: non-zero
#   a failure injected in each phase   exit 1, that rank's message (DSOLVE_INJECT_FAILURE=RANK:PHASE)
#   a stuck rank (a phase that never ends, DSOLVE_INJECT_FAILURE=RANK:hang)   the watchdog: non-zero
#   SIGTERM to the launcher while the ranks write a file   non-zero, no temporary file left
# Usage: test_faults.sh DSOLVE MPIEXEC. Needs python3 with numpy and h5py (77 without), Linux /proc.
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_timeout=60

# A solve that runs for minutes on 3 ranks unless stopped: the residual route, every sweep run (--tol 0) and
# watched (its predicted time turns on the progress lines and with them the per-sweep heartbeat).
long=(solve --backend cpu --rows 300000 --cols 200 --method residual --iters 100000 --tol 0 --timeout 4
      --output out.h5)

# pid_of_rank R: the dsolve process of rank R of the job started from this test.
pid_of_rank() {
    local p
    for p in $(pgrep -f "$dsolve solve --backend cpu --rows 300000"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"
            return
        fi
    done
}

# signal_row NAME SIGNAL RANK DEADLINE PATTERN: the long solve, SIGNAL sent to RANK after 2 s; the job must
# end non-zero within DEADLINE seconds of the signal, every process gone, the stderr matching PATTERN.
signal_row() {
    local name=$1 sig=$2 rank=$3 deadline=$4 pattern=$5
    rm -f out.h5 out.h5.part*
    "$mpiexec" -np 3 "$dsolve" "${long[@]}" >out.txt 2>err.txt &
    local job=$! pid="" t0
    for _ in $(seq 100); do
        pid=$(pid_of_rank "$rank")
        [ -n "$pid" ] && break
        sleep 0.1
    done
    if [ -z "$pid" ]; then bad "$name: rank $rank never started"; kill "$job"; wait "$job"; return; fi
    sleep 2
    kill -"$sig" "$pid"
    t0=$SECONDS
    while kill -0 "$job" 2>/dev/null && [ $((SECONDS - t0)) -le "$deadline" ]; do sleep 0.2; done
    if kill -0 "$job" 2>/dev/null; then
        bad "$name: the job still runs $deadline s after SIG$sig"
        pkill -KILL -f "$dsolve solve --backend cpu --rows 300000"
        wait "$job"
        return
    fi
    wait "$job"
    local rc=$?
    sleep 0.5
    if [ "$rc" -eq 0 ]; then bad "$name: exit 0"
    elif [ -n "$(pgrep -f "$dsolve solve --backend cpu --rows 300000")" ]; then bad "$name: processes left behind"
    elif ! grep -q -- "$pattern" err.txt; then bad "$name: stderr lacks '$pattern': $(grep dsolve err.txt | head -2)"
    elif [ -e out.h5 ] || compgen -G "out.h5.part*" >/dev/null; then bad "$name: left an output file"
    else ok; fi
    pkill -CONT -f "$dsolve solve --backend cpu --rows 300000" 2>/dev/null
}

signal_row sigstop STOP 1 15 "no progress for .* rank 1 (pid [0-9]*) is stopped"
signal_row sigkill KILL 2 15 ""

# SIGTERM (Slurm's time limit, scancel) to the launcher while 3 ranks write a 1.6 GB file: the ranks get
# it too and end by it, and no temporary output may be left behind.
sigterm_row() {
    rm -f big.h5 big.h5.part*
    "$mpiexec" -np 3 "$dsolve" gen --rows 2000000 --cols 100 --output big.h5 >out.txt 2>err.txt &
    local job=$! t0
    for _ in $(seq 100); do
        compgen -G "big.h5.part*" >/dev/null && break
        sleep 0.1
    done
    sleep 0.5
    kill -TERM "$job"
    t0=$SECONDS
    while kill -0 "$job" 2>/dev/null && [ $((SECONDS - t0)) -le 15 ]; do sleep 0.2; done
    if kill -0 "$job" 2>/dev/null; then
        bad "sigterm: the job still runs 15 s after SIGTERM"
        pkill -KILL -f "$dsolve gen --rows 2000000"
    fi
    wait "$job"
    local rc=$?
    sleep 0.5
    if [ "$rc" -eq 0 ]; then bad "sigterm: exit 0 (the file was written before the signal: make it larger)"
    elif [ -n "$(pgrep -f "$dsolve gen --rows 2000000")" ]; then bad "sigterm: processes left behind"
    elif [ -e big.h5 ] || compgen -G "big.h5.part*" >/dev/null; then bad "sigterm: left $(ls big.h5*)"
    else ok; fi
    rm -f big.h5 big.h5.part*
}
sigterm_row

# Injected failures: every phase, a non-zero rank; exit 1 with that rank's one line, no output.
for phase in setup sweep check; do
    DSOLVE_INJECT_FAILURE=2:$phase expect 1 "injected failure in $phase on rank 2" 3 solve --backend cpu \
        --rows 3000 --cols 40 --iters 5 --output out.h5
done
DSOLVE_INJECT_FAILURE=1:setup expect 1 "injected failure in setup on rank 1" 3 solve --backend cpu --rows 3000 \
    --cols 40 --method cholesky --output out.h5

# A rank stuck in a phase (not stopped, not gone): the watchdog of a waiting rank ends the job, naming the
# rank that is behind or, when the counts cannot tell, saying so.
DSOLVE_INJECT_FAILURE=1:hang expect 1 "no progress for .* (--timeout 3)" 3 solve --backend cpu --rows 3000 --cols 40 \
    --iters 5 --timeout 3 --output out.h5
finish test_faults
