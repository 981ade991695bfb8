"""lstsq_peer.py: least-squares problems that dsolve and torch solve from the same HDF5 file, and torch's
side of the comparison, timed as dsolve times itself (one warm-up, then the median of --reps runs, a
device sync before each clock read).
  make --out F.h5 --rows M --cols N (--cond C | --corr RHO) [--seed S]
      --cond: X = U·diag(s)·Vᵀ with U, V random orthonormal and s geometric from 1 to 1/C (LAPACK's
      dqrt15 construction); --corr: X = sqrt(1−ρ)·U + sqrt(ρ)·c·1ᵀ with U, c uniform in [−0.5, 0.5) (the
      shape of dsolve's --corr). a_true uniform in [−0.5, 0.5); y = X·a_true. Writes /X, /y, /a_true.
      Built with torch on the GPU when there is one (numpy otherwise).
  torch --input F.h5: torch.linalg.lstsq (QR, the CUDA default) and the normal equations on the file's X
      and y; one JSON line each: peer, seconds, rel_residual, coef_error."""
import argparse, json, statistics, time

import h5py
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("what", choices=["make", "torch"])
p.add_argument("--out")
p.add_argument("--input")
p.add_argument("--rows", type=int, default=100_000)
p.add_argument("--cols", type=int, default=1000)
p.add_argument("--cond", type=float)
p.add_argument("--corr", type=float)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--reps", type=int, default=5)
a = p.parse_args()


def make():
    try:
        import torch
        dev = torch.device("cuda") if torch.cuda.is_available() else None
    except ImportError:
        dev = None
    m, n = a.rows, a.cols
    if dev is not None:
        g = torch.Generator(device=dev).manual_seed(a.seed)
        rand = lambda *s: torch.rand(*s, dtype=torch.float64, device=dev, generator=g)
        gauss = lambda *s: torch.randn(*s, dtype=torch.float64, device=dev, generator=g)
        orth = lambda A: torch.linalg.qr(A)[0]
        host = lambda t: t.cpu().numpy()
    else:
        rng = np.random.default_rng(a.seed)
        rand = lambda *s: rng.random(s)
        gauss = lambda *s: rng.standard_normal(s)
        orth = lambda A: np.linalg.qr(A)[0]
        host = lambda t: t
    if a.cond:
        s = 10.0 ** (-np.log10(a.cond) * np.arange(n) / max(n - 1, 1))
        s = torch.tensor(s, dtype=torch.float64, device=dev) if dev is not None else s
        X = (orth(gauss(m, n)) * s) @ orth(gauss(n, n)).T
    else:
        rho = a.corr or 0.0
        X = (rho ** 0.5) * (rand(m, 1) - 0.5) + ((1 - rho) ** 0.5) * (rand(m, n) - 0.5)
    at = rand(n) - 0.5
    y = X @ at
    with h5py.File(a.out, "w") as f:
        f["X"], f["y"], f["a_true"] = host(X), host(y), host(at)


def run_torch():
    import torch
    dev = torch.device("cuda")
    with h5py.File(a.input, "r") as f:
        X = torch.tensor(f["X"][...], device=dev)
        y = torch.tensor(f["y"][...], device=dev).reshape(-1, 1)
        at = torch.tensor(f["a_true"][...], device=dev).reshape(-1, 1)

    def med(fn):
        fn(); torch.cuda.synchronize()
        ts = []
        for _ in range(a.reps):
            torch.cuda.synchronize(); t = time.perf_counter(); out = fn(); torch.cuda.synchronize()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts), out

    def chol():
        L = torch.linalg.cholesky(X.T @ X)
        return torch.cholesky_solve(X.T @ y, L)

    for name, fn in [("torch.linalg.lstsq (QR)", lambda: torch.linalg.lstsq(X, y).solution),
                     ("torch normal equations (GEMM + Cholesky)", chol)]:
        try:
            sec, sol = med(fn)
            rel = float(torch.linalg.norm(y - X @ sol) / torch.linalg.norm(y))
            err = float(torch.linalg.norm(sol - at) / torch.linalg.norm(at))
            print(json.dumps(dict(peer=name, input=a.input, rows=X.shape[0], cols=X.shape[1], seconds=sec,
                                  rel_residual=rel, coef_error=err)), flush=True)
        except RuntimeError as e:  # the normal equations fail on an ill-conditioned X: say so
            print(json.dumps(dict(peer=name, input=a.input, failed=str(e).splitlines()[0])), flush=True)


make() if a.what == "make" else run_torch()
