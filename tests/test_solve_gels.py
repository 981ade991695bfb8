#!/usr/bin/python3
"""test_solve_gels.py DSOLVE MPIEXEC [--backend cpu|cuda] [--methods M,..] [--cases C,..] [--ranks R,..] [--jobs J]

LAPACK's xGELS matrix types as a test table for `dsolve solve`. LAPACK tests its least-squares driver dgels
(TESTING/LIN: ddrvls, with the generators dqrt13 and dqrt15 and the ratios dqrt16 and dqrt17) on random
matrices that are well conditioned, scaled towards overflow and underflow, and rank deficient, and accepts an
answer by dqrt17's ratio, here
    ||X'r|| / (||X|| alpha eps n),  r = y - X a,  alpha = ||r||, or ||y|| where the residual is zero,
(dqrt17 divides by max(m, n) where this divides by n), which is O(1) exactly when r is orthogonal to range(X)
to rounding, whatever the sizes of X, y and a: a backward-stable solver meets it, a wrong answer does not.
It is taken for X and for X with columns of norm 1, and the larger counts (see certificate()).
Every method of dsolve meets each type (our own generators, after LAPACK's) on several rank counts, and must
either earn its exit 0 or refuse cleanly:
  - an exit 0 is earned: the ratio < 30, with r computed here in extended precision (long double, X and y
    divided by powers of two) from /a as written; no NaN in /a, its attributes or the JSON (so a rank-deficient
    system never gives NaN coefficients); rel_residual as written matches the one recomputed here; where the
    table says H, SolveBak may miss the ratio but must then not say "converged" (nothing prints a success it
    did not earn);
  - a refusal is exit 4 with one line on stderr naming the problem, and no output file (nor a .part one);
  - on the well-conditioned cases the coefficients agree across rank counts (1e-10, weighted by column norms).
EXPECT is the design, including what is still being written (qr, --block-solve, auto); a row the program does
not meet prints FAIL with its numbers and makes the exit status 1. Needs numpy and h5py; exit 77 (skipped)
without them, and with --backend cuda when rank 0 has no GPU of its own.
"""
import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import h5py
    import numpy as np
except ImportError as e:
    # The system's python3 may lack them where another python3 on the PATH has them (the GPU machines),
    # or the other way round (a pyenv python3 here): run again under the first one that has both.
    import os
    import shutil
    for py in (shutil.which("python3"), "/usr/bin/python3"):
        if py and os.path.abspath(py) != sys.executable and not os.environ.get("DS_GELS_REEXEC") \
                and subprocess.run([py, "-c", "import h5py, numpy"], capture_output=True).returncode == 0:
            os.environ["DS_GELS_REEXEC"] = "1"
            os.execv(py, [py, *sys.argv])
    print(f"test_solve_gels: {e}: skipped")
    sys.exit(77)

EPS = np.finfo(np.float64).eps
RATIO_MAX = 30.0          # LAPACK's usual threshold for these ratios
AGREE_TOL = 1e-10         # coefficients across rank counts, well-conditioned cases
REFUSAL = re.compile(r"singular|rank deficient|ill-conditioned|overflow|underflow|range")
METHODS = {  # name -> the options of `dsolve solve`
    "residual": ["--method", "residual"],
    "gram": ["--method", "gram"],
    "gram-block": ["--method", "gram", "--block-solve"],
    "cholesky": ["--method", "cholesky"],
    "cholesky-low": ["--method", "cholesky", "--gram-precision", "low"],
    "qr": ["--method", "qr"],
    "auto": ["--method", "auto"],
}
# SolveBak's options: blocks of 10 columns (3 or 4 blocks here), at most 500 sweeps, and --tol 1e-14 where the relative
# residual can get there (y in range), else 0 (all the sweeps): its stall test, the relative change of ||r||
# over a sweep, is second order in the error of a, so --tol 1e-14 stops the well case after 15 sweeps with a
# ratio of 1.8e6 ("stalled", which claims nothing).
SOLVEBAK = {"residual", "gram", "gram-block"}


def solvebak_options(zero_residual):
    return ["--iters", "500", "--batch", "10", "--tol", "1e-14" if zero_residual else "0"]


CPU_RANKS = {"residual": (1, 3), "gram": (1, 4), "gram-block": (1, 3),
             "cholesky": (1, 2, 3, 4), "cholesky-low": (), "qr": (1, 2, 3, 4), "auto": (1, 2, 3, 4)}
# None on the CPU for cholesky-low: there cholesky's own --gram-precision auto is already the low precision
# (float), so that column would repeat cholesky's runs (--ranks does not add them back).

# The contract, per case and method. P: exit 0 that earns the ratio. H: P, or exit 0 with a stop reason other
# than "converged", or a clean refusal (SolveBak beyond what it can do). R: a clean refusal (exit 4).
# PR: P or R. Why: cholesky equilibrates its columns but squares cond(X), so it refuses cond 1e8 and beyond;
# qr is exact up to cond 1e12 and refuses a rank-deficient X; auto always answers or refuses rank deficiency;
# X's columns and y are rescaled by powers of two as read (each column by its own where its largest magnitude
# lies beyond 2^±500), so near-overflow and subnormal values, and columns 1e300 apart (cols_scaled,
# tiny_column), are the well case; a column that is 1e-170 times another (tiny_dup) is then a duplicate.
# cholesky-low (X'X in FP16 with scaled columns, refined; run on GPUs only, see CPU_RANKS) is held to
# cholesky's column: where its attempt is set aside, X'X in double answers (and it must say why).
EXPECT = {         # residual gram gram-block cholesky cholesky-low qr auto
    "well":         "P  P  P  P  P  P  P",
    "y_in_range":   "P  P  P  P  P  P  P",
    "y_zero":       "P  P  P  P  P  P  P",
    "cols_scaled":  "P  P  P  P  P  P  P",
    "rows_scaled":  "H  H  H  P  P  P  P",
    "cond_1e4":     "H  H  H  P  P  P  P",
    "cond_1e8":     "H  H  H  R  R  P  P",
    "cond_1e12":    "H  H  H  R  R  P  P",
    "dup_column":   "H  H  H  R  R  R  PR",
    "sum_column":   "H  H  H  R  R  R  PR",
    "near_overflow":"P  P  P  P  P  P  P",
    "subnormal":    "P  P  P  P  P  P  P",
    "hidden_cond":  "H  H  H  R  R  P  P",
    "tiny_column":  "P  P  P  P  P  P  P",
    "tiny_dup":     "H  H  H  R  R  R  PR",
}


# ---- the problems ------------------------------------------------------------------------------------------

def orthonormal(rng, m, n):
    """m x n with orthonormal columns: Q of a Gaussian matrix's QR (signs fixed by R's diagonal)."""
    q, r = np.linalg.qr(rng.standard_normal((m, n)))
    return q * np.sign(np.diag(r))


def y_outside(rng, X):
    """The generic right-hand side: X a plus a component orthogonal to range(X) of the same norm."""
    Xa = X @ rng.standard_normal(X.shape[1])
    q = np.linalg.qr(X)[0]
    w = rng.standard_normal(X.shape[0])
    w -= q @ (q.T @ w)
    return Xa + w * (np.linalg.norm(Xa) / np.linalg.norm(w))


def svd_matrix(rng, m, n, cond):
    """U diag(s) V' with s geometric from 1 to 1/cond, U (m x n) and V (n x n) random orthonormal."""
    return (orthonormal(rng, m, n) * np.geomspace(1.0, 1.0 / cond, n)) @ orthonormal(rng, n, n).T


def gen_well(rng, m, n):
    X = rng.standard_normal((m, n))
    return X, y_outside(rng, X)


def gen_y_in_range(rng, m, n):
    X = rng.standard_normal((m, n))
    return X, X @ rng.standard_normal(n)


def gen_y_zero(rng, m, n):
    return rng.standard_normal((m, n)), np.zeros(m)


def gen_cols_scaled(rng, m, n):
    X, y = gen_well(rng, m, n)
    X[:, 1::7] *= 1e150
    X[:, 4::7] *= 1e-150
    return X, y


def gen_rows_scaled(rng, m, n):
    """Rows of [X y] weighted by 1e150 (a quarter, so that they carry a residual of their own), 1e-150 (a
    quarter) and 1: a weighted problem whose heavy rows decide the answer."""
    X, y = gen_well(rng, m, n)
    d = np.ones(m)
    rows = rng.permutation(m)
    d[rows[: m // 4]] = 1e150
    d[rows[m // 4: m // 2]] = 1e-150
    return X * d[:, None], y * d


def gen_cond(cond):
    """cond(X) = cond; y generic up to 1e8, in range(X) at 1e12: with a residual orthogonal to range(X) no
    double-precision solver meets the ratio there (LAPACK's SVD solver gets 1e4), and dqrt15 uses y in range."""
    def gen(rng, m, n):
        X = svd_matrix(rng, m, n, cond)
        return X, (y_outside(rng, X) if cond < 1e10 else X @ rng.standard_normal(n))
    return gen


def gen_dup_column(rng, m, n):
    X = rng.standard_normal((m, n))
    X[:, 6] = X[:, 5]  # both in the same block of 10 (the block solve's Gram is singular)
    return X, y_outside(rng, X)


def gen_sum_column(rng, m, n):
    X = rng.standard_normal((m, n))
    X[:, 12] = X[:, 10] + X[:, 11]
    return X, y_outside(rng, X)


def gen_scaled_to(size):
    """The well case with every value of X and y multiplied by one factor: max |X| = size."""
    def gen(rng, m, n):
        X, y = gen_well(rng, m, n)
        s = size / np.max(np.abs(X))
        return X * s, y * s
    return gen


def gen_hidden_cond(rng, m, n):
    """An ill-conditioned X that its Cholesky factor's diagonal does not show: Q·(I − 0.6·U), U the strict
    upper triangle of ones (Kahan's matrix unscaled), has cond(X) about 8e8 at 40 columns while the
    equilibrated factor's diagonal spans a factor under 4."""
    K = np.eye(n) - 0.6 * np.triu(np.ones((n, n)), 1)
    X = orthonormal(rng, m, n) @ K
    return X, X @ rng.standard_normal(n)  # y in range: with a residual, cond² makes any answer's error O(1)


def gen_tiny_column(rng, m, n):
    """The well case with one column scaled by 1e-170 (within double's range, its squares not) and y leaning
    on it: ||X_3||² underflows to 0, which a method must not take for a zero column."""
    X = rng.standard_normal((m, n))
    y = X @ rng.standard_normal(n) + 0.1 * rng.standard_normal(m)
    X[:, 3] *= 1e-170
    return X, y


def gen_tiny_dup(rng, m, n):
    """A column that is 1e-170 times an earlier one: rank deficient, with ||X_5||² underflowing to 0."""
    X = rng.standard_normal((m, n))
    X[:, 5] = 1e-170 * X[:, 2]
    return X, y_outside(rng, X)


# name: (m, n, generator, zero residual); the seed is 1988 + the position in this list.
CASES = {
    "well": (400, 30, gen_well, False),
    "y_in_range": (350, 25, gen_y_in_range, True),
    "y_zero": (300, 20, gen_y_zero, True),
    "cols_scaled": (450, 30, gen_cols_scaled, False),
    "rows_scaled": (480, 24, gen_rows_scaled, False),
    "cond_1e4": (500, 30, gen_cond(1e4), False),
    "cond_1e8": (520, 36, gen_cond(1e8), False),
    "cond_1e12": (600, 40, gen_cond(1e12), True),
    "dup_column": (400, 32, gen_dup_column, False),
    "sum_column": (360, 28, gen_sum_column, False),
    "near_overflow": (420, 30, gen_scaled_to(1e300), False),
    "subnormal": (440, 30, gen_scaled_to(1e-310), False),
    "hidden_cond": (400, 40, gen_hidden_cond, True),
    "tiny_column": (400, 12, gen_tiny_column, False),
    "tiny_dup": (300, 10, gen_tiny_dup, False),
}
WELL_CONDITIONED = {"well", "y_in_range", "y_zero", "cols_scaled", "near_overflow", "subnormal"}
# Cases whose ratio alone would pass a wrong answer (the normal equations' answer to hidden_cond meets it while
# its coefficients are far off): the relative error of the coefficients against NumPy's lstsq (SVD) is held to
# this wherever a method answers, but for SolveBak's columns (H), which may stop early.
# The reference solves with X's columns scaled by their largest magnitudes, and the coefficients are compared so
# scaled (the answer does not depend on the scales, and lstsq's SVD would take a column of 1e-170 for a null
# direction).
COEF_TOL = {"hidden_cond": 1e-4, "tiny_column": 1e-6}


def make_case(name, folder):
    """Writes the case's X and y to folder/NAME.h5; returns (path, X, y)."""
    m, n, gen, _ = CASES[name]
    X, y = gen(np.random.default_rng(1988 + list(CASES).index(name)), m, n)
    path = folder / f"{name}.h5"
    with h5py.File(path, "w") as f:
        f["X"], f["y"] = X, y
    return path, X, y


# ---- the checks --------------------------------------------------------------------------------------------

def pow2_scaled(v):
    """v / 2^e as long double (exact), e the binary exponent of max |v| (0 for v = 0)."""
    big = float(np.max(np.abs(v)))
    e = int(np.frexp(big)[1]) if big > 0 else 0
    return np.ldexp(v, -e).astype(np.longdouble), e


def lnorm(v):
    return float(np.sqrt(np.sum(v * v)))


def certificate(X, y, a, zero_residual):
    """The test ratio, the recomputed relative residual and the column norms, in units where max |X| and
    max |y| are about 1. The ratio is dqrt17's (alpha = ||r||, or ||y|| for a zero-residual problem, or 1 when
    y = 0) for X and for X with its columns scaled to norm 1, whichever is larger: the answer does not depend
    on the columns' scales, and the normwise ratio alone would not see columns of 1e-150 left unfitted."""
    Xs, ex = pow2_scaled(X)
    ys, ey = pow2_scaled(y)
    As = np.ldexp(a.astype(np.longdouble), ex - ey)
    r = ys - Xs @ As
    nr, ny = lnorm(r), lnorm(ys)
    alpha = (ny or 1.0) if zero_residual else nr
    Xl = np.ldexp(X, -ex).astype(np.longdouble)
    colnorms = np.sqrt(np.sum(Xl * Xl, axis=0))  # in long double: a column of 1e-300 has squares in range
    ratio = 0.0
    for d in (np.ones_like(colnorms), np.where(colnorms > 0, colnorms, 1.0)):
        xtr = lnorm((Xs.T @ r) / d)
        ratio = max(ratio, xtr / (np.linalg.norm((Xl / d).astype(np.float64), 2) * alpha * EPS * X.shape[1]) if xtr else 0.0)
    rel = nr / ny if ny else (0.0 if nr == 0 else math.inf)
    return ratio, rel, colnorms


def stderr_lines(text):
    """stderr without mpirun's own notices (the blocks between lines of dashes)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("-----"):
            inside = not inside
        elif line.strip() and not inside:
            out.append(line)
    return out


def check_refusal(o):
    """Problems with a run that should have refused."""
    bad = []
    if o["rc"] != 4:
        bad.append(f"exit {o['rc']}, want 4")
    if len(o["err"]) != 1:
        bad.append(f"{len(o['err'])} lines on stderr, want 1")
    elif not REFUSAL.search(o["err"][0]):
        bad.append("the message names no problem")
    if o["left"]:
        bad.append(f"left {', '.join(o['left'])}")
    return bad


def check_accept(o, method, backend, np_, honest):
    """Problems with a run that should have succeeded (exit 0, earned)."""
    if o["rc"] != 0:
        return [f"exit {o['rc']}, want 0"]
    j, attrs = o["json"], o["attrs"]
    if j is None or attrs is None:
        return ["no JSON object on stdout" if j is None else "no /a in the output file"]
    bad = [f"left {', '.join(o['left'])}"] if o["left"] else []
    ratio, rel, _ = o["cert"]
    values = [*o["a"], attrs["rel_residual"], attrs["normal_residual"], j.get("rel_residual"), j.get("normal_residual")]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        bad.append("NaN, Inf or a missing number in /a, its attributes or the JSON")
    if not abs(attrs["rel_residual"] - rel) <= 1e-6 * rel + 1e-13:
        bad.append(f"rel_residual written {attrs['rel_residual']:.6g}, recomputed {rel:.6g}")
    claims = attrs["stop_reason"] == "converged"
    if not ratio < RATIO_MAX and not (honest and not claims):
        bad.append(f"ratio {ratio:.3g} >= {RATIO_MAX:g}" + (" while saying converged" if claims else ""))
    base = METHODS[method][1]
    want = {"backend": backend, "ranks": np_, **({"block_solve": True} if "--block-solve" in METHODS[method] else {})}
    bad += [f"JSON {k} {j.get(k)!r}, want {v!r}" for k, v in want.items() if j.get(k) != v]
    if "--gram-precision" in METHODS[method] and j.get("gram_precision") == "double" and not j.get("gram_fallback"):
        bad.append("X'X in double where the lower precision was asked for, without gram_fallback")
    if base == "auto" and not j.get("method_reason"):
        bad.append("auto without method_reason")
    elif base != "auto" and j.get("method") != base:
        bad.append(f"JSON method {j.get('method')!r}, want {base!r}")
    return bad


def judge(expect, o, method, backend, np_):
    """Problems with one run against its expectation (P, H, R or PR)."""
    if expect == "R" or (expect in ("PR", "H") and o["rc"] == 4):
        return check_refusal(o)
    return check_accept(o, method, backend, np_, expect == "H")


def describe(o):
    """The run's numbers: exit status, then the ratio and residuals of an answer, or the message."""
    text = f"exit {o['rc']}"
    if o["attrs"]:
        ratio, rel, _ = o["cert"]
        text += (f"  ratio {ratio:8.3g}  rel_residual {rel:.3e} (written {o['attrs']['rel_residual']:.3e})"
                 f"  stop {o['attrs']['stop_reason']}" + (f"  ({o['json'].get('method')}" if o["json"] else "")
                 + (f", X'X in {o['json']['gram_precision']}" if o["json"] and "gram_precision" in o["json"] else "")
                 + (")" if o["json"] else ""))
    return text + (f"  {o['err'][0][:120]}" if o["err"] else "")


# ---- running -----------------------------------------------------------------------------------------------

def mpirun(args, np_, argv, timeout=300):
    env = dict(os.environ)
    for k, v in (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                 ("OMPI_MCA_rmaps_base_oversubscribe", "1"), ("OPENBLAS_NUM_THREADS", "1"), ("NCCL_NVLS_ENABLE", "0")):
        env.setdefault(k, v)
    cmd = [args.mpiexec, "-np", str(np_), "--bind-to", "none", "-x", "NCCL_NVLS_ENABLE", args.dsolve, *argv]
    # A session-directory base of its own: Open MPI 4 removes the shared /tmp/ompi.HOST.UID when a run that
    # ends leaves it empty, under a run beside it that is creating its own there (tests/CMakeLists.txt).
    session = tempfile.mkdtemp(prefix="mpi-session.")
    env["OMPI_MCA_orte_tmpdir_base"] = session
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"dsolve: hung (killed after {timeout} s)")
    finally:
        shutil.rmtree(session, ignore_errors=True)


def read_answer(path):
    """/a and the attributes checked here, from an output file."""
    with h5py.File(path, "r") as f:
        at = f["a"].attrs
        stop = at.get("stop_reason", b"")
        return f["a"][...], {"rel_residual": float(at.get("rel_residual", math.nan)),
                             "normal_residual": float(at.get("normal_residual", math.nan)),
                             "stop_reason": stop.decode() if isinstance(stop, bytes) else str(stop)}


def solve(args, case, method, np_, work):
    """One run: exit status, stderr lines, the JSON, /a with its attributes and certificate, files left."""
    out = work / f"{case['name']}-{method}-np{np_}"
    out.mkdir()
    opts = METHODS[method] + (solvebak_options(case["zero_residual"]) if method in SOLVEBAK else [])
    p = mpirun(args, np_, ["solve", "--input", str(case["path"]), *opts, "--backend", args.backend,
                           "--output", str(out / "A.h5"), "--json", "--quiet"])
    o = {"rc": p.returncode, "err": stderr_lines(p.stderr), "json": None, "attrs": None}
    try:
        o["json"] = json.loads(p.stdout)
    except ValueError:
        pass
    if p.returncode == 0 and (out / "A.h5").exists():
        o["a"], o["attrs"] = read_answer(out / "A.h5")
        o["cert"] = certificate(case["X"], case["y"], o["a"], case["zero_residual"])
    o["left"] = sorted(x.name for x in out.iterdir() if x.name != "A.h5" or p.returncode != 0)
    return o


def agreement(a, ref, colnorms):
    """||D (a - ref)|| / ||D ref||, D the column norms (0 when both are 0)."""
    d = np.asarray(colnorms, dtype=np.longdouble)
    num, den = lnorm(d * (a - ref)), lnorm(d * ref)
    return num / den if den else (0.0 if num == 0 else math.inf)


def run_group(args, case, method, work):
    """The runs of one case and method over the rank counts: (passed, printed line) each."""
    expect = case["expect"][method]
    lines, ref = [], None
    counts = (args.ranks or CPU_RANKS[method]) if args.backend == "cpu" and CPU_RANKS[method] else \
        () if args.backend == "cpu" else (args.ranks or args.gpu_ranks)
    for np_ in counts:
        o = solve(args, case, method, np_, work)
        bad, text = judge(expect, o, method, args.backend, np_), describe(o)
        if case["name"] in WELL_CONDITIONED and o["attrs"] and not bad:
            if ref is None:
                ref = (np_, o["a"])
            else:
                diff = agreement(o["a"], ref[1], o["cert"][2])
                text += f"  vs np{ref[0]} {diff:.1e}"
                bad += [f"coefficients differ from np{ref[0]} by {diff:.2g}"] if not diff <= AGREE_TOL else []
        if case["name"] in COEF_TOL and expect != "H" and o["attrs"] and not bad:
            if "lstsq" not in case:
                cmax = np.max(np.abs(case["X"]), axis=0)
                case["cmax"] = np.where(cmax > 0, cmax, 1.0)
                case["lstsq"] = np.linalg.lstsq(case["X"] / case["cmax"], case["y"], rcond=None)[0]
            err = lnorm(o["a"] * case["cmax"] - case["lstsq"]) / lnorm(case["lstsq"])  # scaled coefficients
            text += f"  coefficients {err:.1e} from lstsq's"
            bad += [f"coefficients {err:.2g} from lstsq's, want at most {COEF_TOL[case['name']]:g}"] \
                if not err <= COEF_TOL[case["name"]] else []
        if expect == "H" and o["attrs"] and not bad and o["cert"][0] >= RATIO_MAX:
            text += "  (misses the ratio and does not claim convergence)"
        lines.append((not bad, f"{'ok' if not bad else 'FAIL':4} {case['name']:13} {method:10} np{np_} [{expect}]"
                               f"  {text}" + (f"\n       -> {'; '.join(bad)}" if bad else "")))
    return lines


def gpu_rank_counts(args):
    """1, and 2 and 4 where that many ranks each have a GPU of their own; exits 77 when rank 0 has none."""
    counts = []
    for k in (1, 2, 4):
        p = mpirun(args, k, ["info", "--json"], timeout=120)
        try:
            ok = p.returncode == 0 and all(r["device"] >= 0 for r in json.loads(p.stdout)["rank_info"])
        except (ValueError, KeyError):
            ok = False
        if ok:
            counts.append(k)
        elif k == 1:
            print("test_solve_gels: rank 0 has no GPU of its own: skipped")
            sys.exit(77)
    return counts


def parse_args():
    ap = argparse.ArgumentParser(description="LAPACK's xGELS matrix types as a test table for dsolve solve")
    ap.add_argument("dsolve")
    ap.add_argument("mpiexec", nargs="?", default="mpirun")
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated, of " + ",".join(METHODS))
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, of " + ",".join(CASES))
    ap.add_argument("--ranks", default="", help="rank counts for every method (default: per method on cpu; "
                                               "1, 2, 4 as GPUs allow on cuda)")
    ap.add_argument("--jobs", type=int, default=0, help="runs at once (default $DSOLVE_GELS_JOBS, else 2 on cpu, "
                                                        "4 on cuda)")
    args = ap.parse_args()
    args.methods, args.cases = args.methods.split(","), args.cases.split(",")
    unknown = [x for x in args.methods if x not in METHODS] + [x for x in args.cases if x not in CASES]
    if unknown:
        ap.error(f"unknown method or case: {', '.join(unknown)}")
    args.ranks = [int(x) for x in args.ranks.split(",") if x]
    # On cuda a run is mostly its start-up (CUDA, cuBLAS, NCCL): the 216 runs took over 950 s one at a time on
    # 4 H100s (2026-11-26); four at once share the GPUs, whose problems are a few hundred rows.
    # DSOLVE_GELS_JOBS: the runs at once when the test is run as it is (ctest; under a sanitizer, more).
    args.jobs = args.jobs or int(os.environ.get("DSOLVE_GELS_JOBS", "0")) or (2 if args.backend == "cpu" else 4)
    args.dsolve = os.path.realpath(args.dsolve)
    return args


def main():
    args = parse_args()
    if args.backend == "cuda":
        args.gpu_ranks = gpu_rank_counts(args)
    t0, results = time.time(), []
    with tempfile.TemporaryDirectory(prefix="solve_gels.") as tmp:
        work = Path(tmp)
        cases = []
        for name in args.cases:
            path, X, y = make_case(name, work)
            expect = dict(zip(METHODS, EXPECT[name].split()))
            cases.append({"name": name, "path": path, "X": X, "y": y, "zero_residual": CASES[name][3],
                          "expect": expect})
        groups = [(c, m) for c in cases for m in args.methods]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for lines in pool.map(lambda g: run_group(args, g[0], g[1], work), groups):
                for ok, line in lines:
                    print(line, flush=True)
                    results.append((ok, line.split()[1:4]))
    failed = [" ".join(r) for ok, r in results if not ok]
    if failed:
        print(f"failed ({len(failed)}): {'; '.join(failed)}")
    print(f"{len(results)} runs on {args.backend} in {time.time() - t0:.0f} s")
    print(f"test_solve_gels: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
