"""summarize.py OUTDIR: the summary of a jobs/measure.sh run (standard library only).

Reads OUTDIR/results.jsonl (the records jobs/record.py appends) and writes OUTDIR/summary.md: per
workload the figures docs/performance.md keeps, each beside the peer measured in the same job and the
ratio; scaling over GPUs (speedup over one GPU for strong runs, per-GPU efficiency for weak ones);
ctest's verdict; the peers; every run with its command as run.

Ratios are peer time / dsolve time (above 1: dsolve is faster), or dsolve against a reference in the
same run (cuBLAS alone, CUB alone, the device copy) as that reference's rate / time says."""
import json
import os
import re
import sys

# Ceilings measured on an H200 (../shared/DEVICE.md, 2026-11-21); used only where the GPU is an H200.
H200_DGEMM = 64.8e12

# ---------------------------------------------------------------------------------------------------
# Helpers


class Job:
    """The records of one results.jsonl, looked up by part and name."""

    def __init__(self, path):
        self.recs = []
        with open(path) as f:
            for line in f:
                if line.strip():
                    self.recs.append(json.loads(line))

    def all(self, part, name):
        return [r for r in self.recs if r["name"] == name and (part is None or r["part"] == part)]

    def get(self, part, name):
        """The result of the run, or None where it did not run or failed."""
        for r in self.all(part, name):
            if r.get("ok") and isinstance(r.get("result"), dict):
                return r["result"]
        return None

    def rec(self, part, name):
        found = self.all(part, name)
        return found[0] if found else None

    def peer(self, name, key=None, value=None):
        """A peer's result from any part of this job (a peer runs in its workload's part or in peers)."""
        for r in self.recs:
            res = r.get("result")
            if r["name"] == name and r.get("ok") and isinstance(res, dict) and (key is None or res.get(key) == value):
                return res
        return None

    def parts(self):
        seen = []
        for r in self.recs:
            if r["part"] not in seen:
                seen.append(r["part"])
        return seen


def t(s):
    """A time in seconds, in ms below one second."""
    if s is None:
        return "—"
    return f"{s * 1e3:.4g} ms" if s < 1 else f"{s:.4g} s"


def x(r):
    """A ratio with three significant digits, trailing zeros kept."""
    if r is None:
        return "—"
    return f"{r:.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 10 else f"{r:.2f}×" if r >= 1 else f"{r:.3f}×"


def rate(v, unit):
    """A bench rate in its unit, GFLOP/s above 1000 as TFLOP/s."""
    if v is None:
        return "—"
    if unit == "GFLOP/s" and v >= 1000:
        return f"{v / 1e3:.4g} TFLOP/s"
    return f"{v:.4g} {unit}"


def is_peer(rec):
    """A record of a peer script's run (its result has the peer's own keys)."""
    res = rec.get("result")
    return isinstance(res, dict) and (("case" in res and "xp" in res) or "peer" in res) or \
        rec["name"].startswith(("cupy_", "numpy_", "torch_"))


def num(v, f="{:.4g}"):
    return "—" if v is None else f.format(v)


def ratio(a, b):
    return a / b if a and b else None


def short(cmd):
    """A logged command line as a reader would type it: `dsolve ...` (with mpirun -np N where N > 1
    and the run's own variables), or the peer script's line; without the job-wide parts."""
    if not cmd:
        return ""
    words = cmd.split(" ")
    np_ = re.search(r"(?:^| )-np (\d+)", cmd)
    env = [w for w in words if re.match(r"(DSOLVE_LOGREG_UNFUSED|DSOLVE_GRAM_\w+|OPENBLAS_\w+)=", w)]
    for i, w in enumerate(words):
        if w.endswith("/dsolve") or w == "dsolve":
            rest = [v for v in words[i + 1:] if v not in ("--json", "--quiet")]
            pre = env + ([f"mpirun -np {np_[1]}"] if np_ and int(np_[1]) > 1 else [])
            return " ".join(pre + ["dsolve"] + rest)
        if w.endswith(".py") and "peer_warm" not in w:
            return " ".join(["python3", os.path.basename(w)] + words[i + 1:])
    return cmd


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out + [""]


# ---------------------------------------------------------------------------------------------------
# One section per workload


def sec_header(job):
    recs = job.recs
    first = recs[0] if recs else {}
    model = first.get("gpu_model") or "no GPU"
    ran = [r for r in recs if r.get("ok") is not None]
    bad = [r for r in ran if not r["ok"]]
    skipped = [r for r in recs if r.get("skipped")]
    dirty = {True: " (with uncommitted changes)", False: "", None: ""}[first.get("dirty")]
    out = ["# dsolve measurements", "",
           f"- date: {first.get('date', '?')} (UTC); host {first.get('host', '?')}, {first.get('cores', '?')} cores",
           f"- GPUs: {first.get('gpus')} × {model}" + (f" ({first['gpu_mib']} MiB)" if first.get("gpu_mib") else "")
           if first.get("gpus") else "- GPUs: none",
           f"- commit: {first.get('commit', 'unknown')}{dirty}",
           f"- parts: {', '.join(job.parts())}",
           f"- runs: {len(ran) - len(bad)} passed, {len(bad)} failed, {len(skipped)} skipped", ""]
    if bad:
        out += ["**Failed:**", ""] + [f"- {r['part']}/{r['name']} (status {r.get('rc')}): {r.get('error', '')}" for r in bad] + [""]
    if skipped:
        out += ["Skipped: " + "; ".join(f"{r['part']}/{r['name']} ({r['skipped']})" for r in skipped), ""]
    out += ["Times are dsolve's own (medians after a warm-up, device events on the GPU); peers are warmed "
            "up and run in this job; ratio = peer time / dsolve time.", ""]
    return out


def sec_solve(job):
    if not any(r["part"] == "solve" for r in job.recs):
        return []
    h200 = "H200" in (job.recs[0].get("gpu_model") or "")
    rows = []
    for name, peer in (("seed_b100", "cupy_solvebak_b100"), ("seed_b100_residual", "cupy_solvebak_b100"),
                       ("seed_b100_f32", "cupy_solvebak_b100"), ("seed_b1", "cupy_solvebak_b1"),
                       ("seed_b1_residual", "cupy_solvebak_b1"), ("seed_cholesky", None),
                       ("seed_cholesky_low", None)):
        j, p, rec = job.get("solve", name), peer and job.peer(peer), job.rec("solve", name)
        if not rec:
            continue
        if not j:
            rows.append([name, f"`{short(rec.get('command'))}`", "not measured", "", "", "", ""])
            continue
        if j.get("method") == "cholesky":
            rows.append([name, f"`{short(rec['command'])}`", f"**{t(j['solve_seconds'])}**",
                         f"cholesky: X'X ({j.get('gram_precision')}) {t(j.get('setup_seconds'))}, factor and solve "
                         f"{t(j.get('sweep_seconds'))}, refinement {t(j.get('refine_seconds'))} "
                         f"({j.get('refine_steps')} steps, {j.get('passes')} passes over X)",
                         num(j.get("rel_residual"), "{:.2g}"), "—", ""])
            continue
        dg = ""
        if h200 and j.get("method") == "gram" and j.get("setup_seconds"):
            dg = f" ({100 * j['rows'] * j['cols'] ** 2 / j['ranks'] / j['setup_seconds'] / H200_DGEMM:.0f} % of DGEMM)"
        rows.append([name, f"`{short(rec['command'])}`", f"**{t(j['solve_seconds'])}**",
                     f"{j['method']}: setup {t(j.get('setup_seconds'))}{dg}, sweeps {t(j.get('sweep_seconds'))}",
                     num(j.get("rel_residual"), "{:.2g}"),
                     f"CuPy {t(p['seconds'])}" if p else "—", x(ratio(p and p["seconds"], j["solve_seconds"]))])
    out = ["## SolveBak, seed problem: 100 000 × 1 000 f64, 10 sweeps", ""]
    out += table(["run", "command", "dsolve", "parts", "rel. residual", "peer (seed's CuPy, warm)", "ratio"], rows) if rows else []
    b100, chol = job.get("solve", "seed_b100"), job.get("solve", "seed_cholesky")
    for key, label in (("torch normal equations (GEMM + Cholesky)", "torch X.T@X + Cholesky"),
                       ("torch.linalg.lstsq (QR)", "torch.linalg.lstsq (QR)")):
        p = job.peer("torch_lstsq", "peer", key)
        if p:
            line = (f"- {label}: {t(p['seconds'])} (rel. residual {p['rel_residual']:.2g}); "
                    f"against dsolve batch 100: {x(ratio(p['seconds'], b100 and b100['solve_seconds']))}")
            if chol:
                line += f"; against dsolve cholesky: {x(ratio(p['seconds'], chol['solve_seconds']))}"
            out.append(line)
    return out + [""] if len(out) > 2 else []


def sec_cpu(job):
    if not any(r["part"] == "cpu" for r in job.recs):
        return []
    rows = []
    for name, key, peer in (("solve_b100", "solve_seconds", "numpy_solvebak_b100"),
                            ("solve_b1", "solve_seconds", "numpy_solvebak_b1"),
                            ("solve_cholesky", "solve_seconds", "numpy_normal_eq"),
                            ("ann_seed", "seconds", "numpy_ann"), ("sort_i32_1e8", "seconds", "numpy_sort_1e8")):
        j, p, rec = job.get("cpu", name), job.peer(peer), job.rec("cpu", name)
        if not rec:
            continue
        extra = ""
        if j and name == "ann_seed":
            extra = f" (test r {j['test_r']:.8f})"
        if j and name.startswith("solve"):
            extra = f" ({j['method']})"
        if name == "solve_cholesky" and j:
            extra += f", rel. residual {j['rel_residual']:.2g}"
        rows.append([name, f"`{short(rec.get('command'))}`", (f"**{t(j[key])}**" + extra) if j else "not measured",
                     t(p["seconds"]) if p else "—", x(ratio(p and p["seconds"], j and j[key]))])
    out = ["## CPU backend against the seed's NumPy code on the same cores", ""]
    out += table(["run", "command", "dsolve", "NumPy, same job", "ratio"], rows) if rows else []
    lr = job.get("cpu", "logreg_default_np2")
    if lr:
        out += [f"- logreg, CPU backend, 2 ranks, default: test accuracy {lr['test_accuracy']:.4f} in {t(lr['seconds'])}", ""]
    return out if len(out) > 2 else []


def sec_ann(job):
    if not any(r["part"] == "ann" for r in job.recs):
        return []
    rows = []
    p = job.peer("cupy_ann")
    for rec in [r for r in job.recs if r["part"] == "ann" and not r.get("skipped") and not is_peer(r)]:
        j = rec.get("result") if rec.get("ok") else None
        if not j:
            rows.append([rec["name"], f"`{short(rec.get('command'))}`", "not measured", "", "", ""])
            continue
        parts = f"fit {t(j.get('fit_seconds'))}, H and HᵀH {t(j.get('hidden_seconds'))}, solve {t(j.get('solve_seconds'))}"
        quality = f"test r {j['test_r']:.8f}" if j.get("test_r") is not None else f"test accuracy {j.get('test_accuracy', 0):.4f}"
        peer = ratio_cell = "—"
        if rec["name"] == "ann_seed" and p:
            peer = f"CuPy {t(p['seconds'])} (hidden {t(p['inner_seconds'])} + output {t(p['outer_seconds'])}; test r {p['test_r']:.6f})"
            ratio_cell = x(ratio(p["seconds"], j["seconds"]))
        rows.append([rec["name"], f"`{short(rec['command'])}`", f"**{t(j['seconds'])}** ({parts})", quality, peer, ratio_cell])
    out = ["## ann: the network trained by least squares", ""]
    return out + table(["run", "command", "training", "quality", "peer (seed's CuPy, warm)", "ratio"], rows)


def sec_sort(job):
    if not any(r["part"] == "sort" for r in job.recs):
        return []
    cupy, torch = job.peer("cupy_sort_1e9"), job.peer("torch_sort_1e9")
    rows = []
    for rec in [r for r in job.recs if r["part"] == "sort" and r["name"].startswith("sort") and not r.get("skipped")]:
        j = rec.get("result") if rec.get("ok") else None
        if not j:
            rows.append([rec["name"], f"`{short(rec.get('command'))}`", "not measured", "", "", "", ""])
            continue
        cub = job.get("sort", rec["name"].replace("sort1_", "cub1_")) if rec["name"].startswith("sort1_") else None
        one = job.get("sort", "cub1_i32_uniform")
        if cub:
            ref = f"CUB alone {t(cub['seconds'])}: {x(ratio(cub['seconds'], j['seconds']))}"
        elif j["ranks"] > 1 and one and j["dtype"] == "int32":
            ref = f"{x(ratio(j['gkeys_per_s'], one['gkeys_per_s']))} one GPU's CUB"
        else:
            ref = "—"
        peers = "—"
        if j["keys"] == 10**9 and j["dtype"] == "int32" and j["dist"] == "uniform" and (cupy or torch):
            peers = ", ".join(f"{n} {t(q['seconds'])} ({x(ratio(q['seconds'], j['seconds']))})"
                              for n, q in (("cupy.sort", cupy), ("torch.sort", torch)) if q)
        phases = ""
        if j["ranks"] > 1:
            phases = (f"; local {t(j['local_sort_seconds'])}, splitters {t(j['splitter_seconds'])}, "
                      f"exchange {t(j['exchange_seconds'])}, merge {t(j['merge_seconds'])}")
        rows.append([rec["name"], f"`{short(rec['command'])}`", f"**{t(j['seconds'])}**",
                     f"{j['gkeys_per_s']:.4g} Gkeys/s, imbalance {j['imbalance']:.4f}{phases}",
                     f"verified {j['verified']}, path {j.get('path')}", ref, peers])
    out = ["## sort", ""]
    return out + table(["run", "command", "dsolve", "rate", "check", "against CUB alone, same job", "peers, same job (ratio)"], rows)


def sec_logreg(job):
    if not any(r["part"] == "logreg" for r in job.recs):
        return []
    rows = []
    for rec in [r for r in job.recs if r["part"] == "logreg" and not r.get("skipped") and not is_peer(r)]:
        j = rec.get("result") if rec.get("ok") else None
        if not j:
            rows.append([rec["name"], f"`{short(rec.get('command'))}`", "not measured", "", "", ""])
            continue
        rows.append([rec["name"], f"`{short(rec['command'])}`", f"{j['ranks']} × {j['precision']}, {j['model']}, {j['optimizer']}",
                     f"{j['test_accuracy']:.4f} (train {j['train_accuracy']:.4f})", f"**{t(j['seconds'])}**",
                     f"{1e3 * j['seconds_per_iteration']:.4g} ms" if j.get("seconds_per_iteration") else "—"])
    out = ["## logreg: Fashion-MNIST, 60 000 training samples", ""]
    out += table(["run", "command", "ranks, precision, model", "test accuracy", "time", "an iteration"], rows)
    fused, gemm = job.get("logreg", "gd100_f32"), job.get("logreg", "gd100_f32_gemm")
    if fused and gemm:
        out += [f"- 100 gd iterations f32: fused {t(fused['seconds'])}, cuBLAS's two GEMMs {t(gemm['seconds'])}: "
                f"{x(ratio(gemm['seconds'], fused['seconds']))}"]
    for name in ("seed_gd10_f64", "seed_gd10_f32"):
        j = job.get("logreg", name)
        if j:
            out += [f"- {name}: {t(j['seconds'])}; the seed's Numba code took 0.205 s on an H200 on 2026-11-21 "
                    f"(../shared/DEVICE.md, not this job): {x(ratio(0.205, j['seconds']))}"]
    return out + [""]


def bench_rows(job, part):
    """Every row of every bench case of a part: (record, case, row)."""
    for rec in job.recs:
        res = rec.get("result")
        if rec["part"] == part and rec.get("ok") and isinstance(res, dict) and "cases" in res:
            for case in res["cases"]:
                for row in case["rows"]:
                    yield rec, case, row


def sec_bench_table(job, part, title):
    rows = []
    for rec, case, r in bench_rows(job, part):
        unit = case.get("unit", "")
        ref = f"{rate(r.get('ref_rate'), unit)} ({num(r.get('of_ref'), '{:.3f}')})" if r.get("ref_rate") else "—"
        rows.append([rec["name"], case["case"], r["shape"], t(r.get("gpu_seconds")), rate(r.get("gpu_rate"), unit),
                     ref, t(r.get("cpu_seconds")),
                     x(r.get("speedup")), t(r.get("bcast_seconds")) if r.get("bcast_seconds") else "—",
                     f"{t(r.get('peer_seconds'))} ({x(r.get('peer_ratio'))})" if r.get("peer_seconds") else "—",
                     "OK" if r.get("ok") else "FAILED"])
    failed = [r for r in job.recs if r["part"] == part and r.get("ok") is False]
    if not rows and not failed:
        return []
    out = [f"## {title}", ""]
    out += table(["run", "case", "shape", "GPU", "GPU rate", "reference rate (of it)", "CPU", "GPU / CPU",
                  "broadcast", "bench's peer (ratio)", "check"], rows)
    crossing = []
    for rec in job.recs:
        res = rec.get("result")
        if rec["part"] == part and rec.get("ok") and isinstance(res, dict):
            for c in res.get("cases", []):
                if c.get("crossover") is not None and rec["name"].endswith("sweep"):
                    crossing.append(f"{c['case']} from {c['crossover']:g}")
    if crossing:
        out += [f"- crossover (GPU faster from): {', '.join(crossing)}", ""]
    return out


def sec_bench(job):
    out = sec_bench_table(job, "bench", "bench: matmul and add (f64; reference = cuBLAS alone / the device copy, same run)")
    if not out:
        return []
    def row(name, size):
        for rec, case, r in bench_rows(job, "bench"):
            if rec["name"] == name and r["size"] == size:
                return r
        return None
    notes = []
    r = row("matmul_sweep", 8192)
    if r:
        notes.append(f"- matmul N = 8192: {t(r['gpu_seconds'])}, {r['gpu_rate'] / 1e3:.1f} TFLOP/s, "
                     f"{num(r.get('of_ref'), '{:.3f}')} of cuBLAS alone in this run")
    r, p = row("matmul_sweep", 2000), job.peer("cupy_matmul_2000")
    if r:
        notes.append(f"- matmul N = 2000 (the seed's): {t(r['gpu_seconds'])}" + (
            f"; CuPy, same job: {t(p['seconds'])} ({x(ratio(p['seconds'], r['gpu_seconds']))})" if p else ""))
    r = row("add_sweep", 10**9)
    if r:
        notes.append(f"- add N = 10⁹: {num(r['gpu_rate'])} GB/s, {num(r.get('of_ref'), '{:.3f}')} of the device copy in this run")
    for size, peer in ((10**8, "cupy_add_1e8"), (1000, "cupy_add_1e3")):
        r, p = row("add_sweep", size), job.peer(peer)
        if r and p:
            notes.append(f"- add N = {size:g}: {t(r['gpu_seconds'])}; CuPy, same job: {t(p['seconds'])} "
                         f"({x(ratio(p['seconds'], r['gpu_seconds']))})")
    one, four = row("matmul_32k_np1", 32768), row("matmul_32k_np4", 32768)
    if one and four:
        notes.append(f"- matmul N = 32768 on 4 GPUs against 1: {x(ratio(one['gpu_seconds'], four['gpu_seconds']))} GEMM time, "
                     f"{x(ratio(one['gpu_seconds'], four['gpu_seconds'] + (four.get('bcast_seconds') or 0)))} with the broadcast of B")
    return out + notes + [""]


def sec_scaling(job):
    key = {"solve": "solve_seconds", "solve_residual": "solve_seconds", "ann": "seconds", "sort": "seconds"}
    size = {"solve": lambda j: f"{j['rows']:,} × {j['cols']}, {j['method']} route",
            "ann": lambda j: f"{j['rows']:,} × {j['cols']}, {j['neurons']} neurons",
            "sort": lambda j: f"{j['keys']:,} {j['dtype']}"}
    size["solve_residual"] = size["solve"]
    check = {"solve": lambda j: f"rel. residual {j['rel_residual']:.1e}",
             "ann": lambda j: f"test r {j['test_r']:.7f}",
             "sort": lambda j: f"verified {j['verified']}, imbalance {j['imbalance']:.4f}"}
    check["solve_residual"] = check["solve"]
    runs = {}
    for rec in job.recs:
        m = re.fullmatch(r"(solve|solve_residual|ann|sort)_(strong|weak)_np(\d+)", rec["name"])
        if rec["part"] == "scaling" and m and job.get("scaling", rec["name"]):
            runs.setdefault((m[1], m[2]), {})[int(m[3])] = rec
    if not runs:
        return []
    rows = []
    for (cmd, mode), by_np in sorted(runs.items()):
        t1 = job.get("scaling", by_np[1]["name"])[key[cmd]] if 1 in by_np else None
        for np_, rec in sorted(by_np.items()):
            j = rec["result"]
            rel = ratio(t1, j[key[cmd]])
            what = "—" if rel is None else (f"{rel:.2f}× speedup" if mode == "strong" else f"{100 * rel:.1f} % a GPU")
            rows.append([cmd, mode, np_, size[cmd](j), t(j[key[cmd]]), what, check[cmd](j), f"`{short(rec['command'])}`"])
    out = ["## Scaling over GPUs (strong: speedup t₁/t_P; weak: per-GPU efficiency t₁/t_P)", ""]
    return out + table(["command", "mode", "GPUs", "problem", "time", "against 1 GPU", "check", "run"], rows)


def sec_hdf5(job):
    g = next((r for r in job.recs if r["part"] == "hdf5" and r["name"] == "file_gen"), None)
    s = next((r for r in job.recs if r["part"] == "hdf5" and r["name"].startswith("file_solve")), None)
    if not g and not s:
        return []
    out = ["## From HDF5", ""]
    if g and g.get("ok") and g.get("result"):
        out.append(f"- `{short(g['command'])}`: {t(g['result'].get('seconds'))}")
    if s and s.get("ok") and s.get("result"):
        j = s["result"]
        out.append(f"- `{short(s['command'])}`: solve {t(j['solve_seconds'])}, total with I/O {t(j['total_seconds'])}, "
                   f"coefficient error {num(j.get('coef_error'), '{:.2g}')}")
    return out + [""]


def sec_ctest(job):
    out = []
    for rec in job.recs:
        if rec["part"] in ("ctest", "ctest-all") and rec["name"] == "tests":
            j = rec.get("result")
            label = "ctest -L gpu" if rec["part"] == "ctest" else "ctest (every test)"
            if not j:
                out.append(f"- {label}: no verdict (status {rec.get('rc')}): {rec.get('error', '')}")
                continue
            out.append(f"- {label}: {j['passed']} of {j['tests']} passed, {j['failed']} failed, "
                       f"{j.get('skipped', 0)} skipped, in {num(j['seconds'])} s"
                       + (f"; FAILED: {', '.join(j['failed_tests'])}" if j["failed_tests"] else "")
                       + (f"; skipped: {', '.join(j['not_run'])}" if j["not_run"] else ""))
    return ["## Tests", ""] + out + [""] if out else []


def sec_peers(job):
    rows = []
    for rec in job.recs:
        res = rec.get("result")
        if not isinstance(res, dict) or not rec.get("ok") or "seconds" not in res:
            continue
        if not ("case" in res and "xp" in res) and "peer" not in res:
            continue
        what = res.get("peer") or f"seed {res['case']} ({res['xp']})"
        form = {"rel_residual": "{:.2g}", "test_r": "{:.7f}", "gkeys_per_s": "{:.4g}", "gflops": "{:.4g}", "gbps": "{:.4g}"}
        extra = ", ".join(f"{k} " + form[k].format(res[k]) for k in form if isinstance(res.get(k), (int, float)))
        rows.append([rec["part"], rec["name"], what, t(res["seconds"]),
                     t(res.get("cold_seconds")) if "cold_seconds" in res else "—", extra])
    if not rows:
        return []
    out = ["## Peers (this job, warmed: the seed's scripts warm up themselves or in a first run in the same process)", ""]
    return out + table(["part", "run", "peer", "time", "first (cold) run", "result"], rows)


def key_figure(rec):
    res = rec.get("result")
    if rec.get("skipped"):
        return "skipped: " + rec["skipped"]
    if not rec.get("ok"):
        return "FAILED: " + rec.get("error", "")
    if not isinstance(res, dict):
        return ""
    if "cases" in res:
        return f"{sum(len(c['rows']) for c in res['cases'])} rows, ok {res.get('ok')}"
    if "tests" in res:
        return f"{res['passed']}/{res['tests']} passed, {res['failed']} failed, {res.get('skipped', 0)} skipped"
    for k in ("seconds", "solve_seconds"):
        if res.get(k) is not None:
            return t(res[k])
    return ""


def sec_runs(job):
    rows = [[r["part"], r["name"], num(r.get("wall_seconds"), "{:g}"), key_figure(r),
             f"`{r['command']}`" if r.get("command") else ""] for r in job.recs]
    return ["## Every run", ""] + table(["part", "run", "wall s", "figure", "command as run"], rows)


def summarize(outdir):
    """Writes outdir/summary.md from outdir/results.jsonl and returns its text."""
    job = Job(os.path.join(outdir, "results.jsonl"))
    lines = []
    for sec in (sec_header, sec_ctest, sec_solve, sec_ann, sec_sort, sec_logreg, sec_bench, sec_cpu, sec_scaling,
                sec_hdf5, lambda j: sec_bench_table(j, "bench-cases", "bench solve, ann, sort, logreg (the seed's code as bench's peer)"),
                lambda j: sec_bench_table(j, "bench-node", "bench all on the node"),
                lambda j: sec_bench_table(j, "methods", "bench solve: every method, and cholesky at larger sizes"),
                sec_peers, sec_runs):
        try:
            lines += sec(job)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:  # a section never hides the rest
            lines += [f"(a section could not be written: {type(e).__name__}: {e})", ""]
    text = "\n".join(lines)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    return text


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.split("\n\n")[0])
    print(summarize(sys.argv[1]))
