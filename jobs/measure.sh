#!/usr/bin/env bash
# measure.sh OUTDIR PART...: builds dsolve and measures it on this machine, with the peers (the seed
# notebook's NumPy/CuPy code, PyTorch) warmed up and run in the same job for the ratios. Run it from
# anywhere; it works in the repository root. It writes four files into OUTDIR:
#   results.jsonl  one JSON object per run (jobs/record.py): part, name, command (as run), np, date, host,
#                  commit, dirty, gpus, gpu_model, cores, rc, ok, wall_seconds, error, and result (the
#                  run's own --json object); a run not made has skipped (the reason) instead
#   summary.md     the figures docs/performance.md keeps, each with its peer from this job and the ratio
#                  (jobs/summarize.py; also printed at the end)
#   log.txt        every command line, its messages, and its outcome
#   raw.tar.gz     each run's stdout/stderr (PART.NAME.out/.err) and the bench plots
# PARTs, in the order given (a GPU part on a machine without a GPU is skipped, not failed):
#   build        jobs/build.sh into DSOLVE_BUILD (default build/; incremental)
#   ctest        the GPU tests (ctest -L gpu; they skip without a GPU), spread over the GPUs by
#                jobs/gpu_ctest.py;  ctest-all  every test, by ctest
#   sanitize     compute-sanitizer: memcheck over the GPU op and end-to-end tests (one rank), racecheck
#                over the ops with shared-memory kernels
#   sanitize-cli compute-sanitizer memcheck over dsolve itself in the streaming command-line tests (gpu:
#                stream_cli, stream_logreg, stream_ann, stream_sort_cli, at once on a machine with several
#                GPUs; one report fails the run); slow (up to 10 minutes a test)
#   memcheck-tests compute-sanitizer memcheck over every gpu test (jobs/gpu_ctest.py
#                --memcheck: several at once on a machine with several GPUs; DSOLVE_MEMCHECK_SECONDS, default
#                900, bounds it)
#   solve        SolveBak on the seed problem (batch 100 and 1, Gram and residual routes, f32), and
#                --method cholesky (X'X as auto picks it, and in the lower precision: --gram-precision low);
#                peers: the seed's CuPy solvebak (batch 100 and 1), torch lstsq and normal equations
#   methods      every solve method on the seed problem (bench solve --method all, peers: the seed's CuPy,
#                torch's normal equations and lstsq), and cholesky on 400 000 and 10^6 x 1 000 beside torch's
#                normal equations; rho = 0.5 (--block-solve, auto) and condition number
#                1e12 (qr, auto) from files that torch (jobs/lstsq_peer.py) solves in the same job; with
#                2 or more GPUs each method on 4 M x 1 000 on one GPU and on 2 or 4 (and qr with
#                DSOLVE_QR_GLOBAL=0, the tree: run name methods_4m_qr_tree_npN)
#   methods-scaling  only the 4 M x 1 000 strong scaling of methods (DSOLVE_SCALING_METHODS picks, e.g. "qr")
#   ann          the network on the seed problem and on Fashion-MNIST (1 000 to 4 000 neurons); peer:
#                the seed's CuPy code, warmed by a first run in the same process
#   sort         10^9 int32 uniform and reverse, float32, each beside CUB alone; with 4 GPUs the 4·10^9
#                runs and the key distributions; peers: cupy.sort and torch.sort of 10^9 int32
#   logreg       Fashion-MNIST: default f32/f64, the seed's run, 100 gd iterations (fused and two GEMMs)
#   bench        dsolve bench matmul and add (sweeps, the blog's shape; 32768 on 4 GPUs against 1);
#                peers: the seed's CuPy matmul (N=2000) and add (10^8, 10^3)
#   bench-cases  dsolve bench solve, ann, sort, logreg with --peer (the seed's code run by bench)
#   bench-node   dsolve info and bench all on one rank and on one rank per GPU, strong and weak
#   peers        every GPU peer of solve, ann, sort and bench, without dsolve
#   scaling      solve (both routes), ann and sort, strong and weak, on 1, 2, 4 and 8 GPUs (those present)
#   hdf5         gen writes 1 M x 1 000 (8 GB, in DSOLVE_SCRATCH or /tmp), solve --input reads it
#   stream       solves larger than --device-memory (one GPU): 4 M x 1 000 (32 GB) kept in pinned host
#                memory with --device-memory 16G, gram and cholesky, beside the same problem in device
#                memory; peer: the pinned and pageable host-to-device rates (jobs/h2d_peer.py, torch);
#                and 1 M x 500 (4 GB) from the file (--host-memory 2G) beside plain reads of it
#   stream-cmds  the other commands beyond --device-memory (one GPU), each beside its in-memory run
#                (DSOLVE_STREAM_CMDS: which of sort ann logreg sort30, default all): sort
#                2·10^9 int32 with --device-memory 2G (and CUB alone), ann 500 M x 10 from a file with
#                --device-memory 8G (100 M and 2G with less than 50 GB of scratch disk), logreg 1.28 M x 784 f32 with --device-memory 2G (from pinned host
#                memory, and from the file with --host-memory 3G); with 300 GB of RAM, sort 3·10^10 int32
#   big          25 M x 1 000 f64 (200 GB) kept in pinned host memory and solved on one GPU (gram and
#                cholesky), with the pinned host-to-device rate (jobs/h2d_peer.py); needs 300 GB of RAM
#   cpu          the CPU backend (solve batch 100 and 1, cholesky, ann, sort 10^8, logreg on 2 ranks),
#                each followed by the seed's NumPy code (cholesky: NumPy's normal equations,
#                jobs/normal_eq.py) on the same cores
#   all          build ctest solve ann sort logreg bench cpu, and scaling where there are 2 GPUs or more;
#                meant to fit one 10-minute call on a bare one-GPU machine (not timed there yet: set
#                DSOLVE_DEADLINE, and see how long each part took at the end of log.txt)
# Environment: DSOLVE_BUILD, DSOLVE_PEERS, DSOLVE_PYTHON, DSOLVE_FASHION_DIR, DSOLVE_COMMIT (lib.sh);
# DSOLVE_CTEST_REGEX (the ctest parts run only the tests it matches, ctest -R);
# DSOLVE_RUN_TIMEOUT (seconds a run may take, default 300); DSOLVE_DEADLINE (seconds from the start
# after which no run starts and running ones are cut short: set it below the machine's limit so that
# the outputs are complete); DSOLVE_HOST_MEMORY (bench's host memory, GB; set from the GPU count on our
# machines, whose MemAvailable starts low); DSOLVE_RAW_DIR (keep the raw files there too).
# Exit status: 0 when every run passed, 1 when one failed, 2 when the deadline left runs out, 64 on a
# usage error. Example (a GPU machine, from the repository root):
#   DSOLVE_DEADLINE=500 jobs/measure.sh "$OUT" all
# The parts are called by name (part_$part), which shellcheck does not follow:
# shellcheck disable=SC2317
set -uo pipefail
# shellcheck source=jobs/lib.sh
. "$(dirname "$0")/lib.sh"

usage() {
    sed -n '2,/^# The parts are called/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-64}"
}
case ${1:-} in -h | --help) usage 0 ;; esac
[ $# -ge 2 ] || usage
out=$1
shift
parts=()
for p in "$@"; do
    if [ "$p" = all ]; then
        parts+=(build ctest solve ann sort logreg bench cpu)
        [ "$DS_GPUS" -lt 2 ] || parts+=(scaling)
    else
        parts+=("$p")
    fi
done
for p in "${parts[@]}"; do
    case $p in
    build | ctest | ctest-all | solve | methods | methods-scaling | ann | sort | logreg | bench | bench-cases | bench-node | peers | scaling | \
        hdf5 | stream | stream-cmds | big | sanitize | sanitize-cli | memcheck-tests | cpu) ;;
    *) echo "measure.sh: unknown part '$p' (measure.sh --help)" >&2; exit 64 ;;
    esac
done

mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 64
raw=${DSOLVE_RAW_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dsolve-measure.XXXXXX")}
ds_out "$out" "$raw" || exit 64
results=$out/results.jsonl
: >"$results"
: >"$DS_LOG"
cd "$DS_ROOT" || exit 64
dsolve=${DS_DSOLVE#"$DS_ROOT"/}  # the command lines name build/dsolve as run from the root
G=1000000000
part=""
failed=()
cut=()
declare -A py_has=()

# ---------------------------------------------------------------------------------------------------
# Runs and their records

# record NAME RC: appends the run's record (its JSON lines; ctest's counts) to results.jsonl.
record() {
    python3 jobs/record.py "$results" --part "$part" --name "$1" --rc "$2" --wall "$DS_WALL" \
        --command "$DS_CMD" --stdout "$DS_RAW/$part.$1.out" --stderr "$DS_RAW/$part.$1.err" \
        || ds_log "FAILED: $part/$1: its record could not be written"
}

# skip NAME REASON: a run not made here (too few GPUs, no data, no peer), recorded as skipped.
skip() {
    ds_log "skipped: $part/$1: $2"
    python3 jobs/record.py "$results" --part "$part" --name "$1" --skipped "$2"
}

# run NAME COMMAND...: one run (ds_run), recorded; a failure is remembered for the exit status.
run() {
    local name=$1 rc=0
    shift
    ds_run "$part.$name" "$@" || rc=$?
    if [ "$DS_NOT_RUN" = 1 ]; then
        cut+=("$part/$name")
        python3 jobs/record.py "$results" --part "$part" --name "$name" \
            --skipped "deadline (DSOLVE_DEADLINE=${DSOLVE_DEADLINE:-})"
        return 0
    fi
    record "$name" "$rc"
    [ "$rc" -eq 0 ] || failed+=("$part/$name")
    return 0
}

# dsr NAME NP ARGS...: dsolve ARGS --json --quiet on NP ranks; skipped where a GPU part needs more GPUs.
dsr() {
    local name=$1 np=$2
    shift 2
    if [ "$gpu_part" = 1 ] && [ "$np" -gt "$DS_GPUS" ]; then
        skip "$name" "needs $np GPUs, $DS_GPUS here"
        return 0
    fi
    ds_mpirun_cmd "$np"
    run "$name" "${DS_MPIRUN[@]}" "$dsolve" "$@" --json --quiet
}

# have_py MODULE: whether DS_PYTHON imports MODULE (asked once).
have_py() {
    if [ -z "${py_has[$1]+x}" ]; then
        if "$DS_PYTHON" -c "import $1" >/dev/null 2>&1; then py_has[$1]=1; else py_has[$1]=0; fi
    fi
    [ "${py_has[$1]}" = 1 ]
}

# peer NAME RUNS MODULE SCRIPT ARGS...: a peer script (from DS_PEERS) run RUNS times in one Python
# process by jobs/peer_warm.py, the last run reported; skipped without the script or MODULE (numpy,
# cupy, torch), and without a GPU for cupy and torch.
peer() {
    local name=$1 runs=$2 module=$3 script=$4
    shift 4
    if [ -z "$DS_PEERS" ] || [ ! -f "$DS_PEERS/$script" ]; then
        skip "$name" "no $script (DSOLVE_PEERS, ../shared/peers, .peer)"
    elif [ "$module" != numpy ] && [ "$DS_GPUS" -eq 0 ]; then
        skip "$name" "no GPU for $module"
    elif ! have_py "$module"; then
        skip "$name" "$DS_PYTHON has no $module"
    else
        run "$name" "$DS_PYTHON" jobs/peer_warm.py --runs "$runs" "$DS_PEERS/$script" "$@"
    fi
}

# ---------------------------------------------------------------------------------------------------
# The peers of each workload (GPU), run in the same part as dsolve

peers_solve() {
    peer cupy_solvebak_b100 1 cupy seed_peers.py solvebak --xp cupy --batch 100
    peer cupy_solvebak_b1 1 cupy seed_peers.py solvebak --xp cupy --batch 1
    peer torch_lstsq 1 torch torch_peers.py lstsq
}

peers_ann() {
    peer cupy_ann 2 cupy seed_peers.py ann --xp cupy --vars 10
}

peers_sort() {
    peer cupy_sort_1e9 1 cupy seed_peers.py sort --xp cupy --n "$G" --dtype int32
    peer torch_sort_1e9 1 torch torch_peers.py sort --n "$G" --dtype int32
}

peers_bench() {
    peer cupy_matmul_2000 1 cupy seed_peers.py matmul --xp cupy --n 2000
    peer cupy_add_1e8 1 cupy seed_peers.py add --xp cupy --n 100000000
    peer cupy_add_1e3 1 cupy seed_peers.py add --xp cupy --n 1000
}

# ---------------------------------------------------------------------------------------------------
# The parts

part_build() {
    local n=${#failed[@]}
    built=1
    DSOLVE_RUN_TIMEOUT=${DSOLVE_BUILD_TIMEOUT:-900} run build jobs/build.sh "$DS_BUILD"
    if [ ${#failed[@]} -gt "$n" ] || [ ! -x "$DS_DSOLVE" ]; then build_failed=1; fi
}

part_info() {
    dsr info $((DS_GPUS > 0 ? DS_GPUS : 1)) info
}

# ctest: the gpu tests, several at once where there are several GPUs, each on GPUs of its own
# (jobs/gpu_ctest.py; each test's log in raw.tar.gz, gpu-tests/); ctest-all: every test, by ctest.
part_ctest() {
    local regex=()
    [ -z "${DSOLVE_CTEST_REGEX:-}" ] || regex=(-R "$DSOLVE_CTEST_REGEX")
    if [ "$part" = ctest ]; then
        DSOLVE_RUN_TIMEOUT=${DSOLVE_CTEST_TIMEOUT:-900} \
            run tests python3 jobs/gpu_ctest.py "$DS_BUILD" "$DS_RAW/gpu-tests" "${regex[@]}" --timeout 600
    else
        DSOLVE_RUN_TIMEOUT=${DSOLVE_CTEST_TIMEOUT:-900} \
            run tests ctest --test-dir "$DS_BUILD" "${regex[@]}" -j 4 --output-on-failure --timeout 300
    fi
}

# compute-sanitizer over the GPU tests of one rank: memcheck of every backend op and of the end-to-end
# tests (test_gpu: solve against the CPU backend; qr, ann, sort, logreg); racecheck of the kernels with shared memory (solve, qr, sort,
# logreg ops). A report fails the run (--error-exitcode).
part_sanitize() {
    local cs t f
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    [ -x "$cs" ] || { skip sanitize "no compute-sanitizer"; return 0; }
    [ "$DS_GPUS" -ge 1 ] || { skip sanitize "no GPU here"; return 0; }
    local -x NCCL_NVLS_ENABLE=0
    run memcheck_ops "$cs" --tool memcheck --error-exitcode 9 "$DS_BUILD/tests/test_backend_ops" gpu
    run memcheck_gpu "$cs" --tool memcheck --error-exitcode 9 "$DS_BUILD/tests/test_gpu"
    for t in solve_qr ann sort logreg; do
        run "memcheck_$t" "$cs" --tool memcheck --error-exitcode 9 "$DS_BUILD/tests/test_$t" gpu
    done
    for f in solve.gram solve.block qr.stack sort. logreg.; do
        run "racecheck_${f%.}" "$cs" --tool racecheck --error-exitcode 9 "$DS_BUILD/tests/test_backend_ops" gpu "$f"
    done
}

# compute-sanitizer memcheck over gpu tests, several at once on GPUs of their own, the narrowest first
# (jobs/gpu_ctest.py --memcheck: the sanitizer before each rank's test program; the command-line tests
# get a wrapper that runs dsolve under it, one log a process). memcheck_tests NAME SECONDS [-R REGEX]:
# SECONDS bounds a test and the whole run.
memcheck_tests() {
    local name=$1 s=$2
    shift 2
    [ "$DS_GPUS" -ge 1 ] || { skip "$name" "no GPU here"; return 0; }
    local -x NCCL_NVLS_ENABLE=0
    DSOLVE_RUN_TIMEOUT=$((s + 60)) run "$name" python3 jobs/gpu_ctest.py "$DS_BUILD" "$DS_RAW/$name" "$@" \
        --memcheck --narrow-first --timeout "$s" --deadline "$s"
}

# The streaming command-line tests under memcheck (up to 10 minutes a test).
part_sanitize_cli() {
    memcheck_tests sanitize_cli "${DSOLVE_RUN_TIMEOUT:-600}" -R '^stream_(cli|logreg|ann|sort_cli)_gpu$'
}

# Every gpu test under memcheck; DSOLVE_MEMCHECK_SECONDS bounds it (default 900), DSOLVE_CTEST_REGEX picks.
part_memcheck_tests() {
    local regex=()
    [ -z "${DSOLVE_CTEST_REGEX:-}" ] || regex=(-R "$DSOLVE_CTEST_REGEX")
    memcheck_tests memcheck_tests "${DSOLVE_MEMCHECK_SECONDS:-900}" "${regex[@]}"
}

part_solve() {
    dsr seed_b100 1 solve --repeat 20
    dsr seed_b100_residual 1 solve --method residual --repeat 20
    dsr seed_b100_f32 1 solve --precision f32 --repeat 20
    dsr seed_b1 1 solve --batch 1 --method gram --repeat 10
    dsr seed_b1_residual 1 solve --batch 1 --method residual --repeat 3
    dsr seed_cholesky 1 solve --method cholesky --repeat 20
    dsr seed_cholesky_low 1 solve --method cholesky --gram-precision low --repeat 20
    peers_solve
}

# lstsq_file NAME ARGS...: a problem file (jobs/lstsq_peer.py make ARGS) in DSOLVE_SCRATCH or /tmp, its path
# in $lstsq_path; recorded as a failed run when it cannot be made.
lstsq_file() {
    local name=$1
    shift
    lstsq_path=$(mktemp -d "${DSOLVE_SCRATCH:-/tmp}/dsolve-lstsq.XXXXXX")/$name.h5
    run "make_$name" "$DS_PYTHON" jobs/lstsq_peer.py make --out "$lstsq_path" "$@"
}

part_methods() {
    local -x DSOLVE_PYTHON=${DSOLVE_PYTHON:-$DS_PYTHON}  # bench's interpreter for --peer
    local p=()
    [ -z "$DS_PEERS" ] || p=(--peer "$DS_PEERS/seed_peers.py")
    dsr seed_methods 1 bench solve --method all --sizes 100000 --cols 1000 --repeat 10 "${p[@]}"
    dsr cholesky_sizes 1 bench solve --method cholesky --sizes 400000,1000000 --cols 1000 --repeat 10 --cpu-budget 2 "${p[@]}"
    dsr seed_qr 1 solve --method qr --repeat 20
    dsr seed_auto 1 solve --method auto --repeat 20
    dsr corr05_block 1 solve --corr 0.5 --block-solve --tol 1e-10 --iters 30 --repeat 5
    dsr corr05_block_nocoarse 1 solve --corr 0.5 --block-solve --no-coarse --tol 1e-10 --iters 30
    dsr corr05_seed 1 solve --corr 0.5 --tol 1e-10 --iters 30
    if ! have_py torch || ! have_py h5py; then
        skip lstsq_files "$DS_PYTHON lacks torch or h5py"
        return 0
    fi
    lstsq_file corr05 --corr 0.5 --rows 100000 --cols 1000
    dsr corr05_file_auto 1 solve --input "$lstsq_path" --method auto --repeat 10
    dsr corr05_file_block 1 solve --input "$lstsq_path" --block-solve --tol 1e-10 --iters 30 --repeat 5
    run torch_corr05 "$DS_PYTHON" jobs/lstsq_peer.py torch --input "$lstsq_path"
    rm -rf "$(dirname "$lstsq_path")"
    lstsq_file cond1e12 --cond 1e12 --rows 100000 --cols 1000
    dsr cond1e12_qr 1 solve --input "$lstsq_path" --method qr --repeat 10
    dsr cond1e12_auto 1 solve --input "$lstsq_path" --method auto --repeat 10
    run torch_cond1e12 "$DS_PYTHON" jobs/lstsq_peer.py torch --input "$lstsq_path"
    rm -rf "$(dirname "$lstsq_path")"
    methods_scaling
}

# Strong scaling of each method on 4 M x 1 000 f64 (32 GB; qr keeps a copy of X): one GPU against every GPU
# present (2 or 4), where there are two or more.
methods_scaling() {
    local m np
    [ "$DS_GPUS" -ge 2 ] || { skip methods_scaling "one GPU"; return 0; }
    np=$((DS_GPUS >= 4 ? 4 : 2))
    for m in ${DSOLVE_SCALING_METHODS:-solvebak residual cholesky qr auto}; do
        dsr "methods_4m_${m}_np1" 1 solve --rows 4000000 --cols 1000 --method "$m" --repeat 5
        dsr "methods_4m_${m}_np$np" "$np" solve --rows 4000000 --cols 1000 --method "$m" --repeat 5
        [ "$m" = qr ] || continue
        # qr with the ranks' R factors combined up the tree instead of every rank's rows factored at once
        # (src/solve/qr_cuda.c), same job
        DSOLVE_QR_GLOBAL=0 dsr "methods_4m_qr_tree_np$np" "$np" solve --rows 4000000 --cols 1000 --method qr \
            --repeat 5
    done
}

part_ann() {
    local -x DSOLVE_TRACE=${DSOLVE_TRACE:-1}  # each rank's hidden-layer phases, in the .err files
    local k
    dsr ann_seed 1 ann --repeat 10
    if [ -n "$DS_FASHION" ]; then
        for k in 1000 2000 4000; do
            dsr ann_fashion_k"$k" 1 ann --idx "$DS_FASHION" --classes 10 --neurons "$k" --repeat 3
        done
        dsr ann_fashion_k4000_np4 4 ann --idx "$DS_FASHION" --classes 10 --neurons 4000 --repeat 3
    else
        skip ann_fashion "no Fashion-MNIST (DSOLVE_FASHION_DIR)"
    fi
    peers_ann
}

part_sort() {
    local run_ t dtype dist d
    for run_ in i32:int32:uniform i32:int32:reverse f32:float32:uniform; do
        IFS=: read -r t dtype dist <<<"$run_"
        dsr "sort1_${t}_$dist" 1 sort --gen "$G" --dtype "$dtype" --dist "$dist" --repeat 5 --verify
        dsr "cub1_${t}_$dist" 1 sort --gen "$G" --dtype "$dtype" --dist "$dist" --repeat 5 --cub-only
    done
    if [ "$DS_GPUS" -ge 4 ]; then
        dsr sort4_i32_uniform 4 sort --gen $((4 * G)) --dtype int32 --dist uniform --repeat 5 --verify
        dsr sort4_i64_uniform 4 sort --gen $((4 * G)) --dtype int64 --dist uniform --repeat 3 --verify
        dsr sort4_f64_uniform 4 sort --gen $((2 * G)) --dtype float64 --dist uniform --repeat 3 --verify
        dsr sort4_f32_uniform 4 sort --gen $((4 * G)) --dtype float32 --dist uniform --repeat 3 --verify
        for d in equal few-unique zipf; do
            dsr "sort4_i32_$d" 4 sort --gen $((4 * G)) --dtype int32 --dist "$d" --repeat 3 --verify
        done
        dsr sort4_default 4 sort --repeat 3
    fi
    peers_sort
}

part_logreg() {
    [ -n "$DS_FASHION" ] || { skip logreg "no Fashion-MNIST (DSOLVE_FASHION_DIR)"; return 0; }
    local np lr=(logreg --backend cuda --data "$DS_FASHION")
    dsr default_np1 1 "${lr[@]}" --repeat 5
    dsr default_f64_np1 1 "${lr[@]}" --precision f64 --repeat 5
    dsr seed_gd10_f64 1 "${lr[@]}" --model ovr --optimizer gd --lr 0.1 --iters 10 --precision f64 --repeat 20
    dsr seed_gd10_f32 1 "${lr[@]}" --model ovr --optimizer gd --lr 0.1 --iters 10 --precision f32 --repeat 20
    dsr gd100_f32 1 "${lr[@]}" --optimizer gd --lr 0.05 --iters 100 --repeat 10
    DSOLVE_LOGREG_UNFUSED=1 dsr gd100_f32_gemm 1 "${lr[@]}" --optimizer gd --lr 0.05 --iters 100 --repeat 10
    dsr gd100_f64 1 "${lr[@]}" --optimizer gd --lr 0.05 --iters 100 --precision f64 --repeat 10
    for np in 2 4; do
        [ "$np" -gt "$DS_GPUS" ] || dsr default_np"$np" "$np" "${lr[@]}" --repeat 5
    done
}

# bench_memory: DSOLVE_HOST_MEMORY for bench's fit check, unless set: our GPU machines' RAM grows as it
# is used (MemAvailable starts near 31 GiB): 128 GiB with 1 GPU, 256 with 2, 512 with 4, 560 with 8.
bench_memory() {
    [ -z "${DSOLVE_HOST_MEMORY:-}" ] || return 0
    case $DS_GPUS in
    1) export DSOLVE_HOST_MEMORY=120 ;; 2) export DSOLVE_HOST_MEMORY=250 ;;
    4) export DSOLVE_HOST_MEMORY=500 ;; 8) export DSOLVE_HOST_MEMORY=530 ;;
    esac
}

part_bench() {
    bench_memory
    dsr matmul_sweep 1 bench matmul --sizes 10,100,1000,2000,4096,8192,10000 --repeat 5 \
        --plot "$DS_RAW/bench.matmul_sweep.svg"
    dsr matmul_blog 1 bench matmul --m 2000 --n 40000 --k 2000 --repeat 5
    dsr add_sweep 1 bench add --sizes 1e3:1e9:x10 --repeat 5 --plot "$DS_RAW/bench.add_sweep.svg"
    if [ "$DS_GPUS" -ge 4 ]; then
        dsr matmul_32k_np1 1 bench matmul --sizes 32768 --repeat 3
        dsr matmul_32k_np4 4 bench matmul --sizes 32768 --repeat 3
        dsr matmul_weak8k_np4 4 bench matmul --sizes 8192 --scaling weak --repeat 5
        dsr add_1e9_np4 4 bench add --sizes 1e9 --repeat 5
    fi
    peers_bench
}

part_bench_cases() {
    bench_memory
    local -x DSOLVE_PYTHON=${DSOLVE_PYTHON:-$DS_PYTHON}  # bench's interpreter for --peer
    local p=()
    [ -z "$DS_PEERS" ] || p=(--peer "$DS_PEERS/seed_peers.py")
    dsr solve_peer 1 bench solve --sizes 100000 --cols 1000 --iters 10 --batch 100 --repeat 3 "${p[@]}"
    dsr ann_peer 1 bench ann --sizes 100000 --repeat 3 "${p[@]}"
    # The CPU sorts 10^9 keys only where the 10^8 row predicts at most 3 s a call.
    dsr sort_peer 1 bench sort --sizes 1e8,1e9 --repeat 3 --cpu-budget 3 "${p[@]}"
    if [ -n "$DS_FASHION" ]; then
        local -x DSOLVE_FASHION_DIR=$DS_FASHION
        dsr logreg_sweep 1 bench logreg --sizes 60,600,6000,60000 --repeat 5
        dsr logreg_sweep_f32 1 bench logreg --dtype f32 --sizes 60,600,6000,60000 --repeat 5
    else
        skip logreg_sweep "no Fashion-MNIST (DSOLVE_FASHION_DIR)"
    fi
}

part_bench_node() {
    bench_memory
    local -x DSOLVE_PYTHON=${DSOLVE_PYTHON:-$DS_PYTHON}
    local p=() np=$((DS_GPUS > 0 ? DS_GPUS : 1))
    [ -z "$DS_PEERS" ] || p=(--peer "$DS_PEERS/seed_peers.py")
    dsr bench_np1 1 bench all --plot "$DS_RAW/bench-node.bench_np1.svg" "${p[@]}"
    if [ "$np" -gt 1 ]; then
        dsr bench_np${np}_strong "$np" bench all --plot "$DS_RAW/bench-node.strong.svg"
        dsr bench_np${np}_weak "$np" bench all --scaling weak --plot "$DS_RAW/bench-node.weak.svg"
    fi
}

part_peers() {
    peers_solve
    peers_ann
    peers_sort
    peers_bench
}

part_scaling() {
    local np
    for np in 1 2 4 8; do
        [ "$np" -le "$DS_GPUS" ] || continue
        dsr solve_strong_np"$np" "$np" solve --rows 4000000 --cols 1000 --repeat 10
        dsr solve_residual_strong_np"$np" "$np" solve --rows 4000000 --cols 1000 --method residual --repeat 5
        if [ "$DS_GPU_MIB" -ge 100000 ]; then
            dsr solve_weak_np"$np" "$np" solve --rows $((np * 10000000)) --cols 1000 --repeat 5
        else
            skip solve_weak_np"$np" "10 M x 1 000 f64 a GPU is 80 GB; this GPU has $DS_GPU_MIB MiB"
        fi
        dsr ann_strong_np"$np" "$np" ann --rows 40000000 --test-rows 1000000 --neurons 2000 --repeat 3
        dsr ann_weak_np"$np" "$np" ann --rows $((np * 10000000)) --test-rows 1000000 --neurons 2000 --repeat 3
        dsr sort_strong_np"$np" "$np" sort --gen $((4 * G)) --dtype int32 --dist uniform --repeat 5 --verify
        dsr sort_weak_np"$np" "$np" sort --gen $((np * G)) --dtype int32 --dist uniform --repeat 5 --verify
    done
}

part_hdf5() {
    local np=$((DS_GPUS > 4 ? 4 : DS_GPUS > 0 ? DS_GPUS : 1)) dir
    dir=$(mktemp -d "${DSOLVE_SCRATCH:-/tmp}/dsolve-h5.XXXXXX") || { failed+=("hdf5/scratch"); return 0; }
    dsr file_gen "$np" gen --rows 1000000 --cols 1000 --seed 7 --output "$dir/problem.h5"
    dsr file_solve_np"$np" "$np" solve --input "$dir/problem.h5" --output "$dir/a.h5"
    rm -rf "$dir"
}

part_stream() {
    [ "$DS_GPUS" -ge 1 ] || { skip stream "no GPU here"; return 0; }
    if have_py torch; then run h2d_peer "$DS_PYTHON" jobs/h2d_peer.py; else skip h2d_peer "$DS_PYTHON has no torch"; fi
    local big=(--rows 4000000 --cols 1000 --seed 3)
    dsr host_gram 1 solve "${big[@]}" --method gram --device-memory 16G
    dsr host_cholesky 1 solve "${big[@]}" --method cholesky --device-memory 16G
    dsr device_gram 1 solve "${big[@]}" --method gram
    local dir
    dir=$(mktemp -d "${DSOLVE_SCRATCH:-/tmp}/dsolve-stream.XXXXXX") || { failed+=("stream/scratch"); return 0; }
    dsr file_gen 1 gen --rows 1000000 --cols 500 --seed 7 --output "$dir/p.h5"
    run file_read_rate "$DS_BUILD/tests/test_rows" --rate "$dir/p.h5" 33487
    dsr file_gram 1 solve --input "$dir/p.h5" --method gram --device-memory 1G --host-memory 2G
    if have_py h5py; then
        # Plain reads of the same hyperslabs, the best of three passes: h5py as a user writes it (default
        # chunk cache, a new array a slice), and into one buffer without the chunk cache (as dsolve reads).
        run file_h5py_rate "$DS_PYTHON" -c "
import h5py, time, json, numpy as np
for cache, name in ((1 << 20, 'default'), (0, 'no_chunk_cache')):
    f = h5py.File('$dir/p.h5', 'r', rdcc_nbytes=cache); X, y = f['X'], f['y']; n = X.shape[0]; c = 33487
    bx, by, best = np.empty((c, X.shape[1])), np.empty(c), 1e30
    for rep in range(3):
        t = time.time()
        for r in range(0, n, c):
            k = min(c, n - r)
            if cache: X[r:r + k]; y[r:r + k]
            else: X.read_direct(bx, np.s_[r:r + k], np.s_[0:k]); y.read_direct(by, np.s_[r:r + k], np.s_[0:k])
        best = min(best, time.time() - t)
    print(json.dumps({'reader': name, 'seconds': best, 'gbps': n * (X.shape[1] * 8 + 8) / best / 1e9}))"
    fi
    rm -rf "$dir"
}

# ann, logreg and sort on data larger than the device cap, each beside the same run in memory.
part_stream_cmds() {
    local dir gb only=" ${DSOLVE_STREAM_CMDS:-sort ann logreg sort30} "
    [ "$DS_GPUS" -ge 1 ] || { skip stream-cmds "no GPU here"; return 0; }
    if [[ $only == *" sort "* ]]; then
        dsr sort_2g_memory 1 sort --gen 2000000000 --verify
        dsr sort_2g_cub 1 sort --gen 2000000000 --cub-only
        dsr sort_2g_streamed 1 sort --gen 2000000000 --device-memory 2G --verify
    fi
    dir=$(mktemp -d "${DSOLVE_SCRATCH:-/tmp}/dsolve-cmds.XXXXXX") || { failed+=("stream-cmds/scratch"); return 0; }
    # Issue 13's ann: 500 M x 10 (a 44 GB file) with --device-memory 8G beside the same run in device memory
    # (test r and weights_digest in the two runs' JSON); 100 M x 10 and 2G where the scratch disk is short.
    local free_gb m=500 cap=8G
    free_gb=$(df -BG --output=avail "$dir" | awk 'NR == 2 { print int($1) }')
    [ "${free_gb:-0}" -ge 50 ] || { m=100 cap=2G; ds_log "stream-cmds: ${free_gb} GB free in $dir: ann on 100 M rows"; }
    if [[ $only == *" ann "* ]]; then
        dsr ann_gen_train 1 gen --kind ann --rows "${m}000000" --cols 10 --seed 1 --output "$dir/a.h5"
        dsr ann_gen_test 1 gen --kind ann --rows 1000000 --cols 10 --seed 2 --output "$dir/t.h5"
        dsr "ann_${m}m_memory" 1 ann --input "$dir/a.h5" --test "$dir/t.h5"
        dsr "ann_${m}m_streamed" 1 ann --input "$dir/a.h5" --test "$dir/t.h5" --device-memory "$cap"
        rm -f "$dir/a.h5" "$dir/t.h5"
    fi
    if [[ $only != *" logreg "* ]]; then
        :
    elif have_py h5py; then
        run logreg_gen "$DS_PYTHON" -c "
import numpy as np, h5py
n, d = 1280000, 784; rng = np.random.default_rng(5); W = rng.standard_normal((d, 10)).astype(np.float32)
with h5py.File('$dir/lr.h5', 'w') as f:
    X = f.create_dataset('X', (n, d), dtype='f4'); L = f.create_dataset('labels', (n,), dtype='i4')
    for a in range(0, n, 65536):
        x = rng.random((min(65536, n - a), d), dtype=np.float32); X[a:a + len(x)] = x
        L[a:a + len(x)] = np.argmax((x - 0.5) @ W, axis=1)"
        local lr=(logreg --input "$dir/lr.h5" --optimizer gd --iters 20)
        dsr logreg_4g_memory 1 "${lr[@]}"
        dsr logreg_4g_host 1 "${lr[@]}" --device-memory 2G
        dsr logreg_4g_file 1 "${lr[@]}" --device-memory 2G --host-memory 3G
    else
        skip logreg_stream "$DS_PYTHON has no h5py"
    fi
    rm -rf "$dir"
    gb=$(awk '/^MemTotal/ { print int($2 / 1048576) }' /proc/meminfo)
    if [[ $only != *" sort30 "* ]]; then
        :
    elif [ "$gb" -ge 300 ]; then
        dsr sort_30g_streamed 1 sort --gen 30000000000 --verify
    else
        skip sort_30g_streamed "3·10^10 int32 pin about 160 GB; this machine has $gb GiB of RAM"
    fi
}

# Beyond one GPU: X of 200 GB generated into pinned host memory, every pass across the bus.
part_big() {
    local gb
    [ "$DS_GPUS" -ge 1 ] || { skip big "no GPU here"; return 0; }
    gb=$(awk '/^MemTotal/ { print int($2 / 1048576) }' /proc/meminfo)
    [ "$gb" -ge 300 ] || { skip big "25 M x 1 000 f64 is 200 GB; this machine has $gb GiB of RAM"; return 0; }
    if have_py torch; then run h2d_peer "$DS_PYTHON" jobs/h2d_peer.py; else skip h2d_peer "$DS_PYTHON has no torch"; fi
    local big=(--rows 25000000 --cols 1000 --seed 3 --host-memory 300G)
    dsr big_gram 1 solve "${big[@]}" --method gram
    dsr big_cholesky 1 solve "${big[@]}" --method cholesky
}

part_cpu() {
    dsr solve_b100 1 solve --backend cpu --batch 100 --repeat 3
    peer numpy_solvebak_b100 1 numpy seed_peers.py solvebak --xp numpy --batch 100
    dsr solve_b1 1 solve --backend cpu --batch 1 --repeat 3
    peer numpy_solvebak_b1 1 numpy seed_peers.py solvebak --xp numpy --batch 1
    dsr solve_cholesky 1 solve --backend cpu --method cholesky --repeat 3
    if have_py numpy; then
        run numpy_normal_eq "$DS_PYTHON" jobs/normal_eq.py
    else
        skip numpy_normal_eq "$DS_PYTHON has no numpy"
    fi
    dsr ann_seed 1 ann --backend cpu --repeat 3
    peer numpy_ann 2 numpy seed_peers.py ann --xp numpy --vars 10
    dsr sort_i32_1e8 1 sort --backend cpu --gen 100000000 --dtype int32 --repeat 3 --verify
    peer numpy_sort_1e8 1 numpy seed_peers.py sort --n 100000000 --dtype int32
    if [ -n "$DS_FASHION" ]; then
        dsr logreg_default_np2 2 logreg --backend cpu --data "$DS_FASHION"
    else
        skip logreg_default_np2 "no Fashion-MNIST (DSOLVE_FASHION_DIR)"
    fi
}

# ---------------------------------------------------------------------------------------------------
# The job

# in_part PART FUNCTION: FUNCTION run as part PART (its records and raw files named after it).
in_part() {
    local part=$1 gpu_part=0
    "$2"
}

# finish: the summary and the raw archive, as they stand (after each part, and when stopped).
finish() {
    tar -czf "$out/raw.tar.gz" -C "$DS_RAW" . 2>/dev/null || ds_log "raw.tar.gz: not written"
    python3 jobs/summarize.py "$out" >/dev/null || ds_log "summary.md: not written"
}
trap 'ds_log "stopped by a signal"; finish; exit 143' TERM INT

ds_log "# measure.sh $(ds_quote "${parts[@]}"): $(date -u +%Y-%m-%dT%H:%M:%SZ), $DS_HOST, $DS_CORES cores," \
    "$DS_GPUS GPU(s)${DS_GPU_MODEL:+ ($DS_GPU_MODEL, $DS_GPU_MIB MiB)}, commit $DS_COMMIT (dirty: $DS_DIRTY)," \
    "peers: ${DS_PEERS:-none}, Fashion-MNIST: ${DS_FASHION:-none}, raw files: $DS_RAW"
info_done=0 built=0 build_failed=0
for part in "${parts[@]}"; do
    t0=$SECONDS
    ds_log "== $part"
    gpu_part=0
    case $part in solve | methods | methods-scaling | ann | sort | logreg | bench | bench-cases | peers | scaling | stream) gpu_part=1 ;; esac
    if [ "$gpu_part" = 1 ] && [ "$DS_GPUS" -eq 0 ]; then
        skip "$part" "no GPU here"
        continue
    fi
    case $part in build | peers) ;; *)
        # A part that runs dsolve builds it first when no build was asked for; never a stale binary
        # after a failed build.
        [ "$built" = 1 ] || [ -x "$DS_DSOLVE" ] || in_part build part_build
        if [ "$build_failed" = 1 ]; then
            skip "$part" "no dsolve: the build failed"
            continue
        fi
        if [ "$info_done" = 0 ] && [ "$part" != ctest ] && [ "$part" != ctest-all ]; then
            info_done=1
            in_part info part_info
        fi
        ;;
    esac
    case $part in
    ctest-all) part_ctest ;;
    bench-cases) part_bench_cases ;;
    bench-node) part_bench_node ;;
    stream-cmds) part_stream_cmds ;;
    sanitize-cli) part_sanitize_cli ;;
    memcheck-tests) part_memcheck_tests ;;
    methods-scaling) methods_scaling ;;
    *) "part_$part" ;;
    esac
    ds_log "$part: $((SECONDS - t0)) s"
    finish
done

status=0
if [ ${#failed[@]} -gt 0 ]; then
    ds_log "FAILED runs: ${failed[*]}"
    status=1
elif [ ${#cut[@]} -gt 0 ]; then
    ds_log "not run (deadline): ${cut[*]}"
    status=2
fi
finish
cat "$out/summary.md"
ds_log "measure.sh: ${SECONDS} s, status $status; outputs in $out"
[ -n "${DSOLVE_RAW_DIR:-}" ] || rm -rf "$DS_RAW"
exit $status
