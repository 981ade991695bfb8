"""normal_eq.py: what a NumPy user solves least squares with on the CPU: the normal equations,
np.linalg.solve(X.T @ X, X.T @ y), on the seed notebook's problem (X uniform in [-0.5, 0.5), y = X·a, the
seed's generator), timed as dsolve times itself: one warm-up, then the median of --reps runs. One JSON
line: peer, rows, cols, seconds, rel_residual.
  python3 jobs/normal_eq.py [--obs 100000] [--vars 1000] [--reps 3] [--seed 0]"""
import argparse, json, statistics, time
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--obs", type=int, default=100_000)
p.add_argument("--vars", type=int, default=1000)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
rng = np.random.default_rng(a.seed)
x = rng.random((a.obs, a.vars)) - 0.5
y = x @ (rng.random(a.vars) - 0.5)
solve = lambda: np.linalg.solve(x.T @ x, x.T @ y)
solve()
ts = []
for _ in range(a.reps):
    t = time.perf_counter(); coef = solve(); ts.append(time.perf_counter() - t)
print(json.dumps(dict(peer="numpy normal equations (np.linalg.solve(X.T @ X, X.T @ y))", rows=a.obs, cols=a.vars,
                      seconds=statistics.median(ts),
                      rel_residual=float(np.linalg.norm(y - x @ coef) / np.linalg.norm(y)))), flush=True)
