#!/usr/bin/env bash
# gram-width.sh OUTDIR [SHAPES]: the Gram product's two plans against X's width, on one GPU: for each
# shape ROWSxCOLS (default 100000x1000 200000x2000 200000x3000 150000x4000 100000x6000 1000000x1000),
# `dsolve solve --method cholesky --repeat 5` with the default plan (tiles of 128 in row chunks) and with
# cuBLAS DSYRK on row chunks (DSOLVE_GRAM_KSPLIT=0), alternating, twice each; XᵀX is the records'
# setup_seconds. A tuning run behind the plan's choice by width (src/solve/gram_cuda.c), not a reported
# figure: jobs/measure.sh does not run it. Writes OUTDIR/results.jsonl, summary.md, log.txt and
# raw.tar.gz. Build first (jobs/build.sh). Example:
#   jobs/experiments/gram-width.sh "$OUT" "200000x3000 100000x6000"
set -uo pipefail
# shellcheck source=jobs/lib.sh
. "$(dirname "$0")/../lib.sh"
out=${1:?usage: gram-width.sh OUTDIR [SHAPES]}
shapes=${2:-100000x1000 200000x2000 200000x3000 150000x4000 100000x6000 1000000x1000}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 64
raw=$(mktemp -d "${TMPDIR:-/tmp}/gram-width.XXXXXX")
ds_out "$out" "$raw" || exit 64
: >"$out/results.jsonl"
cd "$DS_ROOT" || exit 64
[ "$DS_GPUS" -gt 0 ] || { ds_log "gram-width.sh: no GPU here"; exit 1; }
ds_need_dsolve || exit 1
status=0

# tune NAME ARGS...: one solve on one GPU with the DSOLVE_GRAM_* variables the caller set, recorded.
tune() {
    local name=$1 rc=0
    shift
    ds_mpirun_cmd 1
    ds_run "$name" "${DS_MPIRUN[@]}" "${DS_DSOLVE#"$DS_ROOT"/}" solve --method cholesky --json --quiet "$@" || rc=$?
    [ "$rc" -eq 0 ] || status=1
    python3 jobs/record.py "$out/results.jsonl" --part gram-width --name "$name" --rc "$rc" \
        --wall "$DS_WALL" --command "$DS_CMD" --stdout "$raw/$name.out" --stderr "$raw/$name.err"
}

for s in $shapes; do
    m=${s%x*} n=${s#*x}
    for rep in 1 2; do
        tune "tiled_${s}_$rep" --rows "$m" --cols "$n" --repeat 5
        DSOLVE_GRAM_KSPLIT=0 tune "syrk_${s}_$rep" --rows "$m" --cols "$n" --repeat 5
    done
done

tar -czf "$out/raw.tar.gz" -C "$raw" . && rm -rf "$raw"
python3 jobs/summarize.py "$out"
exit $status
