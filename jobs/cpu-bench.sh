#!/usr/bin/env bash
# cpu-bench.sh [PEER_SCRIPT]: the CPU backend on the seed problem (100 000 x 1 000, 10 sweeps) against
# the seed's NumPy code run right after it on the same machine and cores. Prints one JSON per run.
# Example: jobs/cpu-bench.sh ../shared/peers/seed_peers.py
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peer=${1:-}
[ -x "$root/build/dsolve" ] || "$root/jobs/build.sh" "$root/build" >/dev/null
py=python3
python3 -c "import numpy" 2>/dev/null || py=/usr/bin/python3
for batch in 100 1; do
    "$root/build/dsolve" solve --backend cpu --batch "$batch" --repeat 3 --json --quiet
    [ -z "$peer" ] || "$py" "$peer" solvebak --xp numpy --batch "$batch"
done
