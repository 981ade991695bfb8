#!/usr/bin/env bash
# gpu-logreg.sh OUT_DIR: `dsolve logreg` benchmarks on a GPU machine (assumes build-gpu/dsolve at the
# repository root, built by the lead's job, and Fashion-MNIST in /usr/share/datasets/fashion-mnist or
# DSOLVE_FASHION_DIR). One JSON per run in OUT_DIR, a summary.txt, and a FAILED line per failed run.
#   1 GPU: the default run (softmax, L-BFGS, 100 iterations, f32) and its f64 twin; the seed's run
#   (one-vs-rest, gd, lr 0.1, 10 iterations, 60 000 samples; f64 and f32); 100 gd iterations
#   (time per iteration; f32 also through the two-GEMM route, DSOLVE_LOGREG_UNFUSED=1); the --samples
#   sweep 60, 600, 6 000, 60 000.
#   2 and 4 GPUs (when present): the default run data-parallel.
# Timed runs use --repeat (one warm-up, the median of the rest). Takes well under 3 minutes.
set -uo pipefail
out=${1:?usage: gpu-logreg.sh OUT_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
data=${DSOLVE_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
ngpu=$(nvidia-smi -L | grep -c '^GPU')
dsolve="$root/build-gpu/dsolve"

# run NAME NP ARGS...: one dsolve logreg run on NP GPUs, its JSON in OUT_DIR/NAME.json.
run() {
    local name=$1 np=$2
    shift 2
    [ "$np" -le "$ngpu" ] || return 0
    local xs=()
    [ -z "${DSOLVE_LOGREG_UNFUSED:-}" ] || xs=(-x DSOLVE_LOGREG_UNFUSED)
    timeout 120 mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE "${xs[@]}" "$dsolve" logreg --backend cuda --data "$data" \
        --json --quiet "$@" >"$out/$name.json" 2>"$out/$name.err" || echo "FAILED: $name: $(tail -2 "$out/$name.err")"
}

run default_np1 1 --repeat 5
run default_f64_np1 1 --precision f64 --repeat 5
run seed_gd10_f64 1 --model ovr --optimizer gd --lr 0.1 --iters 10 --precision f64 --repeat 20
run seed_gd10_f32 1 --model ovr --optimizer gd --lr 0.1 --iters 10 --precision f32 --repeat 20
run gd100_f32 1 --optimizer gd --lr 0.05 --iters 100 --repeat 10
DSOLVE_LOGREG_UNFUSED=1 run gd100_f32_gemm 1 --optimizer gd --lr 0.05 --iters 100 --repeat 10
run gd100_f64 1 --optimizer gd --lr 0.05 --iters 100 --precision f64 --repeat 10
run nesterov300_f32 1 --optimizer nesterov --lr 0.05 --iters 300 --repeat 3
run sweep_np1 1 --samples 60,600,6000,60000 --repeat 3
run seed_sweep_np1 1 --model ovr --optimizer gd --lr 0.1 --iters 10 --samples 60,600,6000,60000 --precision f64 --repeat 5
for np in 2 4; do
    run default_np$np $np --repeat 5
    run seed_gd10_f64_np$np $np --model ovr --optimizer gd --lr 0.1 --iters 10 --precision f64 --repeat 20
done

python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
print("# run                  ranks model   optimizer prec samples iters test_acc train_acc  seconds  ms/iter")
for f in sorted(os.listdir(out)):
    if not f.endswith(".json") or os.path.getsize(os.path.join(out, f)) == 0:
        continue
    r = json.load(open(os.path.join(out, f)))
    for i, n in enumerate(r["sweep_samples"]):
        sec, it = r["sweep_seconds"][i], r["sweep_iterations"][i]
        print("%-22s %5d %-7s %-9s %-4s %7d %5d %8.4f %9.4f %8.5f %8.4f" % (f[:-5], r["ranks"], r["model"], r["optimizer"],
              r["precision"], n, it, r["sweep_test_accuracy"][i], r["sweep_train_accuracy"][i], sec,
              1e3 * sec / it if it else 0))
PY
