# lib.sh: the preamble the jobs/ scripts share. Source it (`. "$(dirname "$0")/lib.sh"`); it sets no
# shell options and changes no directory. It exports what every dsolve job needs and finds the rest:
#   environment   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (our GPU machines run as
#                 root), NCCL_NVLS_ENABLE=0 (NVLink multicast stays off: it can take a shared host's
#                 GPUs down; also passed by every ds_mpirun with -x), PYTHONUNBUFFERED=1
#   DS_ROOT       the repository root;  DS_CORES  online CPUs;  DS_HOST  host name
#   DS_GPUS       GPUs that `nvidia-smi -L` lists, 0 without one;  DS_GPU_MODEL, DS_GPU_MIB  the first's
#   DS_BUILD      $DSOLVE_BUILD, else $DS_ROOT/build;  DS_DSOLVE  the dsolve binary in it
#   DS_PEERS      the folder holding seed_peers.py (and torch_peers.py): $DSOLVE_PEERS, else the first of
#                 ../shared/peers, shared/peers, .peer under DS_ROOT that has it; empty when none does
#   DS_PYTHON     $DSOLVE_PYTHON, else python3, else /usr/bin/python3 where only that one has numpy (the
#                 peers want numpy; cupy and torch on a GPU machine)
#   DS_FASHION    Fashion-MNIST's IDX files: $DSOLVE_FASHION_DIR, else $DS_ROOT/.fmnist, else
#                 /usr/share/datasets/fashion-mnist; empty when none has them
#   DS_COMMIT     $DSOLVE_COMMIT, else `git rev-parse HEAD` where DS_ROOT is a git checkout, else the first
#                 line of $DS_ROOT/.dsolve-commit, else "unknown";  DS_DIRTY  true/false/unknown
# provides: ds_out, ds_log, ds_quote, ds_build, ds_need_dsolve, ds_mpirun_cmd, ds_run, ds_time_left
# The DS_ variables are for the scripts that source this file:
# shellcheck disable=SC2034

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1

DS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DS_CORES=$(nproc)
DS_HOST=$(hostname 2>/dev/null || echo unknown)
DS_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
DS_GPU_MODEL=""
DS_GPU_MIB=0
if [ "$DS_GPUS" -gt 0 ]; then
    IFS=, read -r DS_GPU_MODEL DS_GPU_MIB < <(nvidia-smi --query-gpu=name,memory.total \
        --format=csv,noheader,nounits 2>/dev/null | head -1)
    DS_GPU_MIB=${DS_GPU_MIB// /}
    [[ $DS_GPU_MIB =~ ^[0-9]+$ ]] || DS_GPU_MIB=0
fi
DS_BUILD=${DSOLVE_BUILD:-$DS_ROOT/build}
DS_DSOLVE=$DS_BUILD/dsolve
DS_PYTHON=${DSOLVE_PYTHON:-python3}
if [ -z "${DSOLVE_PYTHON:-}" ] && ! python3 -c 'import numpy' 2>/dev/null \
    && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    DS_PYTHON=/usr/bin/python3
fi

DS_PEERS=${DSOLVE_PEERS:-}
if [ -z "$DS_PEERS" ]; then
    for d in "$DS_ROOT/../shared/peers" "$DS_ROOT/shared/peers" "$DS_ROOT/.peer"; do
        [ -f "$d/seed_peers.py" ] && { DS_PEERS=$(cd "$d" && pwd); break; }
    done
fi

DS_FASHION=""
for d in ${DSOLVE_FASHION_DIR:+"$DSOLVE_FASHION_DIR"} "$DS_ROOT/.fmnist" /usr/share/datasets/fashion-mnist; do
    if ls "$d"/train-images-idx3-ubyte* >/dev/null 2>&1; then DS_FASHION=$d; break; fi
done

DS_DIRTY=unknown
# DSOLVE_COMMIT first: a device machine's copy of the tree may carry a stale .git of its own.
if [ -n "${DSOLVE_COMMIT:-}" ]; then
    DS_COMMIT=$DSOLVE_COMMIT
elif DS_COMMIT=$(git -C "$DS_ROOT" rev-parse HEAD 2>/dev/null); then
    # Read-only: git diff refreshes no index on disk.
    if git -C "$DS_ROOT" diff --quiet HEAD -- 2>/dev/null; then DS_DIRTY=false; else DS_DIRTY=true; fi
elif [ -s "$DS_ROOT/.dsolve-commit" ]; then
    DS_COMMIT=$(head -1 "$DS_ROOT/.dsolve-commit")
else
    DS_COMMIT=unknown
fi
export DS_ROOT DS_CORES DS_HOST DS_GPUS DS_GPU_MODEL DS_GPU_MIB DS_COMMIT DS_DIRTY

# The environment variables dsolve reads (and OpenBLAS's): ds_mpirun_cmd names the set ones in the
# command line, so that a logged command reproduces its run.
DS_RUN_VARS=(DSOLVE_TIMEOUT DSOLVE_TRACE DSOLVE_GRAM_TILE DSOLVE_GRAM_KSPLIT DSOLVE_GRAM_STREAMS
    DSOLVE_GRAM_CONCURRENT DSOLVE_GRAM_UNIFORM DSOLVE_CERT_PLAN DSOLVE_ANN_GRAM_STREAMS DSOLVE_QR_GLOBAL
    DSOLVE_QR_SKETCH DSOLVE_HOST_MEMORY DSOLVE_PYTHON DSOLVE_FASHION_DIR DSOLVE_LOGREG_UNFUSED
    OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE)

# ds_out DIR [RAW_DIR]: where ds_run writes: DIR/log.txt (every command line and its messages) and
# RAW_DIR/NAME.out, NAME.err (RAW_DIR defaults to DIR). Creates both.
ds_out() {
    DS_OUT=$1
    DS_RAW=${2:-$1}
    mkdir -p "$DS_OUT" "$DS_RAW" || return 1
    DS_LOG=$DS_OUT/log.txt
}

# ds_log MESSAGE...: one line on stdout and in the log.
ds_log() {
    echo "$*"
    [ -z "${DS_LOG:-}" ] || echo "$*" >>"$DS_LOG"
}

# ds_quote WORD...: the words as one shell-quoted command line (only the words that need quoting).
ds_quote() {
    local w s=""
    for w in "$@"; do
        if [[ $w =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then s+=" $w"; else s+=" $(printf '%q' "$w")"; fi
    done
    echo "${s# }"
}

# ds_time_left: seconds left before DSOLVE_DEADLINE (seconds since the calling script began; it is
# unlimited when unset or 0), printed; 1000000 when unlimited.
ds_time_left() {
    local d=${DSOLVE_DEADLINE:-0}
    if [ "$d" -gt 0 ]; then echo $((d - SECONDS)); else echo 1000000; fi
}

# ds_build [cmake args]: configures and builds DS_BUILD through jobs/build.sh (incremental).
# shellcheck disable=SC2120  # the scripts that source this pass cmake arguments
ds_build() {
    "$DS_ROOT/jobs/build.sh" "$DS_BUILD" "$@"
}

# ds_need_dsolve: builds DS_BUILD unless its dsolve exists; fails when it still does not.
ds_need_dsolve() {
    [ -x "$DS_DSOLVE" ] && return 0
    ds_log "building $DS_BUILD (no dsolve there yet)"
    ds_build >>"${DS_LOG:-/dev/null}" 2>&1
    [ -x "$DS_DSOLVE" ] || { ds_log "FAILED: no $DS_DSOLVE after jobs/build.sh"; return 1; }
}

# ds_mpirun_cmd NP: sets the array DS_MPIRUN to the launch of NP ranks on this node: the set variables
# of DS_RUN_VARS as `env` assignments, then mpirun with one rank per GPU binding left to dsolve
# (--bind-to none), the job's variables passed with -x, and --oversubscribe where NP exceeds the cores.
ds_mpirun_cmd() {
    local np=$1 v
    local assign=(NCCL_NVLS_ENABLE=0)
    local pass=(-x NCCL_NVLS_ENABLE -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
    for v in "${DS_RUN_VARS[@]}"; do
        if [ -n "${!v+set}" ]; then
            assign+=("$v=${!v}")
            pass+=(-x "$v")
        fi
    done
    DS_MPIRUN=(env "${assign[@]}" mpirun -np "$np" --bind-to none)
    [ "$np" -le "$DS_CORES" ] || DS_MPIRUN+=(--oversubscribe)
    DS_MPIRUN+=("${pass[@]}")
}

# ds_run NAME COMMAND...: runs COMMAND (a program, not a shell function) under a time limit:
# DSOLVE_RUN_TIMEOUT seconds (default 300), less where DSOLVE_DEADLINE is nearer; a run with under 10 s
# left is not started (DS_NOT_RUN=1, status 125). Its stdout goes to DS_RAW/NAME.out and its stderr to DS_RAW/NAME.err;
# the command line, the stderr and stdout's non-JSON lines (the last 60 of each) and the outcome go to
# the log. Sets DS_CMD (the quoted command line) and DS_WALL (seconds); returns COMMAND's status
# (124 when the limit stopped it).
ds_run() {
    local name=$1 rc=0 t0=$SECONDS left why limit=${DSOLVE_RUN_TIMEOUT:-300}
    shift
    DS_CMD=$(ds_quote "$@")
    DS_WALL=0
    DS_NOT_RUN=0
    left=$(ds_time_left)
    if [ "$left" -lt 10 ]; then
        ds_log "not run (deadline): $name: $DS_CMD"
        DS_NOT_RUN=1
        return 125
    fi
    [ "$left" -ge "$limit" ] || limit=$left
    ds_log "+ [$name] $DS_CMD"
    timeout -k 10 "$limit" "$@" >"$DS_RAW/$name.out" 2>"$DS_RAW/$name.err" || rc=$?
    DS_WALL=$((SECONDS - t0))
    if [ -n "${DS_LOG:-}" ]; then
        grep -v '^{' "$DS_RAW/$name.out" | tail -n 60 >>"$DS_LOG"
        tail -n 60 "$DS_RAW/$name.err" >>"$DS_LOG"
    fi
    if [ "$rc" -eq 0 ]; then
        ds_log "  $name: ok in ${DS_WALL} s"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        ds_log "  FAILED: $name: stopped after ${limit} s (status $rc)"
    else
        why=$(grep -m1 '^dsolve' "$DS_RAW/$name.err" || tail -n 1 "$DS_RAW/$name.err")
        ds_log "  FAILED: $name: status $rc after ${DS_WALL} s: $why"
    fi
    return "$rc"
}
