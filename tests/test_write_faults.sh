#!/usr/bin/env bash
# test_write_faults.sh: what a failed write leaves. Under a file-size limit (`ulimit -f`: write(2) fails
# with EFBIG) and on a full disk (the ENOSPC_SO shim, tests/enospc.c: write(2) to a temporary output fails
# with ENOSPC after 64 KiB), every command that writes an output (gen, solve, sort, ann, predict, a plot)
# exits 1 with one line naming the file and the reason, on 1 and 2 ranks (gen and solve also on 3;
# logreg's and solve's checkpoints on 2), leaves no temporary file, and leaves an older file of the same
# name as it was.
# Two runs writing the same output at once: each renames a whole file of its own, so what is left is
# exactly one of the two, and no temporary file. Usage: test_write_faults.sh DSOLVE MPIEXEC [ENOSPC_SO].
# Needs python3 with numpy and h5py (77 without).
set -u
real_dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
enospc=${3:+$(realpath "$3")}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_timeout=120

# dsolve under the fault (only dsolve: mpirun and its daemons keep their limits and their writes):
# `ulimit -f 64` (fault=fsize) or the full disk (fault=enospc).
cat >limited.sh <<EOF
#!/bin/sh
if [ "\$DSOLVE_TEST_FAULT" = enospc ]; then
    export LD_PRELOAD="$enospc" DSOLVE_ENOSPC_AFTER=65536
else
    ulimit -f 64
fi
exec "$real_dsolve" "\$@"
EOF
chmod +x limited.sh
dsolve=$work/limited.sh

"$real_dsolve" gen --rows 3000 --cols 40 --seed 1 --output small.h5 >/dev/null
"$real_dsolve" gen --kind ann --rows 2000 --cols 4 --seed 2 --output ann.h5 >/dev/null
"$real_dsolve" gen --kind ann --rows 20000 --cols 4 --seed 3 --output ann_big.h5 >/dev/null

# limited NAME NP OUTPUT ARGS...: the run fails with exit 1, one "dsolve:" line naming OUTPUT and the
# reason, no OUTPUT.part* left, and OUTPUT (an older file put there first) unchanged.
limited() {
    local name=$1 np=$2 output=$3
    shift 3
    rm -f "$output" "$output".part*
    echo "an older $output" >"$output"
    run "$np" "$@"
    local msg
    msg=$(grep '^dsolve:' err.txt | head -1)
    if [ "$rc" -ne 1 ]; then bad "$name (np $np): exit $rc, want 1; stderr: $(grep -v '^\(---\|  \|$\)' err.txt | head -3)"
    elif [ "$(grep -c '^dsolve:' err.txt)" -ne 1 ]; then bad "$name (np $np): want one error line: $(grep '^dsolve:' err.txt)"
    elif ! grep -q -- "$output.*$reason" <<<"$msg"; then bad "$name (np $np): message '$msg' lacks the file or '$reason'"
    elif compgen -G "$output.part*" >/dev/null; then bad "$name (np $np): left $(echo "$output".part*)"
    elif [ "$(cat "$output")" != "an older $output" ]; then bad "$name (np $np): the older $output was changed"
    else ok; fi
}

faults=(fsize)
[ -n "$enospc" ] && faults+=(enospc)
fashion=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
"$real_dsolve" ann --backend cpu --input ann.h5 --neurons 50 --output good_model.h5 >/dev/null
# Every command on 1 and 2 ranks under the file-size limit; on a full disk, on 2 ranks (gen and solve on
# the fault table's 3).
for fault in "${faults[@]}"; do
    export DSOLVE_TEST_FAULT=$fault
    reason="File too large"
    ranks=(1 2)
    [ "$fault" = enospc ] && reason="No space left on device" && ranks=(2)
    for np in "${ranks[@]}"; do
        limited "sort $fault" "$np" out.h5 sort --backend cpu --gen 100000 --output out.h5
        limited "plot $fault" "$np" conv.svg solve --backend cpu --input small.h5 --iters 20000 --tol 0 --plot conv.svg
        limited "ann $fault" "$np" model.h5 ann --backend cpu --input ann.h5 --neurons 1900 --subset 20 --output model.h5
        limited "predict $fault" "$np" pred.h5 predict --backend cpu --model good_model.h5 --input ann_big.h5 --output pred.h5
    done
    for np in "${ranks[@]}" 3; do
        limited "gen $fault" "$np" out.h5 gen --rows 20000 --cols 50 --output out.h5
        limited "solve $fault" "$np" out.h5 solve --backend cpu --rows 300 --cols 20000 --iters 1 --output out.h5
    done
    # Checkpoints that cannot be written.
    limited "solve checkpoint $fault" 2 ck.h5 solve --backend cpu --rows 300 --cols 200 --iters 5 --checkpoint ck.h5 \
        --checkpoint-every 0
    if compgen -G "$fashion/train-images-idx3-ubyte*" >/dev/null; then
        limited "logreg checkpoint $fault" 2 ck.h5 logreg --backend cpu --data "$fashion" --samples 600 --iters 5 \
            --checkpoint ck.h5 --checkpoint-every 0
    fi
done
unset DSOLVE_TEST_FAULT

# Two writers of one output at once, three times: the file left is exactly one run's, whole.
dsolve=$real_dsolve
"$dsolve" gen --rows 40000 --cols 50 --seed 11 --output a.h5 >/dev/null
"$dsolve" gen --rows 40000 --cols 50 --seed 12 --output b.h5 >/dev/null
for i in 1 2 3; do
    rm -f both.h5
    "$mpiexec" -np 1 "$dsolve" gen --rows 40000 --cols 50 --seed 11 --output both.h5 >/dev/null 2>w1.txt &
    "$mpiexec" -np 1 "$dsolve" gen --rows 40000 --cols 50 --seed 12 --output both.h5 >/dev/null 2>w2.txt
    wait
    if "$py" - <<'PY'; then ok; else bad "concurrent writers, try $i: both.h5 is neither run's file whole"; fi
import h5py, numpy as np, sys
with h5py.File("both.h5") as f, h5py.File("a.h5") as a, h5py.File("b.h5") as b:
    X, y = f["X"][...], f["y"][...]
    same = lambda g: np.array_equal(X, g["X"][...]) and np.array_equal(y, g["y"][...])
    sys.exit(0 if same(a) or same(b) else 1)
PY
    if compgen -G "both.h5.part*" >/dev/null; then bad "concurrent writers, try $i: left a temporary file"; else ok; fi
done
finish test_write_faults
