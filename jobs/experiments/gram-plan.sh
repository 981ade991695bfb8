#!/usr/bin/env bash
# gram-plan.sh OUTDIR: the sweep behind the Gram product's defaults (tile width 128, row chunks of
# 12 500 rows, at most 16): on one GPU, `dsolve solve --method gram --repeat 10` on the seed problem
# (100 000 x 1 000) for every DSOLVE_GRAM_TILE in 96..256 and DSOLVE_GRAM_KSPLIT in 4, 8, 16, then cuBLAS
# DSYRK on row chunks (DSOLVE_GRAM_KSPLIT=0) on the seed problem and on 4 M rows. A tuning run, not a
# reported figure: jobs/measure.sh does not run it. Writes OUTDIR/results.jsonl, summary.md (its table
# of every run: the solve time, with the setup time in the raw records), log.txt and raw.tar.gz.
# 18 solves of the seed problem or of 4 M rows; build first (jobs/build.sh). Example:
#   jobs/experiments/gram-plan.sh "$OUT"
set -uo pipefail
# shellcheck source=jobs/lib.sh
. "$(dirname "$0")/../lib.sh"
out=${1:?usage: gram-plan.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 64
raw=$(mktemp -d "${TMPDIR:-/tmp}/gram-plan.XXXXXX")
ds_out "$out" "$raw" || exit 64
: >"$out/results.jsonl"
cd "$DS_ROOT" || exit 64
[ "$DS_GPUS" -gt 0 ] || { ds_log "gram-plan.sh: no GPU here"; exit 1; }
ds_need_dsolve || exit 1
status=0

# tune NAME ARGS...: one solve on one GPU with the DSOLVE_GRAM_* variables the caller set, recorded.
tune() {
    local name=$1 rc=0
    shift
    ds_mpirun_cmd 1
    ds_run "$name" "${DS_MPIRUN[@]}" "${DS_DSOLVE#"$DS_ROOT"/}" solve --method gram --json --quiet "$@" || rc=$?
    [ "$rc" -eq 0 ] || status=1
    python3 jobs/record.py "$out/results.jsonl" --part gram-plan --name "$name" --rc "$rc" \
        --wall "$DS_WALL" --command "$DS_CMD" --stdout "$raw/$name.out" --stderr "$raw/$name.err"
}

for t in 96 128 160 192 256; do
    for ks in 4 8 16; do
        DSOLVE_GRAM_TILE=$t DSOLVE_GRAM_KSPLIT=$ks tune "tile${t}_ksplit$ks" --repeat 10
    done
done
DSOLVE_GRAM_KSPLIT=0 tune syrk_seed --repeat 10
DSOLVE_GRAM_KSPLIT=0 tune syrk_4m --rows 4000000 --cols 1000 --repeat 5
tune default_4m --rows 4000000 --cols 1000 --repeat 5

tar -czf "$out/raw.tar.gz" -C "$raw" . && rm -rf "$raw"
python3 jobs/summarize.py "$out"
exit $status
