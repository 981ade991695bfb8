#!/usr/bin/env bash
# lease.sh start|collect WORKDIR [SCRIPT [ARGS...]]: runs a long job on a lent GPU machine across calls
# of at most 10 minutes. A machine stays held only while calls follow each other, and what a call leaves
# running ends with it unless it started a process session of its own: so `start` runs SCRIPT ARGS...
# (from the repository root, its output in WORKDIR/script.log, then WORKDIR/done) under setsid in the
# background, and returns after LEASE_WAIT seconds (default 560) or once SCRIPT is done, whichever comes
# first; `collect`, the next call made at once, waits the same way for the rest. Each packs WORKDIR
# (but *.h5 and fuzz corpora) into $OUT/lease.tgz, the one file that needs to come back (every 30 s as
# it waits, so that a call its time limit cuts short still brings back what was written), and prints
# WORKDIR/times.txt (lines the script adds with `lease_mark TEXT`, exported to it as a function).
# Example, in one call and then the next:
#   jobs/lease.sh start /tmp/w bash -c 'jobs/measure.sh /tmp/w/m build ctest; lease_mark ctest'
#   jobs/lease.sh collect /tmp/w
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 64; }
cd "$(dirname "$0")/.." || exit 64
mode=$1 work=$2
shift 2
mkdir -p "$work" && work=$(cd "$work" && pwd) || exit 64
out=${OUT:-$work/out}
mkdir -p "$out"

# WORKDIR into $OUT/lease.tgz, whole or not at all (a file the script is writing may make tar complain).
archive() {
    (cd "$work" && tar czf "$out/lease.tgz.part" --exclude='*.h5' --exclude='*/corpus' --exclude=./out . \
        2>/dev/null)
    [ -s "$out/lease.tgz.part" ] && mv "$out/lease.tgz.part" "$out/lease.tgz"
}

pack() {
    archive
    cat "$work/times.txt" 2>/dev/null
    [ -e "$work/done" ] && echo "lease.sh: the script is done (status $(cat "$work/done"))" ||
        echo "lease.sh: the script is still running: call 'jobs/lease.sh collect $work' at once"
}

# Packs every 30 s while it waits: a call cut short by its time limit (the device budget's last seconds)
# still brings back what the script had written by then.
wait_done() {
    local end=$((SECONDS + ${LEASE_WAIT:-560})) next=$((SECONDS + 30))
    while [ ! -e "$work/done" ] && [ "$SECONDS" -lt "$end" ]; do
        sleep 5
        if [ "$SECONDS" -ge "$next" ]; then
            archive
            next=$((SECONDS + 30))
        fi
    done
}

case $mode in
start)
    [ $# -ge 1 ] || { echo "lease.sh start: no script" >&2; exit 64; }
    rm -f "$work/done"
    date +%s >"$work/t0"
    lease_mark() { echo "$1 at $(($(date +%s) - $(cat "$LEASE_WORK/t0"))) s" >>"$LEASE_WORK/times.txt"; }
    export -f lease_mark
    export LEASE_WORK=$work
    # shellcheck disable=SC2016  # expanded by the inner shell
    setsid nohup bash -c '"$@" >"$LEASE_WORK/script.log" 2>&1; echo $? >"$LEASE_WORK/done"' lease "$@" \
        </dev/null >/dev/null 2>&1 &
    wait_done
    pack
    ;;
collect)
    wait_done
    pack
    ;;
*)
    echo "lease.sh: start or collect, not '$mode'" >&2
    exit 64
    ;;
esac
