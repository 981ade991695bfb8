#!/usr/bin/env bash
# gram-plan.sh OUTDIR [--width [SHAPES]]: the sweep behind the Gram product's defaults (tile width 128, row
# chunks of 12 500 rows, at most 16): on one GPU, `dsolve solve --method gram --repeat 10` on the seed problem
# (100 000 x 1 000) for every DSOLVE_GRAM_TILE in 96..256 and DSOLVE_GRAM_KSPLIT in 4, 8, 16, then cuBLAS
# DSYRK on row chunks (DSOLVE_GRAM_KSPLIT=0) on the seed problem and on 4 M rows. With --width, the plans
# against X's width instead, behind the choice of DSYRK from 2 000 columns (src/solve/gram_cuda.c): for
# each shape ROWSxCOLS (default 100000x1000 200000x2000 200000x3000 150000x4000 100000x6000 1000000x1000),
# `dsolve solve --method cholesky --repeat 5` with the tiles (DSOLVE_GRAM_KSPLIT=16) and with DSYRK
# (DSOLVE_GRAM_KSPLIT=0), alternating, twice each; XᵀX is the records' setup_seconds. A tuning run, not a
# reported figure: jobs/measure.sh does not run it. Writes OUTDIR/results.jsonl, summary.md (its table
# of every run: the solve time, with the setup time in the raw records), log.txt and raw.tar.gz.
# Build first (jobs/build.sh). Example:
#   jobs/experiments/gram-plan.sh "$OUT" --width "200000x3000 100000x6000"
set -uo pipefail
# shellcheck source=jobs/lib.sh
. "$(dirname "$0")/../lib.sh"
out=${1:?usage: gram-plan.sh OUTDIR [--width [SHAPES]]}
mode=${2:-}
shapes=${3:-100000x1000 200000x2000 200000x3000 150000x4000 100000x6000 1000000x1000}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 64
raw=$(mktemp -d "${TMPDIR:-/tmp}/gram-plan.XXXXXX")
ds_out "$out" "$raw" || exit 64
: >"$out/results.jsonl"
cd "$DS_ROOT" || exit 64
[ "$DS_GPUS" -gt 0 ] || { ds_log "gram-plan.sh: no GPU here"; exit 1; }
ds_need_dsolve || exit 1
status=0

# tune NAME ARGS...: one solve (ARGS name the method) on one GPU with the DSOLVE_GRAM_* variables the caller set, recorded.
tune() {
    local name=$1 rc=0
    shift
    ds_mpirun_cmd 1
    ds_run "$name" "${DS_MPIRUN[@]}" "${DS_DSOLVE#"$DS_ROOT"/}" solve --json --quiet "$@" || rc=$?
    [ "$rc" -eq 0 ] || status=1
    python3 jobs/record.py "$out/results.jsonl" --part gram-plan --name "$name" --rc "$rc" \
        --wall "$DS_WALL" --command "$DS_CMD" --stdout "$raw/$name.out" --stderr "$raw/$name.err"
}

if [ "$mode" = --width ]; then
    for s in $shapes; do
        m=${s%x*} n=${s#*x}
        for rep in 1 2; do
            DSOLVE_GRAM_KSPLIT=16 tune "tiled_${s}_$rep" --method cholesky --rows "$m" --cols "$n" --repeat 5
            DSOLVE_GRAM_KSPLIT=0 tune "syrk_${s}_$rep" --method cholesky --rows "$m" --cols "$n" --repeat 5
        done
    done
else
    for t in 96 128 160 192 256; do
        for ks in 4 8 16; do
            DSOLVE_GRAM_TILE=$t DSOLVE_GRAM_KSPLIT=$ks tune "tile${t}_ksplit$ks" --method gram --repeat 10
        done
    done
    DSOLVE_GRAM_KSPLIT=0 tune syrk_seed --method gram --repeat 10
    DSOLVE_GRAM_KSPLIT=0 tune syrk_4m --method gram --rows 4000000 --cols 1000 --repeat 5
    tune default_4m --method gram --rows 4000000 --cols 1000 --repeat 5
fi

tar -czf "$out/raw.tar.gz" -C "$raw" . && rm -rf "$raw"
python3 jobs/summarize.py "$out"
exit $status
