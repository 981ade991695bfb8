#!/usr/bin/env bash
# gpu-all.sh OUT_DIR [PEER] [FASHION_DIR] [PARTS]: the device job for ann, sort, logreg and bench: builds
# build-gpu (incrementally), then the comma-separated PARTS in order (default: all of them but quick):
#   ctest      every test;  ctest-gpu  the gpu-labelled tests only
#   quick      one short run of each command on 1 and on all GPUs
#   ann, sort, logreg, bench   jobs/gpu-<part>.sh with the peer, into OUT_DIR/<part>/
# A machine's 10-minute limit per call fits "ctest,ann,logreg" and then "sort,bench" on a warm machine.
# Example: jobs/gpu-all.sh /tmp/out ../shared/peers/seed_peers.py /usr/share/datasets/fashion-mnist ctest,ann
set -uo pipefail
out=${1:?usage: gpu-all.sh OUT_DIR [PEER] [FASHION_DIR] [quick|full]}
peer=${2:-}
fashion=${3:-/usr/share/datasets/fashion-mnist}
parts=${4:-ctest,ann,sort,logreg,bench}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off: required on shared hosts
ngpu=$(nvidia-smi -L | grep -c '^GPU')
nvidia-smi -L >"$out/gpus.txt"
cd "$root"

echo "== build"
SECONDS=0
jobs/build.sh "$root/build-gpu" -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "built in ${SECONDS}s"

for part in ${parts//,/ }; do
    SECONDS=0
    case $part in
    ctest | ctest-gpu)
        echo "== $part"
        labels=()
        [ "$part" = ctest-gpu ] && labels=(-L gpu)
        (cd build-gpu && ctest -j 4 --output-on-failure --timeout 300 "${labels[@]}" ${CTEST_ARGS:-}) >"$out/$part.log" 2>&1
        grep -E "tests passed|tests failed|\(Failed|Timeout|\*\*\*" "$out/$part.log" | tail -25
        ;;
    quick)
        d="$root/build-gpu/dsolve"
        for np in 1 $ngpu; do
            echo "== quick runs, $np GPU(s)"
            timeout 120 mpirun -np $np --bind-to none -x NCCL_NVLS_ENABLE "$d" ann --repeat 3 2>&1 | tail -5
            timeout 120 mpirun -np $np --bind-to none -x NCCL_NVLS_ENABLE "$d" ann --idx "$fashion" --classes 10 --neurons 2000 2>&1 | tail -4
            timeout 120 mpirun -np $np --bind-to none -x NCCL_NVLS_ENABLE "$d" sort --gen 100000000 --repeat 3 --verify 2>&1 | tail -6
            timeout 120 mpirun -np $np --bind-to none -x NCCL_NVLS_ENABLE "$d" logreg --data "$fashion" 2>&1 | tail -4
        done
        ;;
    ann | sort | logreg | bench)
        echo "== $part"
        case $part in
            ann) jobs/gpu-ann.sh "$out/ann" "$peer" "$fashion" ;;
            logreg) DSOLVE_FASHION_DIR="$fashion" jobs/gpu-logreg.sh "$out/logreg" ;;
            *) DSOLVE_FASHION_DIR="$fashion" jobs/gpu-$part.sh "$out/$part" "$peer" ;;
        esac >"$out/$part.log" 2>&1
        grep -E "FAILED" "$out/$part.log"
        ;;
    *) echo "unknown part $part" ;;
    esac
    echo "$part: ${SECONDS}s"
done
