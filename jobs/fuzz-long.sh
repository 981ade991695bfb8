#!/usr/bin/env bash
# fuzz-long.sh BIN_DIR OUT_DIR [RUNS] [SECONDS]: the long fuzzing run of issue 15: each libFuzzer harness of
# tests/fuzz (prebuilt: BIN_DIR/fuzz_idx, fuzz_h5_lsq, fuzz_h5_labelled, fuzz_h5_keys, fuzz_h5_model, e.g.
# build-fuzz/tests/fuzz after tests/fuzz/run.sh 0) to RUNS executions (default 10^6), all harnesses at once
# with enough workers each to fill the machine's cores, for SECONDS at most (default 500, so that one call
# of 9 minutes suffices). Writes OUT_DIR/summary.md (executions, seconds, contained crashes, reports inside
# libhdf5, verdict per harness) and keeps corpora, logs and any failing input under OUT_DIR/<harness>/.
# Exits 1 when a harness failed (tests/fuzz/run.sh says what counts) or fell short of RUNS.
# The harnesses need libhdf5 1.10 (libhdf5_serial.so.103: Debian 12, Ubuntu 22.04/24.04) unless linked
# statically; BIN_DIR/lib, when present, is searched first (ldd BIN_DIR/fuzz_h5_lsq shows what they need).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
bin=$(cd "$1" && pwd) out=$2 runs=${3:-1000000} seconds=${4:-500}
mkdir -p "$out" && out=$(cd "$out" && pwd)
[ -d "$bin/lib" ] && export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
harnesses=(idx h5_lsq h5_labelled h5_keys h5_model)
workers=$(( $(nproc) / ${#harnesses[@]} ))
[ "$workers" -ge 1 ] || workers=1

"$root/tests/fuzz/run.sh" "$seconds" -workers="$workers" -runs="$runs" -bin="$bin" -out="$out" "${harnesses[@]}" \
    >"$out/run.txt" 2>&1
rc=$?
{
    echo "# Long fuzzing run: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $workers workers per harness, target $runs executions"
    echo
    echo '```'
    grep -v '^---' "$out/run.txt" | sed -n '/^# harness/,/^fuzz:/p'
    echo '```'
} >"$out/summary.md"
short=$(awk -v runs="$runs" '$1 !~ /^#/ && NF >= 9 && $3 + 0 < runs { print $1 }' "$out/run.txt")
[ -z "$short" ] || echo "short of $runs executions: $short" >>"$out/summary.md"
cat "$out/summary.md"
[ "$rc" -eq 0 ] && [ -z "$short" ]
