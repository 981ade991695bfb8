#!/usr/bin/env bash
# run.sh [SECONDS_PER_HARNESS]: builds the libFuzzer harnesses of tests/fuzz (clang, -DDSOLVE_FUZZ=ON, in
# build-fuzz) and runs each over its seed corpus (tests/fuzz/corpus/<harness>, read only; what the fuzzer
# adds goes to build-fuzz/fuzz/<harness>/corpus) for SECONDS (default 60), with AddressSanitizer, UBSan
# and leak checks, 10 s per input at most and 2 GB of memory. Prints the executions per harness and
# exits 1 when dsolve's code crashed, leaked, hung, over-allocated or broke the status convention; the
# input is kept in build-fuzz/fuzz/<harness>/ (crash-*, leak-*, timeout-*, oom-*) beside the log.
# A crash whose innermost frame of known code is inside libhdf5 (HDF5 1.10 does not defend against
# crafted files) is reported apart, its input moved to build-fuzz/fuzz/<harness>/hdf5/, and the harness
# restarted for the rest of its time; DSOLVE_FUZZ_STRICT=1 makes those fail too. Leaks inside libhdf5
# are suppressed (tests/fuzz/lsan.supp). Reproduce: build-fuzz/tests/fuzz/fuzz_<harness> FILE
# (DSOLVE_FUZZ_VERBOSE=1 prints each reader's status and message). The long run: tests/fuzz/run.sh 3600.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
build=$root/build-fuzz
harnesses=(idx h5_lsq h5_labelled h5_keys h5_model)

command -v clang >/dev/null || { echo "run.sh: clang not found (jobs/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DDSOLVE_FUZZ=ON -DDSOLVE_CUDA=OFF -DBUILD_TESTING=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target fuzzers -j "$(nproc)" >"$build/build.log" 2>&1 || { cat "$build/build.log"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0
# The harnesses' scratch files; a crashed harness leaves its folder behind, so they go under build-fuzz.
export TMPDIR=$build/fuzz/tmp
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"

# Where the report in log $1 points: "dsolve" when the innermost frame with known code is ours (io/,
# src/, tests/fuzz/) or there is no stack, else "hdf5 FUNCTION" for a frame inside libhdf5.
classify() {
    awk -v root="$root" '
        /ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:/ { on = 1 }
        on && /^ *#[0-9]+ / {
            if (index($0, root "/io/") || index($0, root "/src/") || index($0, root "/tests/fuzz/")) { print "dsolve"; exit }
            if (match($0, /libhdf5[^ )]*/)) { print "hdf5 " ($0 ~ / in / ? $4 : substr($0, RSTART, RLENGTH)); exit }
        }' "$1" | grep . || echo dsolve
}

# Fuzzes harness $1 for $seconds, restarting after crashes inside libhdf5; sets execs, hdf5_crashes, verdict.
fuzz_harness() {
    local h=$1 out=$build/fuzz/$1 left=$seconds runs=0 rc t0 n where unit
    mkdir -p "$out/corpus" "$out/hdf5"
    execs=0 hdf5_crashes=0 verdict=OK
    while [ "$left" -gt 0 ] && [ "$runs" -lt 200 ]; do
        runs=$((runs + 1)) t0=$(date +%s) rc=0
        "$build/tests/fuzz/fuzz_$h" -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
            -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" "$root/tests/fuzz/corpus/$h" \
            >"$out/log" 2>&1 || rc=$?
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log" | tail -1)
        execs=$((execs + ${n:-0}))
        left=$((left - ($(date +%s) - t0 > 0 ? $(date +%s) - t0 : 1)))
        if [ "$rc" -eq 0 ] && ! grep -q 'ERROR: \(libFuzzer\|AddressSanitizer\|LeakSanitizer\)\|runtime error:' "$out/log"; then
            return
        fi
        where=$(classify "$out/log")
        unit=$(sed -n 's/.*Test unit written to //p' "$out/log" | tail -1)
        if [[ $where == hdf5* && ${DSOLVE_FUZZ_STRICT:-0} != 1 && -n $unit ]]; then
            hdf5_crashes=$((hdf5_crashes + 1))
            mv "$unit" "$out/hdf5/"
            { echo "=== $(basename "$unit"): ${where#hdf5 }"; grep -v '^#[0-9]' "$out/log"; } >>"$out/hdf5/log"
            continue
        fi
        verdict="FAILED (rc $rc, $where): $out/log"
        return
    done
}

failed=()
printf '# %-12s %8s %12s %8s %7s %6s  %s\n' harness seconds executions exec/s corpus hdf5 result
for h in "${harnesses[@]}"; do
    fuzz_harness "$h"
    units=$(find "$build/fuzz/$h/corpus" -type f | wc -l)
    printf '  %-12s %8s %12s %8s %7s %6s  %s\n' "$h" "$seconds" "$execs" "$((execs / (seconds > 0 ? seconds : 1)))" \
        "$units" "$hdf5_crashes" "$verdict"
    [ "$verdict" = OK ] || failed+=("$h")
done
echo "# hdf5: crashes inside libhdf5 (not failures; inputs and reports in build-fuzz/fuzz/<harness>/hdf5/)"
if [ ${#failed[@]} -ne 0 ]; then
    for h in "${failed[@]}"; do
        echo "--- $h: the end of $build/fuzz/$h/log"
        grep -v '^#[0-9]' "$build/fuzz/$h/log" | tail -40
    done
    echo "fuzz: FAILED: ${failed[*]}"
    exit 1
fi
echo "fuzz: OK (${#harnesses[@]} harnesses, ${seconds} s each)"
