#!/usr/bin/env bash
# test_write_faults.sh: what a failed write leaves. Under a file-size limit (`ulimit -f`, the testable
# stand-in for a full disk: both make write(2) fail, EFBIG or ENOSPC), every command that writes an
# output (gen, solve, sort, ann, predict, a plot) exits 1 with one line naming the file and the reason,
# on 1 and 2 ranks (gen and solve also on 3; logreg's checkpoint on 2), leaves no temporary file, and
# leaves an older file of the same name as it was.
# Two runs writing the same output at once: each renames a whole file of its own, so what is left is
# exactly one of the two, and no temporary file. Usage: test_write_faults.sh DSOLVE MPIEXEC.
# Needs python3 with numpy and h5py (77 without).
set -u
real_dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
source "$(dirname "$(realpath "$0")")/cli_lib.sh"
cli_timeout=120

# dsolve under `ulimit -f $limit_kb` (only dsolve: mpirun and its daemons keep their limits).
cat >limited.sh <<EOF
#!/bin/sh
ulimit -f \${DSOLVE_TEST_FSIZE_KB:-64}
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
    elif ! grep -q -- "$output.*File too large" <<<"$msg"; then bad "$name (np $np): message '$msg' lacks the file or the reason"
    elif compgen -G "$output.part*" >/dev/null; then bad "$name (np $np): left $(echo "$output".part*)"
    elif [ "$(cat "$output")" != "an older $output" ]; then bad "$name (np $np): the older $output was changed"
    else ok; fi
}

export DSOLVE_TEST_FSIZE_KB=64
for np in 1 2; do
    limited gen "$np" out.h5 gen --rows 20000 --cols 50 --output out.h5
    limited sort "$np" out.h5 sort --backend cpu --gen 100000 --output out.h5
    limited solve "$np" out.h5 solve --backend cpu --rows 200 --cols 20000 --iters 1 --output out.h5
    limited plot "$np" conv.svg solve --backend cpu --input small.h5 --iters 20000 --tol 0 --plot conv.svg
    limited ann "$np" model.h5 ann --backend cpu --input ann.h5 --neurons 1900 --subset 20 --output model.h5
done
# The fault table's 3 ranks (test_faults.sh), and a checkpoint that cannot be written (logreg --checkpoint).
limited gen 3 out.h5 gen --rows 20000 --cols 50 --output out.h5
limited solve 3 out.h5 solve --backend cpu --rows 300 --cols 20000 --iters 1 --output out.h5
fashion=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
if compgen -G "$fashion/train-images-idx3-ubyte*" >/dev/null; then
    limited checkpoint 2 ck.h5 logreg --backend cpu --data "$fashion" --samples 600 --iters 5 --checkpoint ck.h5 \
        --checkpoint-every 0
fi
"$real_dsolve" ann --backend cpu --input ann.h5 --neurons 50 --output good_model.h5 >/dev/null
limited predict 2 pred.h5 predict --backend cpu --model good_model.h5 --input ann_big.h5 --output pred.h5

# Two writers of one output at once, three times: the file left is exactly one run's, whole.
unset DSOLVE_TEST_FSIZE_KB
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
