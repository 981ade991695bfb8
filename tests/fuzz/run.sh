#!/usr/bin/env bash
# run.sh [SECONDS] [-workers=N] [-runs=N] [-bin=DIR] [-out=DIR] [HARNESS...]: builds the libFuzzer harnesses
# of tests/fuzz (clang, -DDSOLVE_FUZZ=ON, in build-fuzz) and runs each over its seed corpus
# (tests/fuzz/corpus/<harness>, read only; what the fuzzer adds goes to OUT/<harness>/corpus) for SECONDS
# (default 60), with AddressSanitizer, UBSan and leak checks, 10 s per input at most and 2 GB of memory.
#   -workers=N  N fuzzing processes per harness, every harness at once (N × harnesses processes; default 1,
#               one harness after the other), sharing the harness's corpus
#   -runs=N     a harness stops once its workers have made N executions together (SECONDS stays the limit);
#               a worker whose harness is done then helps the harness furthest from N (FUZZ_SLICE: seconds
#               between the counts, default 120)
#   -bin=DIR    run the prebuilt harnesses fuzz_<harness> in DIR instead of building (jobs/fuzz-long.sh)
#   -out=DIR    where corpora, logs and kept inputs go (default build-fuzz/fuzz); the scratch files go to
#               /dev/shm where it is writable (FUZZ_SCRATCH=DIR puts them under DIR instead)
#   HARNESS     idx h5_lsq h5_labelled h5_keys h5_model (default: all); HARNESS:N gives that harness N workers
#               instead of -workers (jobs/fuzz-long.sh shares the cores by each harness's speed)
# Prints the executions per harness and exits 1 when dsolve's code crashed, leaked, hung, over-allocated or
# broke the status convention; the input is kept in OUT/<harness>/ (crash-*, leak-*, timeout-*, oom-*)
# beside the worker's log. A crash of libhdf5 inside dsolve's probe worker (src/core/probe.c) is the
# reader's exit 3, as in dsolve, and counted in the "contained" column (a sanitizer's report from that
# worker lands in the same log and does not fail the run). A report whose innermost frame of
# known code is still inside libhdf5 (AddressSanitizer sees libhdf5 overread a heap block through memcpy or
# strdup, where a plain build reads on) is counted apart ("hdf5"), its input moved to OUT/<harness>/hdf5/,
# and the worker restarted, and so is a crash of libhdf5 in a bulk read of the harness's own process, which
# the reader's crash scope ends with dsolve's one line and exit 3 (its scratch input kept as hdf5/scope-*);
# DSOLVE_FUZZ_STRICT=1 makes those fail too. Leaks inside libhdf5 are suppressed
# (tests/fuzz/lsan.supp). Reproduce: build-fuzz/tests/fuzz/fuzz_<harness> FILE (DSOLVE_FUZZ_VERBOSE=1 prints
# each reader's status and message). The long run (10^6 executions each): jobs/fuzz-long.sh. Inputs that
# crashed libhdf5 before the probe helper: tests/fuzz/hdf5_crashes/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=60 workers=1 runs=0 bin="" out="" harnesses=()
declare -A hw=()  # workers of a harness given as HARNESS:N
for a in "$@"; do
    case $a in
    -workers=*) workers=${a#*=} ;;
    -runs=*) runs=${a#*=} ;;
    -bin=*) bin=$(cd "${a#*=}" && pwd) ;;
    -out=*) out=${a#*=} ;;
    [0-9]*) seconds=$a ;;
    idx | h5_lsq | h5_labelled | h5_keys | h5_model) harnesses+=("$a") ;;
    idx:[1-9]* | h5_lsq:[1-9]* | h5_labelled:[1-9]* | h5_keys:[1-9]* | h5_model:[1-9]*) harnesses+=("${a%%:*}") hw[${a%%:*}]=${a#*:} ;;
    *) echo "run.sh: unknown argument '$a' (see the header of $0)" >&2; exit 2 ;;
    esac
done
[ ${#harnesses[@]} -gt 0 ] || harnesses=(idx h5_lsq h5_labelled h5_keys h5_model)
most=1
for h in "${harnesses[@]}"; do
    hw[$h]=${hw[$h]:-$workers}
    [ "${hw[$h]}" -le "$most" ] || most=${hw[$h]}
done
build=$root/build-fuzz
out=${out:-$build/fuzz}
mkdir -p "$out" && out=$(cd "$out" && pwd)

if [ -z "$bin" ]; then
    command -v clang >/dev/null || { echo "run.sh: clang not found (jobs/install-deps.sh installs it)" >&2; exit 1; }
    mkdir -p "$build"
    cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DDSOLVE_FUZZ=ON -DDSOLVE_CUDA=OFF -DBUILD_TESTING=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
    cmake --build "$build" --target fuzzers -j "$(nproc)" >"$build/build.log" 2>&1 || { cat "$build/build.log"; exit 1; }
    bin=$build/tests/fuzz
fi

# Allocations past 320 MB fail (NULL) at once: the harnesses' own stay within FUZZ_MAX_BYTES (256 MB), while
# libhdf5 asks for what a crafted file's metadata says (H5C_protect), and AddressSanitizer mapping and poisoning
# each such block made h5_model 7 times slower (2026-11-26: 700 against 5 061 executions in 30 s, one corpus).
# A quarantine of 8 MB (not 256) for freed blocks: with 48 workers on 64 cores (4 x H100 host, 2026-11-26,
# h5_lsq from the seed corpus, 8 s) a worker made 475 executions a second with the default, 672 with this
# (and half the system time; transparent huge pages off instead: 655), against 1 035 for a worker alone.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=320:quarantine_size_mb=8:thread_local_quarantine_size_kb=64
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Without llvm-symbolizer each report's stack would be tried and retried (slowly: every contained crash
# of a probe worker reports): unsymbolized reports instead, told apart by their process.
if ! command -v llvm-symbolizer >/dev/null && [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
    echo "run.sh: no llvm-symbolizer: the sanitizers' stacks are not symbolized" >&2
    ASAN_OPTIONS+=:symbolize=0 UBSAN_OPTIONS+=:symbolize=0
fi
export LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0
# The harnesses' scratch files (every execution writes its input there and libhdf5 opens it several times):
# in memory (/dev/shm) where there is one (FUZZ_SCRATCH overrides), under a folder named after OUT that is
# removed at the end, since a crashed harness leaves its own folder behind.
scratch_in=${FUZZ_SCRATCH:-/dev/shm}
if [ -d "$scratch_in" ] && [ -w "$scratch_in" ]; then
    export TMPDIR=$scratch_in/dsolve-fuzz-$(echo "$out" | md5sum | cut -c1-8)
    trap 'rm -rf "$TMPDIR"' EXIT
else
    export TMPDIR=$out/tmp
fi
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"

# Log $1 with the harness's unsymbolized frames ("(DIR/fuzz_H+0xOFFSET)", where no llvm-symbolizer is
# installed) followed by "in FUNCTION FILE:LINE" from addr2line, when it is there.
symbolized() {
    local line re='^ *#[0-9]+ 0x[0-9a-f]+ +\((/[^ )]+/fuzz_[a-z0-9_]+)\+(0x[0-9a-f]+)\)'
    if ! command -v addr2line >/dev/null || ! grep -qE "$re" "$1"; then
        cat "$1"
        return
    fi
    while IFS= read -r line; do
        [[ $line =~ $re ]] && line="$line in $(addr2line -f -e "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" 2>/dev/null | paste -sd' ')"
        printf '%s\n' "$line"
    done <"$1"
}

# Where the first report of the harness's own process (pid $2; a probe worker's, headed by another pid,
# is contained and skipped) in log $1 points: "dsolve" when the innermost frame with known code is ours
# (io/, src/, tests/fuzz/), when the memory it touched was allocated by our code (libhdf5 writing past a
# buffer of ours is our bug: the buffer was sized wrong), or when there is no stack; else "hdf5 FUNCTION"
# for a frame inside libhdf5.
classify() {
    symbolized "$1" | awk -v pid="${2:-0}" '
        function ours(l) { return l ~ /(io|src|tests\/fuzz)\/([A-Za-z0-9_]+\/)*[A-Za-z0-9_]+\.[ch]:[0-9]+/ }
        /ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:/ {
            if (on) exit
            if (pid != 0 && match($0, /^==[0-9]+==/) && substr($0, 3, RLENGTH - 4) != pid) { skip = 1; next }
            skip = 0; on = 1; sec = "access"; next }
        skip { next }
        on && /(allocated|freed) by thread/ { sec = $0 ~ /allocated/ ? "alloc" : "freed"; next }
        on && /^ *#[0-9]+ / {
            if (sec == "access" && where == "") {
                if (ours($0)) where = "dsolve"
                else if (match($0, /libhdf5[^ )]*/)) where = "hdf5 " ($0 ~ / in / ? $4 : substr($0, RSTART, RLENGTH))
            }
            if (sec == "alloc" && alloc == "") alloc = ours($0) ? "dsolve" : $0 ~ /libhdf5/ ? "hdf5" : ""
        }
        END { print (alloc == "dsolve" || where == "") ? "dsolve" : where }'
}

# Whether log $1 holds a report from the harness's own process (pid $2): every report counts but those
# from a probe worker, whose death the reader already returned as exit 3 (counted as contained) while its
# report went to the same log: a sanitizer's report headed by another pid (==PID==), or one whose stack
# passes through src/core/probe.c (where the stacks are symbolized).
uncontained_report() {
    awk -v pid="${2:-0}" '
         function done_blk() { if (blk != "" && !worker && blk !~ /src\/core\/probe\.c/) bad = 1 }
         /ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:/ {
             done_blk(); blk = $0; worker = 0
             if (match($0, /^==[0-9]+==/) && substr($0, 3, RLENGTH - 4) != pid) worker = 1
             next }
         blk != "" { blk = blk "\n" $0 }
         END { done_blk(); exit !bad }' "$1"
}

# The executions made so far by every worker of harness $1 together (their OUT/H/count.* files).
harness_count() {
    { cat "$out/$1"/count.* 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }'
}

# fuzz_on H TAG: worker TAG fuzzes harness H until the time is up (end, in SECONDS) or, with -runs, until
# the harness's workers together made that many executions (then libFuzzer runs in slices of at most
# FUZZ_SLICE seconds, default 300, and the worker's count goes to OUT/H/count.TAG after each), restarting
# after reports inside libhdf5 and crash-scope exits; writes "EXECS CONTAINED HDF5 SECONDS VERDICT" to
# OUT/H/result.TAG and fails when the verdict is not OK. Executions are the fuzzing ones: each libFuzzer
# start first runs the whole corpus again (its "INITED" count), which is not counted.
fuzz_on() {
    local h=$1 w=$2 dir=$out/$1 t0=$SECONDS restarts=0 left rc n c init where unit limit pid scope slice rest nc
    local log=$dir/log.$w execs=0 contained=0 hdf5=0 verdict=OK on slices=0
    count_put "$dir/count.$w" 0
    touch "$dir/on.$w"  # the workers on H now share what is left
    while left=$((end - SECONDS)) && [ "$left" -gt 0 ] && [ "$restarts" -lt 200 ]; do
        rc=0 limit=() slice=$left
        if [ "$runs" -gt 0 ]; then
            rest=$((runs - $(harness_count "$h")))
            # each slice first replays the corpus: none starts in the last 30 s but the first
            [ "$rest" -gt 0 ] && { [ "$slices" -eq 0 ] || [ "$left" -ge 30 ]; } || break
            slices=$((slices + 1))
            on=$(find "$dir" -maxdepth 1 -name 'on.*' | wc -l)
            # (libFuzzer's -runs counts the corpus replay too, and the corpus grows: without the margin
            # a target closer than the corpus is large was never reached, slice after slice)
            nc=$(find "$dir/corpus" "$root/tests/fuzz/corpus/$h" -type f | wc -l)
            limit=(-runs=$(((rest + on - 1) / (on > 0 ? on : 1) + nc + 1000)))
            [ "$slice" -le "${FUZZ_SLICE:-300}" ] || slice=${FUZZ_SLICE:-300}
        fi
        "$bin/fuzz_$h" -max_total_time="$slice" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
            -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" "$root/tests/fuzz/corpus/$h" \
            >"$log" 2>&1 &
        pid=$!
        wait "$pid" || rc=$?
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        [ -n "$n" ] || n=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$log" | tail -1)  # ended early: its last report
        init=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]]*INITED.*/\1/p' "$log" | head -1)
        n=$(( ${n:-0} > ${init:-0} ? ${n:-0} - ${init:-0} : 0 ))
        c=$(sed -n 's/^fuzz: contained crashes of libhdf5: *//p' "$log" | tail -1)
        execs=$((execs + n)) contained=$((contained + ${c:-0}))
        count_put "$dir/count.$w" "$execs"
        if [ "$rc" -eq 0 ] && ! uncontained_report "$log" "$pid"; then
            continue  # the slice, the time or the target is up
        fi
        restarts=$((restarts + 1))
        # libhdf5 crashed inside a bulk read of the harness's own process, which the reader's crash scope
        # (src/core/cleanup.c) turns into dsolve's one line and exit 3, as it does for dsolve: no unit is
        # written then, so the input is the scratch file the line names.
        scope=$(sed -n 's/^dsolve: \(.*\): the HDF5 library crashed reading its data (SIG[A-Z]*): a damaged or crafted file$/\1/p' \
            "$log" | tail -1)
        if [ "$rc" -eq 3 ] && [ -n "$scope" ] && [ -f "$scope" ] && [ "${DSOLVE_FUZZ_STRICT:-0}" != 1 ]; then
            hdf5=$((hdf5 + 1))
            cp "$scope" "$dir/hdf5/scope-$w-$restarts"
            { echo "=== scope-$w-$restarts: crash scope, exit 3"; grep -v '^#[0-9]' "$log" | tail -5; } >>"$dir/hdf5/log"
            continue
        fi
        where=$(classify "$log" "$pid")
        unit=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
        # (workers that hit the same input write the same file: the first to get here moves it)
        if [[ $where == hdf5* && ${DSOLVE_FUZZ_STRICT:-0} != 1 && -n $unit ]] &&
            { [ -e "$unit" ] || [ -e "$dir/hdf5/$(basename "$unit")" ]; }; then
            hdf5=$((hdf5 + 1))
            mv -f "$unit" "$dir/hdf5/" 2>/dev/null || true
            { echo "=== $(basename "$unit"): ${where#hdf5 }"; grep -v '^#[0-9]' "$log"; } >>"$dir/hdf5/log"
            continue
        fi
        verdict="FAILED (rc $rc, $where): $log"
        break
    done
    rm -f "$dir/on.$w"
    echo "$execs $contained $hdf5 $((SECONDS - t0)) $verdict" >"$dir/result.$w"
    [ "$verdict" = OK ]
}

# The harness of this round (active) that no worker failed on with the most executions still to make for
# each worker on it, counting the one about to join; nothing when every one is done.
furthest() {
    local h best="" most=0 rest on
    for h in "${active[@]}"; do
        grep -qv ' OK$' "$out/$h"/result.* 2>/dev/null && continue
        rest=$((runs - $(harness_count "$h")))
        on=$(find "$out/$h" -maxdepth 1 -name 'on.*' | wc -l)
        [ "$rest" -gt 0 ] && [ $((rest / (on + 1))) -ge "$most" ] || continue
        best=$h most=$((rest / (on + 1)))
    done
    echo "$best"
}

# count_put FILE N: a worker's count, replaced whole (harness_count may read it at any time).
count_put() {
    echo "$2" >"${1%/*}/.${1##*/}" && mv "${1%/*}/.${1##*/}" "$1"
}

# fuzz_worker H W: worker W of harness H; with -runs, once H is done it goes on with the harness furthest
# from it (as worker H.W.K there), so that no core idles while another harness is short.
fuzz_worker() {
    local h=$1 w=$2 k=0 next
    fuzz_on "$h" "$w" || return 0
    [ "$runs" -gt 0 ] || return 0
    while [ $((end - SECONDS)) -gt 5 ] && next=$(furthest) && [ -n "$next" ]; do
        k=$((k + 1))
        fuzz_on "$next" "$h.$w.$k" || return 0
    done
}

# Starts every worker of the harnesses in $@ at once and waits for them (SECONDS from now).
fuzz_harnesses() {
    local h w pids=()
    active=("$@") end=$((SECONDS + seconds))
    for h in "$@"; do
        rm -f "$out/$h"/result.* "$out/$h"/count.* "$out/$h"/on.* && mkdir -p "$out/$h/corpus" "$out/$h/hdf5"
        local n_h=${hw[$h]}
        for ((w = 0; w < n_h; w++)); do fuzz_worker "$h" "$w" & pids+=($!); done
    done
    wait "${pids[@]}"
}

t0=$SECONDS
if [ "$most" -gt 1 ]; then fuzz_harnesses "${harnesses[@]}"; else for h in "${harnesses[@]}"; do fuzz_harnesses "$h"; done; fi
wall=$((SECONDS - t0))

failed=()
printf '# %-12s %7s %12s %8s %8s %7s %9s %5s  %s\n' harness workers executions seconds exec/s corpus contained hdf5 result
for h in "${harnesses[@]}"; do
    read -r execs contained hdf5 t verdict < <(awk '{e += $1; c += $2; h += $3; if ($4 > t) t = $4
        if ($5 != "OK" && v == "") v = substr($0, index($0, $5))} END { print e + 0, c + 0, h + 0, t + 0, (v == "" ? "OK" : v) }' \
        "$out/$h"/result.*)
    units=$(find "$out/$h/corpus" -type f | wc -l)
    helpers=$(find "$out/$h" -maxdepth 1 -name 'result.*.*' | wc -l)  # workers come over from harnesses done
    wk=${hw[$h]}
    [ "$helpers" -eq 0 ] || wk+="+$helpers"
    printf '  %-12s %7s %12s %8s %8s %7s %9s %5s  %s\n' "$h" "$wk" "$execs" "$t" "$((execs / (t > 0 ? t : 1)))" \
        "$units" "$contained" "$hdf5" "$verdict"
    [ "$verdict" = OK ] || failed+=("$h")
done
echo "# contained: crashes of libhdf5 in the probe worker, which the readers returned as exit 3"
echo "# hdf5: reports inside libhdf5 outside the worker or by AddressSanitizer, and crash-scope exits 3 (inputs and reports in $out/<harness>/hdf5/)"
if [ ${#failed[@]} -ne 0 ]; then
    for h in "${failed[@]}"; do
        for r in "$out/$h"/result.*; do
            grep -q ' OK$' "$r" && continue
            echo "--- $h: the end of $out/$h/log.${r#"$out/$h"/result.}"
            grep -v '^#[0-9]' "$out/$h/log.${r#"$out/$h"/result.}" | tail -40
        done
    done
    echo "fuzz: FAILED: ${failed[*]}"
    exit 1
fi
echo "fuzz: OK (${#harnesses[@]} harnesses, up to $most worker(s) each, ${wall} s)"
